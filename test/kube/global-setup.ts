// Vitest global setup of the kube tier: finds the real Kubernetes binaries (KUBEBUILDER_ASSETS, else the cache of
// scripts/kube-binaries.mjs), building them first when Go is installed (the first run on a machine: minutes).
// Without Go and without binaries the tier is skipped, with one line saying how to get them; on CI (CI=true) that
// is a failure instead. The folder reaches the test workers as AGENTPLANE_KUBE_BINARIES (forked after this runs);
// the registry tools of the push-token test (scripts/registry-binaries.mjs) as AGENTPLANE_REGISTRY_BINARIES.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

export const BINARIES_ENV = 'AGENTPLANE_KUBE_BINARIES';
/** The folder of `registry` and `crane` (scripts/registry-binaries.mjs), for registry-push.test.ts. */
export const REGISTRY_BINARIES_ENV = 'AGENTPLANE_REGISTRY_BINARIES';

/** The script's folder of ready binaries (its last stdout line), or undefined when it failed. */
function binaries(build: boolean, script = 'kube-binaries.mjs'): string | undefined {
  const r = spawnSync(
    process.execPath,
    [join(import.meta.dirname, '../../scripts', script), ...(build ? [] : ['--check'])],
    {
      stdio: ['ignore', 'pipe', build ? 'inherit' : 'ignore'],
      encoding: 'utf8',
    },
  );
  if (r.status !== 0) {
    if (build) throw new Error(`node scripts/${script} failed (exit ${r.status ?? r.signal})`);
    return undefined;
  }
  return r.stdout.trim().split('\n').pop();
}

export default function setup(): void {
  const hasGo = spawnSync('go', ['version'], { stdio: 'ignore' }).status === 0;
  // The registry test skips without these (and fails on CI), the others run.
  const registry =
    binaries(false, 'registry-binaries.mjs') ?? (hasGo ? binaries(true, 'registry-binaries.mjs') : undefined);
  if (registry) process.env[REGISTRY_BINARIES_ENV] = registry;
  const folder = binaries(false) ?? (hasGo && !process.env.KUBEBUILDER_ASSETS ? binaries(true) : undefined);
  if (folder) {
    process.env[BINARIES_ENV] = folder;
    return;
  }
  const how =
    'no Kubernetes binaries: install Go (https://go.dev/doc/install) so that `node scripts/kube-binaries.mjs` builds them, or point KUBEBUILDER_ASSETS at a folder with etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and kwok-stages.yaml (as the script leaves them)';
  if (process.env.CI === 'true') throw new Error(`kube tier cannot run on CI: ${how}`);
  process.stderr.write(`kube tier skipped: ${how}\n`);
}
