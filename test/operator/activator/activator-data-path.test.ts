// The activator's data path as a client sees it: real agent server processes stand for a deployment's pods, the
// Kubernetes API double (the real wire protocol) holds the Services, EndpointSlices and the AgentDeployment, and the
// test plays the two controllers the double does not run: the operator (it wakes the deployment once the activator
// asks, pointing the Service back at the pods) and the EndpointSlice controller (it lists the pods' endpoints, ready
// or not). The activator itself is the product's, listening on a real port; requests carry the Host a client in the
// cluster sends. What the real control plane adds (the operator's own wake, RBAC) is test/kube/activator.test.ts.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi, DiscoveryV1Api, type V1Service } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createActivator } from '../../../src/operator/activator/activator.ts';
import { Informer } from '../../../src/operator/controller-kit/informer.ts';
import type { Obj } from '../../../src/operator/runtimes/kubernetes/context.ts';
import { childListWatch } from '../../../src/operator/runtimes/kubernetes/list-watch.ts';
import { makeService } from '../../../src/operator/runtimes/kubernetes/routing.ts';
import { ANNOTATION_WAKE_REQUESTED, makeSleepingService } from '../../../src/operator/runtimes/kubernetes/sleep.ts';
import { silentLogger } from '../../../src/lib/logger.ts';
import { startServerProcess, type ServerProc } from '../../agent-server/helpers/process.ts';
import { startCluster, until, type TestCluster } from '../../support/kubernetes/cluster.ts';

const NS = 'agents';
const CONFIG = join(import.meta.dirname, '../../agent-server/fixtures/sdk-fields/langgraph.json');
const target = (name: string) => ({ namespace: NS, name, deploymentId: name.slice(3), tenantId: 'team-a' });

type Answer = { status: number; headers: Record<string, string | string[] | undefined>; text: string };

/** A request to the activator with the Host of a client in the cluster; `body` may be a stream of chunks. */
function call(
  port: number,
  host: string,
  method: string,
  path: string,
  body?: string | Buffer | Buffer[],
  headers: Record<string, string> = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port,
      method,
      path,
      headers: { host, ...(body ? { 'content-type': 'application/json' } : {}), ...headers },
    });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      res.on('error', reject);
    });
    // The activator may answer and close before a large body is all sent: the answer is what counts.
    req.on('error', (err) => (req.writableEnded ? undefined : reject(err)));
    if (Array.isArray(body)) {
      for (const c of body) req.write(c);
      req.end();
    } else req.end(body);
  });
}

/** The SSE events of a stream, in order: [event, data]. */
function sseEvents(text: string): [string, unknown][] {
  return text
    .split('\n\n')
    .filter((block) => block.includes('event:'))
    .map((block) => {
      const event = /^event: ?(.*)$/m.exec(block)![1]!;
      const data = block
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.replace(/^data: ?/, ''))
        .join('\n');
      return [event, data ? JSON.parse(data) : null];
    });
}

