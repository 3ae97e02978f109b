// Builds the container registry tools the kube tier's push-token test runs (test/kube/registry-push.test.ts): CNCF
// Distribution's `registry` (the reference registry, with token authentication) and go-containerregistry's `crane` (a
// registry client: docker login/push without a daemon), from their Go modules at the versions pinned below, into
// ~/.cache/agentplane/registry/<versions>/ (AGENTPLANE_REGISTRY_CACHE moves the root). Idempotent: a binary already
// built is kept. Prints the folder on its last stdout line.
//   node scripts/registry-binaries.mjs            build what is missing
//   node scripts/registry-binaries.mjs --check    print the folder if both binaries are there, exit 1 otherwise
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

// The newest releases the Go module proxy served when this was written (2026-12-02).
export const VERSIONS = { distribution: 'v3.1.2', ggcr: 'v0.22.1' };
const PACKAGES = {
  registry: `github.com/distribution/distribution/v3/cmd/registry@${VERSIONS.distribution}`,
  crane: `github.com/google/go-containerregistry/cmd/crane@${VERSIONS.ggcr}`,
};

export function cacheFolder() {
  const root = process.env.AGENTPLANE_REGISTRY_CACHE ?? path.join(os.homedir(), '.cache', 'agentplane', 'registry');
  return path.join(root, `distribution-${VERSIONS.distribution}_ggcr-${VERSIONS.ggcr}`);
}

function main() {
  const out = cacheFolder();
  const missing = Object.keys(PACKAGES).filter((b) => !existsSync(path.join(out, b)));
  if (missing.length === 0 || process.argv.includes('--check')) {
    if (missing.length > 0) {
      console.error(`registry binaries: ${missing.join(', ')} missing in ${out}`);
      process.exit(1);
    }
    console.log(out);
    return;
  }
  if (spawnSync('go', ['version'], { stdio: 'ignore' }).status !== 0) {
    throw new Error('Go is not installed: https://go.dev/doc/install (needed to build the registry binaries)');
  }
  mkdirSync(out, { recursive: true });
  for (const binary of missing) {
    const started = Date.now();
    // `go install` into a temporary GOBIN, then a rename: a killed build never leaves a half-written binary.
    const tmp = mkdtempSync(path.join(out, '.build-'));
    const r = spawnSync('go', ['install', '-trimpath', '-ldflags=-s -w', PACKAGES[binary]], {
      stdio: ['ignore', 'inherit', 'inherit'],
      env: { ...process.env, GOBIN: tmp, CGO_ENABLED: '0', GOTOOLCHAIN: 'local', GOFLAGS: '-buildvcs=false' },
    });
    if (r.status !== 0) {
      rmSync(tmp, { recursive: true, force: true });
      throw new Error(`go install ${PACKAGES[binary]} exited with ${r.status ?? r.signal}`);
    }
    renameSync(path.join(tmp, binary), path.join(out, binary));
    rmSync(tmp, { recursive: true, force: true });
    const size = (statSync(path.join(out, binary)).size / 2 ** 20).toFixed(1);
    console.error(
      `registry binaries: built ${binary} in ${((Date.now() - started) / 1000).toFixed(0)} s (${size} MiB)`,
    );
  }
  console.log(out);
}

if (import.meta.url === `file://${process.argv[1]}`) main();
