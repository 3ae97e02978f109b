// What the real-cluster tests share: polling with a named deadline, reading objects back from the API server, the
// chart's own Deployments read back as the processes the test runs (their arguments, environment and ServiceAccount),
// `agentplane` processes with their output in log files (the chart's control plane and operator among them), the
// control plane's REST API as a workspace admin, and the rollout of a Deployment as the cluster's own controllers
// made it.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CHART_DIR, helm } from '../support/helm/index.ts';
import { kubectl } from '../support/helm/index.ts';
import { freePort, type KubeControlPlane } from '../support/kube-control-plane.ts';

export type Json = Record<string, any>;

const root = join(import.meta.dirname, '../..');

/** Polls `check` until it returns a truthy value; throws naming what was awaited (and the last error) after `ms`. */
export async function until<T>(what: string, check: () => T | Promise<T>, ms = 60_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** `helm install agentplane <chart>` into `ns` as the admin, each value given with --set-json; waits for its pods. */
export function helmInstall(kubeconfig: string, ns: string, values: Record<string, unknown>): void {
  const installed = helm([
    'install',
    'agentplane',
    CHART_DIR,
    '-n',
    ns,
    '--kubeconfig',
    kubeconfig,
    '--wait',
    '--timeout',
    '3m',
    ...Object.entries(values).flatMap(([k, v]) => ['--set-json', `${k}=${JSON.stringify(v)}`]),
  ]);
  if (!installed.ok) throw new Error(`helm install: ${installed.stderr}`);
}

/** The release namespace as docs/kubernetes.md has the admin create it: Pod Security "restricted" enforced. */
export async function restrictedNamespace(kubeconfig: string, ns: string): Promise<void> {
  await kubectl(['create', 'namespace', ns], kubeconfig);
  await kubectl(['label', 'namespace', ns, 'pod-security.kubernetes.io/enforce=restricted'], kubeconfig);
}

/** The control plane's REST API at `base()` as `tenant` with API key `key`: the status and the JSON body. */
export function restAs(base: () => string, key: string, tenant: string) {
  return async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base()}${path}`, {
      method,
      headers: { 'x-api-key': key, 'x-tenant-id': tenant, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Json) : {} };
  };
}

/**
 * One test file's view of a cluster: `kube` for the API, `dir` for the processes' log files and `cwd` for their
 * working folder. Processes started through it are stopped (SIGTERM, awaited) by `stopAll`.
 */
export function clusterBed(kube: () => KubeControlPlane, dir: () => string, cwd: () => string = () => root) {
  const processes = new Map<string, ChildProcess>();

  /** The object at `path`, undefined on 404; any other status throws with the API server's answer. */
  const get = async (path: string): Promise<Json | undefined> => {
    const res = await kube().request('GET', path);
    if (res.status === 404) return undefined;
    if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };

  /** The last `lines` lines of process `name`'s output. */
  const logOf = (name: string, lines = 40) => {
    try {
      return readFileSync(join(dir(), `${name}.log`), 'utf8')
        .split('\n')
        .slice(-lines)
        .join('\n');
    } catch {
      return '';
    }
  };

  /**
   * A chart Deployment's container as the cluster stores it: arguments after the subcommand, plain env values and,
   * with `secrets`, the values of secretKeyRefs read from that Secret in `ns` as the kubelet would (otherwise the
   * test sets those itself).
   */
  const chartContainer = async (ns: string, component: string, { secrets = false } = {}) => {
    const d = await get(`/apis/apps/v1/namespaces/${ns}/deployments/agentplane-${component}`);
    if (!d) throw new Error(`the chart installed no Deployment agentplane-${component}`);
    const c = d.spec.template.spec.containers[0];
    const env: Record<string, string> = {};
    for (const e of c.env ?? []) {
      if (typeof e.value === 'string') env[e.name] = e.value;
      const ref = e.valueFrom?.secretKeyRef;
      if (ref && secrets) {
        const s = await get(`/api/v1/namespaces/${ns}/secrets/${ref.name}`);
        if (!s) throw new Error(`${component}: env ${e.name} refers to Secret ${ref.name}, which does not exist`);
        env[e.name] = Buffer.from(s.data[ref.key], 'base64').toString('utf8');
      }
    }
    return { args: c.args as string[], env, serviceAccount: d.spec.template.spec.serviceAccountName as string };
  };

  /** `agentplane <args>` as a process of its own; its output goes to <name>.log in `dir`. */
  const startAgentplane = (name: string, args: string[], env: Record<string, string>) => {
    const fd = openSync(join(dir(), `${name}.log`), 'a');
    const child = spawn(process.execPath, [join(root, 'bin/agentplane.mjs'), ...args], {
      cwd: cwd(),
      stdio: ['ignore', fd, fd],
      env: { PATH: process.env.PATH ?? '', HOME: dir(), ...env },
    });
    closeSync(fd);
    processes.set(name, child);
    return child;
  };

  /** Throws `err` with the last lines of process `name`'s output. */
  const withLogOf = (name: string) => (err: unknown) => {
    throw new Error(`${String(err)}\n${logOf(name)}`);
  };

  /**
   * The chart's control plane in `ns` as its Deployment runs it, under its ServiceAccount's token, on 127.0.0.1 with
   * `adminKey` as the bootstrap key of every workspace; resolves with its URL once /ok answers.
   */
  const startControlPlane = async (ns: string, adminKey: string, env: Record<string, string> = {}) => {
    const cp = await chartContainer(ns, 'control-plane');
    const port = await freePort();
    const kubeconfig = (await kube().as(ns, cp.serviceAccount)).kubeconfigPath;
    startAgentplane(
      'agentplane-control-plane',
      [...cp.args, '--kubeconfig', kubeconfig, '--host', '127.0.0.1', '--port', String(port)],
      {
        ...cp.env,
        AGENTPLANE_BOOTSTRAP_API_KEY: adminKey,
        AGENTPLANE_BOOTSTRAP_TENANTS: '*',
        LOG_LEVEL: 'warn',
        ...env,
      },
    );
    const base = `http://127.0.0.1:${port}`;
    await until('the control plane /ok', async () => (await fetch(`${base}/ok`)).ok).catch(
      withLogOf('agentplane-control-plane'),
    );
    return base;
  };

  /**
   * An operator replica in `ns` as the chart's Deployment runs it, under its ServiceAccount's token (POD_NAME `pod` is
   * its Lease identity; its output is <pod>.log); resolves with its health port once /readyz answers, which it does
   * also while standing by for the Lease.
   */
  const startOperator = async (
    ns: string,
    pod: string,
    { env = {}, secrets = false, name = pod }: { env?: Record<string, string>; secrets?: boolean; name?: string } = {},
  ) => {
    const op = await chartContainer(ns, 'operator', { secrets });
    const healthPort = await freePort();
    const kubeconfig = (await kube().as(ns, op.serviceAccount)).kubeconfigPath;
    startAgentplane(name, [...op.args, '--kubeconfig', kubeconfig, '--health-port', String(healthPort)], {
      ...op.env,
      POD_NAME: pod,
      POD_NAMESPACE: ns,
      LOG_LEVEL: 'warn',
      ...env,
    });
    await until('the operator /readyz', async () => (await fetch(`http://127.0.0.1:${healthPort}/readyz`)).ok).catch(
      withLogOf(name),
    );
    return healthPort;
  };

  /** Stops every process started here that still runs, and waits for each to exit. */
  const stopAll = async () => {
    for (const child of processes.values()) {
      if (child.exitCode !== null || child.signalCode !== null) continue;
      const gone = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await gone;
    }
  };

  /** The ReplicaSets the Deployment controller made for Deployment `name` in `ns`, and their pods. */
  const rollout = async (ns: string, name: string) => {
    const d = (await get(`/apis/apps/v1/namespaces/${ns}/deployments/${name}`))!;
    const sets = ((await get(`/apis/apps/v1/namespaces/${ns}/replicasets`))!.items as Json[]).filter((x) =>
      x.metadata.ownerReferences?.some((o: Json) => o.kind === 'Deployment' && o.uid === d.metadata.uid),
    );
    const pods = ((await get(`/api/v1/namespaces/${ns}/pods`))!.items as Json[]).filter((p) =>
      p.metadata.ownerReferences?.some((o: Json) => sets.some((rs) => rs.metadata.uid === o.uid)),
    );
    const image = (x: Json) => x.spec.template?.spec.containers[0].image ?? x.spec.containers[0].image;
    return { d, sets, pods, image };
  };

  /** True once every replica of the Deployment runs `image` on a kwok node, Ready, and no pod of another image is left. */
  const runs = async (ns: string, name: string, image: string) => {
    const r = await rollout(ns, name);
    const current = r.pods.filter((p) => !p.metadata.deletionTimestamp);
    return (
      current.length === (r.d.spec.replicas as number) &&
      current.every(
        (p) =>
          r.image(p) === image &&
          p.status.phase === 'Running' &&
          /^kwok-node-/.test(p.spec.nodeName ?? '') &&
          p.status.conditions?.some((c: Json) => c.type === 'Ready' && c.status === 'True'),
      )
    );
  };

  return {
    processes,
    get,
    logOf,
    chartContainer,
    startAgentplane,
    startControlPlane,
    startOperator,
    stopAll,
    rollout,
    runs,
  };
}