describe('the activator forwards', { timeout: 90_000 }, () => {
  let cluster: TestCluster;
  let core: CoreV1Api;
  let discovery: DiscoveryV1Api;
  let custom: CustomObjectsApi;
  let services: Informer<Obj<V1Service>>;
  const pods: ServerProc[] = [];
  const servers: Server[] = [];
  const dirs: string[] = [];
  /** The activator as deployed (a generous wake bound), and one with a short bound and a small body limit. */
  let port = 0;
  let strictPort = 0;
  let boundPort = 0;
  const STRICT_WAKE_MS = 1_500;
  const BOUND_MS = 6_000;
  const STRICT_BODY = 64 * 1024;

  const podPort = (i: number) => Number(new URL(pods[i]!.url).port);

  async function listen(wakeTimeoutMs: number, maxBodyBytes: number): Promise<number> {
    const activator = createActivator({
      kubeConfig: cluster.kubeConfig,
      namespace: NS,
      services,
      wakeTimeoutMs,
      maxBodyBytes,
      // Every endpoint of the slices below is on this machine.
      upstreamUrl: 'http://{ip}:{port}',
      logger: silentLogger(),
      pollMs: 50,
    });
    const server = createServer();
    activator.attach(server);
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return (server.address() as AddressInfo).port;
  }

  /** An AgentDeployment for the activator to ask a wake of, and its Service asleep since `since`. */
  async function sleeping(name: string, since: string): Promise<void> {
    await custom.createNamespacedCustomObject({
      group: 'agentplane.dev',
      version: 'v1alpha1',
      namespace: NS,
      plural: 'agentdeployments',
      body: {
        apiVersion: 'agentplane.dev/v1alpha1',
        kind: 'AgentDeployment',
        metadata: { name, labels: { 'agentplane.dev/tenant': 'team-a' } },
        spec: {
          deploymentId: name.slice(3),
          tenantId: 'team-a',
          displayName: name,
          source: 'external_docker',
          sourceConfig: { deploymentType: 'dev' },
          sourceRevisionConfig: { imageUri: 'ghcr.io/x/a:1' },
          revisionCounter: 1,
          targetRevisionName: `${name}-r1`,
        },
      },
    });
    await core.createNamespacedService({
      namespace: NS,
      body: makeSleepingService(makeService(target(name)), since),
    });
    await until('the activator seeing the sleeping Service', () => services.get(`${NS}/${name}`));
  }

  /** The EndpointSlice controller's slice for the Service: one endpoint on `port`, ready or not. */
  async function slice(service: string, suffix: string, endpointPort: number, conditions: Record<string, boolean>) {
    await discovery.createNamespacedEndpointSlice({
      namespace: NS,
      body: {
        metadata: {
          name: `${service}-${suffix}`,
          labels: {
            'kubernetes.io/service-name': service,
            'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io',
          },
        },
        addressType: 'IPv4',
        endpoints: [{ addresses: ['127.0.0.1'], conditions }],
        ports: [{ name: 'http', port: endpointPort, protocol: 'TCP' }],
      },
    });
  }

  /** What the operator does once a wake names this sleep: pods ready, the Service selecting them again. */
  async function wake(name: string, slices: () => Promise<void>): Promise<void> {
    await slices();
    await core.replaceNamespacedService({ name, namespace: NS, body: await awakeService(name) });
  }

  async function awakeService(name: string): Promise<V1Service> {
    const live = await core.readNamespacedService({ name, namespace: NS });
    const awake = makeService(target(name));
    return { ...awake, metadata: { ...awake.metadata, resourceVersion: live.metadata!.resourceVersion } };
  }

  const wakeRequested = async (name: string) => {
    const d = (await custom.getNamespacedCustomObject({
      group: 'agentplane.dev',
      version: 'v1alpha1',
      namespace: NS,
      plural: 'agentdeployments',
      name,
    })) as { metadata: { annotations?: Record<string, string> } };
    return d.metadata.annotations?.[ANNOTATION_WAKE_REQUESTED];
  };

  /** Threads a pod's store holds with this marker (each pod has its own store here). */
  const threadsWith = async (pod: number, marker: string) => {
    const res = await fetch(`${pods[pod]!.url}/threads/search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ metadata: { marker }, limit: 100 }),
    });
    return ((await res.json()) as unknown[]).length;
  };

  beforeAll(async () => {
    cluster = await startCluster(NS);
    core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    discovery = cluster.kubeConfig.makeApiClient(DiscoveryV1Api);
    custom = cluster.kubeConfig.makeApiClient(CustomObjectsApi);
    services = new Informer<Obj<V1Service>>(
      childListWatch(
        cluster.kubeConfig,
        'services',
        NS,
        'app.kubernetes.io/managed-by=agentplane-operator,app.kubernetes.io/component=server',
      ),
      { name: 'services', logger: silentLogger(), resyncMs: 0 },
    );
    await services.start();
    // Two pods of one deployment (each with a store of its own, so a test can tell which one answered).
    for (let i = 0; i < 2; i++) {
      const dir = mkdtempSync(join(tmpdir(), 'ap-activator-pod-'));
      dirs.push(dir);
      pods.push(await startServerProcess(['--config', CONFIG, '--data-dir', dir, '--host', '127.0.0.1']));
    }
    port = await listen(30_000, 10 * 1024 * 1024);
    strictPort = await listen(STRICT_WAKE_MS, STRICT_BODY);
    boundPort = await listen(BOUND_MS, STRICT_BODY);
  });

  afterAll(async () => {
    services?.stop();
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
    await Promise.all(pods.map((p) => p.stop()));
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
    await cluster?.close();
  });

  it('an event stream started while the deployment sleeps: every event, in order, as the pod sends them', async () => {
    const name = `ag-${randomUUID()}`;
    const since = new Date().toISOString();
    await sleeping(name, since);
    const host = `${name}.${NS}.svc.cluster.local`;
    const body = JSON.stringify({ assistant_id: 'counter', input: {}, stream_mode: ['values', 'updates'] });
    const streamed = call(port, host, 'POST', '/runs/stream', body);
    // The operator's part: once the activator asks for the end of this very sleep.
    await until('the wake asked for', async () => (await wakeRequested(name)) === since);
    await wake(name, () => slice(name, 'pod0', podPort(0), { ready: true }));
    const res = await streamed;
    expect(res.status, res.text).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
    const viaActivator = sseEvents(res.text);
    // The same run straight at the pod: the same events in the same order (run ids aside).
    const direct = await fetch(`${pods[0]!.url}/runs/stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    const strip = (evs: [string, unknown][]) =>
      evs.map(([e, d]) => [e, JSON.stringify(d).replace(/[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}/g, 'ID')]);
    expect(viaActivator.length).toBeGreaterThanOrEqual(3);
    expect(viaActivator[0]![0]).toBe('metadata');
    expect(strip(viaActivator)).toEqual(strip(sseEvents(await direct.text())));
  });

  it('a WebSocket of the thread protocol: the upgrade and the messages both ways, while the deployment wakes', async () => {
    const name = `ag-${randomUUID()}`;
    const since = new Date().toISOString();
    await sleeping(name, since);
    const host = `${name}.${NS}.svc`;
    const ws = new WebSocket(`ws://127.0.0.1:${port}/threads/${randomUUID()}/stream/events`, ['agentplane'], {
      headers: { host },
    });
    ws.on('error', () => undefined);
    const opened = new Promise<string>((resolve, reject) => {
      ws.once('open', () => resolve(ws.protocol));
      ws.once('unexpected-response', (_req, r) => reject(new Error(`upgrade refused: ${r.statusCode}`)));
    });
    await until('the wake asked for', async () => (await wakeRequested(name)) === since);
    await wake(name, () => slice(name, 'pod1', podPort(1), { ready: true }));
    try {
      expect(await opened).toBe('agentplane');
      const answer = new Promise<Record<string, unknown>>((resolve) =>
        ws.once('message', (d: Buffer) => resolve(JSON.parse(d.toString()) as Record<string, unknown>)),
      );
      ws.send(JSON.stringify({ id: 1, method: 'subscription.subscribe', params: { channels: ['values'] } }));
      expect(await answer).toMatchObject({ id: 1, type: 'success' });
    } finally {
      ws.close();
    }
  });

  it('to every ready pod in turn, never to one its slice marks NotReady or terminating', async () => {
    const name = `ag-${randomUUID()}`;
    await sleeping(name, new Date().toISOString());
    const closed = await freeClosedPort();
    await wake(name, async () => {
      await slice(name, 'a', podPort(0), { ready: true });
      await slice(name, 'starting', closed, { ready: false });
      await slice(name, 'b', podPort(1), { ready: true });
      await slice(name, 'leaving', closed, { ready: false, serving: true, terminating: true });
    });
    await until('the activator seeing the Service awake', () => services.get(`${NS}/${name}`)?.spec?.selector);
    const marker = randomUUID();
    for (let i = 0; i < 6; i++) {
      const res = await call(port, `${name}.${NS}`, 'POST', '/threads', JSON.stringify({ metadata: { marker } }));
      expect(res.status, res.text).toBe(200);
    }
    // Both pods took requests (not only the first slice's), and none went to the closed port.
    expect([await threadsWith(0, marker), await threadsWith(1, marker)]).toEqual([3, 3]);
  });

  it('a deployment that cannot wake: 503 with Retry-After at the bound, and the held request is never sent later', async () => {
    const name = `ag-${randomUUID()}`;
    const since = new Date().toISOString();
    await sleeping(name, since);
    const marker = randomUUID();
    const held = await call(
      strictPort,
      `${name}.${NS}.svc`,
      'POST',
      '/threads',
      JSON.stringify({ metadata: { marker } }),
    );
    expect(held.status).toBe(503);
    expect(Number(held.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(held.text).toContain('waking up');
    expect(await wakeRequested(name)).toBe(since);
    // The pod comes after all: a later request goes through, the refused one was not kept for it.
    await wake(name, () => slice(name, 'late', podPort(0), { ready: true }));
    await until('the activator seeing the Service awake', () => services.get(`${NS}/${name}`)?.spec?.selector);
    const later = await call(
      strictPort,
      `${name}.${NS}.svc`,
      'POST',
      '/threads',
      JSON.stringify({ metadata: { marker: `${marker}-later` } }),
    );
    expect(later.status, later.text).toBe(200);
    expect(await threadsWith(0, `${marker}-later`)).toBe(1);
    expect(await threadsWith(0, marker)).toBe(0);
  });

  it("each request is held for its own bound: one that joins a wake late is not refused at the first one's", async () => {
    const name = `ag-${randomUUID()}`;
    const since = new Date().toISOString();
    await sleeping(name, since);
    const host = `${name}.${NS}.svc`;
    const first = call(boundPort, host, 'POST', '/threads', JSON.stringify({ metadata: { marker: 'first' } }));
    await until('the wake asked for', async () => (await wakeRequested(name)) === since);
    // Half the bound later a second request joins the same wake; the pod is ready only after the first's bound.
    await new Promise((r) => setTimeout(r, BOUND_MS / 2));
    const marker = randomUUID();
    const second = call(boundPort, host, 'POST', '/threads', JSON.stringify({ metadata: { marker } }));
    expect((await first).status).toBe(503);
    await wake(name, () => slice(name, 'pod0', podPort(0), { ready: true }));
    const answered = await second;
    expect(answered.status, answered.text).toBe(200);
    expect(await threadsWith(0, marker)).toBe(1);
  });

  it('a body over the limit: 413 naming it, declared or streamed; one within it passes', async () => {
    const name = `ag-${randomUUID()}`;
    await sleeping(name, new Date().toISOString());
    await wake(name, () => slice(name, 'pod0', podPort(0), { ready: true }));
    await until('the activator seeing the Service awake', () => services.get(`${NS}/${name}`)?.spec?.selector);
    const host = `${name}.${NS}.svc`;
    const marker = randomUUID();
    const huge = JSON.stringify({ metadata: { marker, pad: 'x'.repeat(STRICT_BODY * 4) } });
    const declared = await call(strictPort, host, 'POST', '/threads', huge);
    expect(declared.status).toBe(413);
    expect(declared.text).toContain(`${STRICT_BODY} bytes`);
    // Chunked, no length given: counted as it passes, cut at the limit.
    const chunks = Array.from({ length: 8 }, () => Buffer.alloc(STRICT_BODY / 2, 0x20));
    const streamed = await call(strictPort, host, 'POST', '/threads', chunks, { 'transfer-encoding': 'chunked' });
    expect(streamed.status).toBe(413);
    expect(streamed.text).toContain(`${STRICT_BODY} bytes`);
    expect(await threadsWith(0, marker)).toBe(0);
    const small = await call(strictPort, host, 'POST', '/threads', JSON.stringify({ metadata: { marker } }));
    expect(small.status, small.text).toBe(200);
    expect(await threadsWith(0, marker)).toBe(1);
  });
});

/** A port nothing listens on (bound, then released). */
async function freeClosedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const p = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return p;
}
