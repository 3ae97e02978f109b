// Idle deployments sleep and wake on a real Kubernetes control plane (test/support/kube-control-plane.ts): the chart
// installed with activator.enabled by the real helm; the control plane, the operator and the activator run as
// `agentplane` processes with the chart's arguments and environment, under tokens of the chart's ServiceAccounts (so
// every right they use is one the chart grants). Real: the API server, RBAC, the Deployment/ReplicaSet/EndpointSlice
// controllers and the scheduler placing pods on kwok nodes, the Service and the EndpointSlices as the cluster holds
// them, the agent server that answers (a real `agentplane agent-server` process). Not real: kwok pods run no
// container, so the two product options that say where a pod is reached (the operator's --agent-activity-url, the
// activator's --upstream-url) point at that agent server on 127.0.0.1 instead of the pods' fake addresses, and the
// test sends its requests to the activator process itself with the Host a client in the cluster would send
// (kube-proxy and an ingress controller are not there to route by the EndpointSlices).
import { request } from 'node:http';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startKubeControlPlane, type KubeControlPlane } from '../support/kube-control-plane.ts';
import { startServerProcess, type ServerProc } from '../agent-server/helpers/process.ts';
import { BINARIES_ENV } from './global-setup.ts';
import { clusterBed, helmInstall, restAs, restrictedNamespace, until, type Json } from './helpers.ts';

const binaries = process.env[BINARIES_ENV];
const NS = 'agentplane';
const TENANT = 'team-a';
const ADMIN_KEY = 'kube-activator-admin-key-7f3b19c2e0';
const IMAGE = 'ghcr.io/agentplane/example-agent:0.1.0';
const CONFIG = join(import.meta.dirname, '../agent-server/fixtures/sdk-fields/langgraph.json');

