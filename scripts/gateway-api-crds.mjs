// Fetches the Gateway API CRDs (standard channel) the tests install: into the kube-apiserver double, so every
// HTTPRoute the operator writes is validated against the official schema, and into the real control plane of the
// kube tier. They come from the Go module proxy (sigs.k8s.io/gateway-api at the version pinned below, the release's
// config/crd/standard/*.yaml) into ~/.cache/agentplane/gateway-api/<version>/ (AGENTPLANE_GATEWAY_API_CACHE moves
// the root). Idempotent: a folder already filled is kept. Prints the folder on its last stdout line.
//   node scripts/gateway-api-crds.mjs            fetch when missing
//   node scripts/gateway-api-crds.mjs --check    print the folder if the CRDs are there, exit 1 otherwise
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

// The newest release the Go module proxy served when this was written (2026-12-02) that Go 1.26 can fetch (v1.7
// needs Go 1.27).
export const VERSION = 'v1.6.3';
const MODULE = `sigs.k8s.io/gateway-api@${VERSION}`;

export function cacheFolder() {
  const root =
    process.env.AGENTPLANE_GATEWAY_API_CACHE ?? path.join(os.homedir(), '.cache', 'agentplane', 'gateway-api');
  return path.join(root, VERSION);
}

function main() {
  const out = cacheFolder();
  if (existsSync(path.join(out, 'gateway.networking.k8s.io_httproutes.yaml')) || process.argv.includes('--check')) {
    if (!existsSync(path.join(out, 'gateway.networking.k8s.io_httproutes.yaml'))) {
      console.error(`gateway api crds: missing in ${out}`);
      process.exit(1);
    }
    console.log(out);
    return;
  }
  if (spawnSync('go', ['version'], { stdio: 'ignore' }).status !== 0) {
    throw new Error('Go is not installed: https://go.dev/doc/install (needed to fetch the Gateway API CRDs)');
  }
  // `go mod download` needs a module to run in; an empty one outside the repository does.
  const work = mkdtempSync(path.join(os.tmpdir(), 'gateway-api-'));
  try {
    const env = { ...process.env, GOTOOLCHAIN: 'local', GOFLAGS: '-mod=mod' };
    const init = spawnSync('go', ['mod', 'init', 'fetch'], { cwd: work, stdio: 'ignore', env });
    if (init.status !== 0) throw new Error('go mod init failed');
    const r = spawnSync('go', ['mod', 'download', '-json', MODULE], { cwd: work, encoding: 'utf8', env });
    if (r.status !== 0) throw new Error(`go mod download ${MODULE} exited with ${r.status ?? r.signal}: ${r.stderr}`);
    const dir = path.join(JSON.parse(r.stdout).Dir, 'config', 'crd', 'standard');
    // Into a temporary folder, then a rename: an interrupted copy never leaves a half-filled cache.
    mkdirSync(path.dirname(out), { recursive: true });
    const tmp = mkdtempSync(path.join(path.dirname(out), '.fetch-'));
    for (const f of readdirSync(dir).filter((n) => n.endsWith('.yaml')))
      copyFileSync(path.join(dir, f), path.join(tmp, f));
    renameSync(tmp, out);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  console.log(out);
}

if (import.meta.url === `file://${process.argv[1]}`) main();
