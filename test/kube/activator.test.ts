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
import { mkdirSync } from 'node:fs';
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

describe.skipIf(!binaries)('idle deployments sleep and wake through the activator on a real control plane', () => {
  let kube: KubeControlPlane;
  let base = '';
  let agent: ServerProc;
  let activatorPort = 0;
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
    agent = await startServerProcess(['--config', CONFIG, '--data-dir', dataDir, '--host', '127.0.0.1']);
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

  it('a request for a host the activator does not serve is a 404 naming it', async () => {
    const unknown = await call(activatorPort, 'ag-nope.agentplane.svc', 'GET', '/info');
    expect(unknown.status).toBe(404);
    expect(unknown.text).toContain('ag-nope.agentplane.svc');
  });
});