/** An HTTP request to `port` on 127.0.0.1 with the Host header of a client in the cluster. */
function call(port: number, host: string, method: string, path: string, body?: unknown) {
  return new Promise<{ status: number; headers: Record<string, unknown>; text: string }>((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port,
      method,
      path,
      headers: { host, 'content-type': 'application/json' },
    });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

/** A GET through `port` with the Host of the deployment and, when given, an Authorization header. */
function callWith(port: number, host: string, path: string, authorization?: string) {
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port,
      path,
      headers: { host, ...(authorization ? { authorization } : {}) },
    });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe.skipIf(!binaries)('idle deployments sleep and wake through the activator on a real control plane', () => {
  let kube: KubeControlPlane;
  let base = '';
  let agent: ServerProc;
  let activatorPort = 0;
  let tokenFile = '';
  const bed = clusterBed(
    () => kube,
    () => kube.dir,
  );
  const { get, logOf, startAgentplane } = bed;
  const rest = restAs(() => base, ADMIN_KEY, TENANT);

  beforeAll(async () => {
    kube = await startKubeControlPlane({ binaries: binaries! });
    const admin = kube.admin.kubeconfigPath;
    await restrictedNamespace(admin, NS);
    helmInstall(admin, NS, { 'activator.enabled': true, 'activator.checkIntervalSeconds': 2 });
    // The agent every pod of the deployment stands for.
    const dataDir = join(kube.dir, 'agent-data');
    mkdirSync(dataDir, { recursive: true });
    // The deployment's activity token goes here once the operator has made its Secret (as the kubelet mounts it).
    tokenFile = join(kube.dir, 'activity-token');
    agent = await startServerProcess([
      '--config',
      CONFIG,
      '--data-dir',
      dataDir,
      '--host',
      '127.0.0.1',
      '--activity-token-file',
      tokenFile,
    ]);
    const agentUrl = agent.url;

    base = await bed.startControlPlane(NS, ADMIN_KEY);
    // Every pod's activity is asked of the real agent server.
    await bed.startOperator(NS, 'agentplane-operator-0', {
      name: 'agentplane-operator',
      env: { LOG_LEVEL: 'info', AGENTPLANE_AGENT_ACTIVITY_URL: agentUrl },
    });

    const act = await bed.chartContainer(NS, 'activator');
    activatorPort = await freePort();
    startAgentplane(
      'agentplane-activator',
      [...act.args, '--kubeconfig', (await kube.as(NS, act.serviceAccount)).kubeconfigPath, '--host', '127.0.0.1'],
      // Every forward goes to the real agent server.
      { ...act.env, PORT: String(activatorPort), AGENTPLANE_UPSTREAM_URL: agentUrl, LOG_LEVEL: 'info' },
    );
    await until('the activator listening', () => logOf('agentplane-activator').includes('activator listening')).catch(
      (err) => {
        throw new Error(`${String(err)}\n${logOf('agentplane-activator')}`);
      },
    );
  });

  afterAll(async () => {
    if (kube) await bed.stopAll();
    await agent?.stop();
    await kube?.stop();
  });

  let id = '';
  let name = '';
  let since = '';
  const host = () => `${name}.${NS}.svc`;
  const deployment = () => get(`/apis/apps/v1/namespaces/${NS}/deployments/${name}`);
  const service = () => get(`/api/v1/namespaces/${NS}/services/${name}`);
  const activatorSlice = () => get(`/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices/${name}-activator`);

  it('an idle dev deployment sleeps: its Service points at the activator, its Deployment at 0 replicas, its status says Sleeping', async () => {
    const created = await rest('POST', '/v2/deployments', {
      name: 'kube-sleepy-agent',
      source: 'external_docker',
      source_config: { deployment_type: 'dev', resource_spec: { idle_timeout_minutes: 1 } },
      source_revision_config: { image_uri: IMAGE },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    id = String(created.body.id);
    name = `ag-${id}`;
    await until('the deployment DEPLOYED with a pod Ready', async () => bed.runs(NS, name, IMAGE), 90_000);
    // Its pods mount the activity token Secret the operator made; the agent server standing for them reads it.
    const pod = (await bed.rollout(NS, name)).pods[0] as Json;
    const mounted = pod.spec.volumes.find((v: Json) => v.name === 'activity').secret.secretName;
    expect(mounted).toBe(`${name}-activity`);
    const secret = (await get(`/api/v1/namespaces/${NS}/secrets/${mounted}`))!;
    const token = Buffer.from(secret.data.token, 'base64').toString('utf8');
    expect(token.length).toBeGreaterThanOrEqual(43);
    writeFileSync(tokenFile, token);
    // Someone reaching the agent through its public path (here the activator, as the Ingress would) learns nothing
    // of its activity: no token, a wrong one, a token-shaped guess.
    for (const authorization of [undefined, 'Bearer wrong', `Bearer ${token.slice(1)}`]) {
      const res = await callWith(activatorPort, host(), '/ok?activity=1', authorization);
      expect(res.status, String(authorization)).toBe(401);
      expect(res.text).not.toMatch(/open_requests|last_request_at|active_runs|next_due_at/);
    }
    expect((await call(activatorPort, host(), 'GET', '/ok')).status).toBe(200);
    // Awake: the Service selects the pods.
    await until('the Service selecting the pods', async () => (await service())?.spec.selector);

    // One minute without a request to the agent server, then the next look of the operator.
    const slept = await until(
      'the deployment asleep',
      async () => {
        const d = await deployment();
        return d?.metadata.annotations?.['agentplane.dev/sleeping-since'] && d.spec.replicas === 0 ? d : undefined;
      },
      150_000,
    ).catch((err) => {
      throw new Error(`${String(err)}\n${logOf('agentplane-operator')}`);
    });
    since = slept.metadata.annotations['agentplane.dev/sleeping-since'];
    const svc = (await service())!;
    expect(svc.spec.selector).toBeUndefined();
    expect(svc.metadata.annotations['agentplane.dev/sleeping-since']).toBe(since);
    // The slice of ours lists the activator's pod, as the EndpointSlice controller reports it.
    const slice = await until('the activator EndpointSlice', activatorSlice);
    const activatorPods = ((await get(`/api/v1/namespaces/${NS}/pods`))!.items as Json[]).filter(
      (p) => p.metadata.labels['app.kubernetes.io/component'] === 'activator',
    );
    expect(slice.metadata.labels['kubernetes.io/service-name']).toBe(name);
    expect(slice.endpoints.map((e: Json) => e.addresses[0]).sort()).toEqual(
      activatorPods.map((p) => p.status.podIP).sort(),
    );
    // The pods go (the ReplicaSet controller), and the platform says Sleeping, not down.
    await until('no agent pod left', async () => (await bed.rollout(NS, name)).pods.length === 0, 60_000);
    await until('health Sleeping', async () => {
      const d = (await rest('GET', `/v2/deployments/${id}`)).body;
      return d.health?.reason === 'Sleeping' ? d : undefined;
    });
  });

  it('requests through the activator share one wake: replicas back, the Service selects the pods again, each is answered', async () => {
    expect(since, 'the sleep test ran').not.toBe('');
    const started = Date.now();
    const answers = await Promise.all([
      call(activatorPort, host(), 'POST', '/threads', {}),
      call(activatorPort, host(), 'POST', '/threads', {}),
      call(activatorPort, `${host()}.cluster.local:80`, 'GET', '/info'),
    ]);
    const wakeMs = Date.now() - started;
    for (const a of answers) expect(a.status, a.text).toBe(200);
    expect(JSON.parse(answers[0]!.text).thread_id).toBeTruthy();
    expect(JSON.parse(answers[2]!.text).graphs).toContain('counter');
    // One wake for the three, naming the sleep it ends.
    expect(logOf('agentplane-activator', 400).match(/wake asked for/g)).toHaveLength(1);
    const dep = await get(`/apis/agentplane.dev/v1alpha1/namespaces/${NS}/agentdeployments/${name}`);
    expect(dep!.metadata.annotations['agentplane.dev/wake-requested']).toBe(since);
    const d = (await deployment())!;
    expect(d.spec.replicas).toBe(1);
    expect(d.metadata.annotations['agentplane.dev/sleeping-since']).toBeUndefined();
    expect((await service())!.spec.selector).toMatchObject({ 'app.kubernetes.io/instance': name });
    await until('the activator EndpointSlice removed', async () => !(await activatorSlice()));
    process.stdout.write(`wake through the activator (request to answer, 3 concurrent requests): ${wakeMs} ms\n`);
  });

  it('a sleeping deployment whose cron is due is woken by the operator at its wake-at, and the cron runs once', async () => {
    expect(since, 'the sleep test ran').not.toBe('');
    // A thread cron ticking once, a few seconds from now (a sixth field: seconds), created on the pod.
    const due = new Date(Date.now() + 12_000);
    const schedule = `${due.getUTCSeconds()} ${due.getUTCMinutes()} ${due.getUTCHours()} ${due.getUTCDate()} ${due.getUTCMonth() + 1} *`;
    const thread = (await (
      await fetch(`${agent.url}/threads`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      })
    ).json()) as Json;
    const cron = await fetch(`${agent.url}/threads/${thread.thread_id}/runs/crons`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ assistant_id: 'counter', schedule, input: {} }),
    });
    expect(cron.status, await cron.clone().text()).toBe(200);
    // What the pod tells the operator: this tick is its next due work.
    const token = readFileSync(tokenFile, 'utf8');
    const asked = await fetch(`${agent.url}/ok?activity=1`, { headers: { authorization: `Bearer ${token}` } });
    const nextDue = ((await asked.json()) as Json).activity.next_due_at as string;
    expect(Date.parse(nextDue)).toBe(Math.floor(due.getTime() / 1000) * 1000);
    // The sleep as the idle sweep records it (fallAsleep: sleeping-since, wake-at = the next due work, one
    // compare-and-swap update). The sweep's own verdict needs a whole idle window (a minute, the first test); with
    // a due cron it would wait two, so the record is written here and everything after it is the operator's.
    const sleptAt = new Date().toISOString();
    const d = (await deployment())!;
    d.metadata.annotations = {
      ...d.metadata.annotations,
      'agentplane.dev/sleeping-since': sleptAt,
      'agentplane.dev/wake-at': nextDue,
    };
    const put = await kube.request('PUT', `/apis/apps/v1/namespaces/${NS}/deployments/${name}`, d);
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    // Asleep: no replicas, the Service to the activator, until the tick.
    await until('the Deployment at 0 replicas', async () => (await deployment())?.spec.replicas === 0);
    await until(
      'the Service to the activator',
      async () => (await service())?.metadata.annotations?.['agentplane.dev/sleeping-since'] === sleptAt,
    );
    // The operator's next look past wake-at wakes it: replicas back, the Service selecting the pods again.
    const woken = await until(
      'the deployment woken by its due work',
      async () => {
        const now = await deployment();
        return now?.spec.replicas === 1 && !now.metadata.annotations?.['agentplane.dev/sleeping-since']
          ? now
          : undefined;
      },
      60_000,
    );
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(nextDue));
    expect(woken.metadata.annotations?.['agentplane.dev/wake-at']).toBeUndefined();
    await until('the Service selecting the pods', async () => (await service())?.spec.selector);
    // No request asked for this wake: the AgentDeployment still names the earlier sleep.
    const dep = await get(`/apis/agentplane.dev/v1alpha1/namespaces/${NS}/agentdeployments/${name}`);
    expect(dep!.metadata.annotations['agentplane.dev/wake-requested']).toBe(since);
    // The tick ran once, on its thread.
    const runs = await until('the cron run finished', async () => {
      const list = (await (await fetch(`${agent.url}/threads/${thread.thread_id}/runs`)).json()) as Json[];
      return list.length && list.every((r) => r.status === 'success') ? list : undefined;
    });
    expect(runs).toHaveLength(1);
  });

  it('a request for a host the activator does not serve is a 404 naming it', async () => {
    const unknown = await call(activatorPort, 'ag-nope.agentplane.svc', 'GET', '/info');
    expect(unknown.status).toBe(404);
    expect(unknown.text).toContain('ag-nope.agentplane.svc');
  });
});
