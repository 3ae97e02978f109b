// The Gateway API CRDs (standard channel) of scripts/gateway-api-crds.mjs, fetched through the Go module proxy on
// first use and cached. Without Go (and no cache) the tests that need them skip with one line saying so; on CI
// (CI=true) that is a failure instead.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

/** The CRD file of HTTPRoute in the cached folder. */
export const HTTPROUTE_CRD = 'gateway.networking.k8s.io_httproutes.yaml';

let found: { dir?: string; why?: string } | undefined;

/** The folder holding the Gateway API CRDs, or undefined (after one line on stderr) when they cannot be had. */
export function gatewayApiCrds(): string | undefined {
  found ??= fetchCrds();
  if (found.dir) return found.dir;
  if (process.env.CI === 'true') throw new Error(`Gateway API CRDs: ${found.why}`);
  process.stderr.write(`Gateway API tests skipped: ${found.why}\n`);
  return undefined;
}

function fetchCrds(): { dir?: string; why?: string } {
  const script = join(import.meta.dirname, '../../scripts/gateway-api-crds.mjs');
  const run = (args: string[]) =>
    spawnSync(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });
  let r = run(['--check']);
  if (r.status !== 0) {
    if (spawnSync('go', ['version'], { stdio: 'ignore' }).status !== 0)
      return {
        why: 'Go is not installed (https://go.dev/doc/install), so `node scripts/gateway-api-crds.mjs` cannot fetch them',
      };
    r = run([]);
    if (r.status !== 0)
      return { why: `node scripts/gateway-api-crds.mjs failed: ${r.stderr.trim().split('\n').pop()}` };
  }
  return { dir: r.stdout.trim().split('\n').pop() };
}
