// The operator over the embedded store and the local runtime: deployments written straight into the store (as
// `kubectl apply` would) get revisions, builds and traffic; a converged deployment reconciles without writes.
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEmbeddedPlatformState } from '../../src/state/embedded/index.ts';
import type { PlatformState } from '../../src/state/types.ts';
import {
  API_VERSION,
  deploymentName,
  findCondition,
  revisionName,
  type AgentDeployment,
  type AgentRevision,
} from '../../src/resources/index.ts';
import { createOperator, type Operator } from '../../src/operator/operator.ts';
import { createDeploymentReconciler } from '../../src/operator/controllers/agentdeployment/controller.ts';
import { createRevisionReconciler } from '../../src/operator/controllers/agentrevision/controller.ts';
import { NOT_SERVING } from '../../src/operator/controllers/agentrevision/decide.ts';
import { LocalRuntime } from '../../src/operator/runtimes/local/index.ts';
import { deploymentProxy } from '../../src/operator/runtimes/local/proxy.ts';
import { storeLogSink } from '../../src/operator/sources.ts';
import { silentLogger } from '../../src/lib/logger.ts';
import { makeExampleRepo, type ExampleRepo } from './helpers/example-repo.ts';
import { LINKED_INSTALL } from '../support/linked-install.ts';

const NS = 'default';
let tmp: string;
let repo: ExampleRepo;
let store: PlatformState;
let writes: string[];
/** The operator's reads of the store (get / list), by kind. */
let reads: string[];
let counted: PlatformState;
let runtime: LocalRuntime;
let operator: Operator;
let app: FastifyInstance;

/** The store, counting every write the operator makes. */
function countingStore(inner: PlatformState, log: string[], reads: string[] = []): PlatformState {
  return new Proxy(inner, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (['create', 'update', 'updateStatus', 'delete', 'putSecrets'].includes(String(prop))) {
          const obj = args[1] as { metadata?: { name?: string } } | undefined;
          log.push(`${String(prop)} ${String(args[0])} ${obj?.metadata?.name ?? ''}`);
        }
        if (prop === 'get' || prop === 'list')
          reads.push(`${String(prop)} ${String(args[0])} ${String(args[2] ?? '')}`);
        return value.apply(target, args);
      };
    },
  });
}

function newDeployment(id: string, overrides: Partial<AgentDeployment['spec']> = {}): AgentDeployment {
  const name = deploymentName(id);
  return {
    apiVersion: API_VERSION,
    kind: 'AgentDeployment',
    metadata: { name, namespace: NS },
    spec: {
      deploymentId: id,
      tenantId: 'tenant-a',
      displayName: `dep-${id.slice(0, 8)}`,
      source: 'github',
      // The real npm ci of this flow (operator + local runtime) is pinned by test/e2e/dev.test.ts: linked here.
      sourceConfig: { repoUrl: repo.path, deploymentType: 'dev', accessMode: 'public', installCommand: LINKED_INSTALL },
      sourceRevisionConfig: { repoRef: 'v1', graphConfigPath: 'langgraph.json' },
      revisionCounter: 1,
      targetRevisionName: revisionName(name, 1),
      ...overrides,
    },
  };
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  for (let i = 0; ; i++) {
    const v = await probe();
    if (v !== undefined) return v;
    if (i > 2400) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function revisionIn(name: string, phases: string[]): Promise<AgentRevision> {
  return waitFor(`${name} in ${phases.join('|')}`, async () => {
    const rev = await store.get('AgentRevision', NS, name).catch(() => undefined);
    return rev && phases.includes(rev.status?.phase ?? '') ? rev : undefined;
  });
}

async function greeting(url: string): Promise<string> {
  const client = new Client({ apiUrl: url });
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, 'agent', {
    input: { messages: [{ role: 'human', content: 'Bo' }] },
  });
  await client.runs.join(thread.thread_id, run.run_id);
  const state = await client.threads.getState<{ messages: { content: unknown }[] }>(thread.thread_id);
  return String(state.values.messages.at(-1)!.content);
}

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-operator-'));
  repo = makeExampleRepo(tmp);
  store = openEmbeddedPlatformState({ dataDir: ':memory:' });
  writes = [];
  reads = [];
  counted = countingStore(store, writes, reads);
  runtime = new LocalRuntime({
    agentExecutorThreads: 0,
    dataDir: join(tmp, 'data'),
    logs: storeLogSink(store),
    logger: silentLogger(),
    stopGraceMs: 3000,
    allowLocalRepos: [tmp],
  });
  app = Fastify();
  await deploymentProxy(app, { resolve: (id) => runtime.backend(id) });
  runtime.setBaseUrl(await app.listen({ host: '127.0.0.1', port: 0 }));
  operator = createOperator({ store: counted, runtime, logger: silentLogger() });
  await operator.start();
});

afterAll(async () => {
  await operator?.stop();
  await runtime?.shutdown();
  await app?.close();
  await store?.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe('operator with the local runtime', () => {
  it('turns a deployment written into the store into a live, idempotently reconciled, redeployable service', async () => {
    const id = randomUUID();
    const created = await store.create('AgentDeployment', newDeployment(id));
    const name = created.metadata.name;
    const r1 = revisionName(name, 1);

    const rev1 = await revisionIn(r1, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED']);
    expect(rev1.status).toMatchObject({ phase: 'DEPLOYED', repoCommitSha: repo.sha('v1') });
    expect(findCondition(rev1.status?.conditions, 'Built')?.status).toBe('True');
    expect(findCondition(rev1.status?.conditions, 'Ready')?.status).toBe('True');
    const dep = await waitFor('deployment status', async () => {
      const d = await store.get('AgentDeployment', NS, name);
      return d.status?.activeRevisionName === r1 ? d : undefined;
    });
    expect(dep.metadata.finalizers).toContain('agentplane.dev/runtime');
    expect(dep.status?.url).toBe(runtime.url({ namespace: NS, deployment: name, deploymentId: id }));
    expect(findCondition(dep.status?.conditions, 'Ready')).toMatchObject({
      status: 'True',
      observedGeneration: dep.metadata.generation,
    });
    expect(await greeting(dep.status!.url!)).toContain('Hello, Bo!');
    const buildLog = await store.readLogs(NS, r1, { type: 'build', limit: 1000, order: 'asc' });
    expect(buildLog.logs.map((l) => l.message).join('\n')).toContain(LINKED_INSTALL);
    // Dozens of reconciles got here, all reading the informers' caches: the store was listed once per kind (the
    // informers' start) and never asked for one object.
    expect(reads.filter((r) => / Agent(Deployment|Revision) /.test(r))).toEqual([
      'list AgentDeployment ',
      'list AgentRevision ',
    ]);

    // Converged: reconciling both kinds again writes nothing.
    writes.length = 0;
    const deps = { store: counted, runtime, logger: silentLogger() };
    const reconcileDeployment = createDeploymentReconciler(deps);
    const reconcileRevision = createRevisionReconciler(deps);
    for (let i = 0; i < 2; i++) {
      await reconcileDeployment(`${NS}/${name}`);
      await reconcileRevision(`${NS}/${r1}`);
    }
    expect(writes).toEqual([]);

    // The live agent server crashes: it is started again on the same data, the revision stays DEPLOYED.
    const [crashed] = runtime.pids();
    process.kill(crashed!, 'SIGKILL');
    await waitFor('a new server for r1', async () => {
      const pids = runtime.pids();
      return pids.length === 1 &&
        pids[0] !== crashed &&
        runtime.routedRevision({ namespace: NS, deployment: name, deploymentId: id }) === r1
        ? true
        : undefined;
    });
    expect(await greeting(dep.status!.url!)).toContain('Hello, Bo!');
    expect((await store.get('AgentRevision', NS, r1)).status?.phase).toBe('DEPLOYED');
    expect((await store.list('AgentRevision', NS)).items.filter((r) => r.spec.deploymentId === id)).toHaveLength(1);

    // A new revision (what PATCH does): built, routed, the old one stays DEPLOYED but stops serving.
    const r2 = revisionName(name, 2);
    const current = await store.get('AgentDeployment', NS, name);
    await store.update('AgentDeployment', {
      ...current,
      spec: {
        ...current.spec,
        sourceRevisionConfig: { ...current.spec.sourceRevisionConfig, repoRef: 'v2' },
        revisionCounter: 2,
        targetRevisionName: r2,
      },
    });
    await revisionIn(r2, ['DEPLOYED']);
    await waitFor('traffic on r2', async () =>
      runtime.routedRevision({ namespace: NS, deployment: name, deploymentId: id }) === r2 ? true : undefined,
    );
    expect(await greeting(dep.status!.url!)).toContain('Howdy, Bo!');
    expect((await store.get('AgentRevision', NS, r1)).status?.phase).toBe('DEPLOYED');
    // ... and says so, instead of still reading "Serving traffic."
    await waitFor('r1 to say it no longer serves', async () =>
      (await store.get('AgentRevision', NS, r1)).status?.statusMessage === NOT_SERVING ? true : undefined,
    );
    expect((await store.get('AgentRevision', NS, r2)).status?.statusMessage).toBe('Serving traffic.');

    // Redeploy r1: its build is on disk, so no build runs; traffic moves back.
    const logsBefore = (await store.readLogs(NS, r1, { type: 'build', limit: 1000, order: 'asc' })).logs.length;
    const again = await store.get('AgentDeployment', NS, name);
    await store.update('AgentDeployment', { ...again, spec: { ...again.spec, targetRevisionName: r1 } });
    await waitFor('traffic back on r1', async () => {
      const d = await store.get('AgentDeployment', NS, name);
      return d.status?.activeRevisionName === r1 ? d : undefined;
    });
    expect(await greeting(dep.status!.url!)).toContain('Hello, Bo!');
    expect((await store.readLogs(NS, r1, { type: 'build', limit: 1000, order: 'asc' })).logs.length).toBe(logsBefore);
    await waitFor('r1 to say it serves again, r2 that it does not', async () =>
      (await store.get('AgentRevision', NS, r1)).status?.statusMessage === 'Serving traffic.' &&
      (await store.get('AgentRevision', NS, r2)).status?.statusMessage === NOT_SERVING
        ? true
        : undefined,
    );

    // Delete: finalizer runs the cleanup, then the record and its revisions go.
    const pids = runtime.pids();
    await store.delete('AgentDeployment', NS, name);
    await waitFor('deployment gone', async () =>
      (await store.get('AgentDeployment', NS, name).catch(() => undefined)) ? undefined : true,
    );
    for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow();
    expect(existsSync(join(tmp, 'data', 'deployments', id))).toBe(false);
    expect((await store.list('AgentRevision', NS)).items.filter((r) => r.spec.deploymentId === id)).toEqual([]);
    expect((await fetch(`${dep.status!.url}/ok`)).status).toBe(404);
  }, 240_000);

  it('fails external_docker revisions at creation, saying why', async () => {
    const id = randomUUID();
    const created = await store.create(
      'AgentDeployment',
      newDeployment(id, { source: 'external_docker', sourceRevisionConfig: { imageUri: 'example/agent:1' } }),
    );
    const rev = await revisionIn(revisionName(created.metadata.name, 1), ['CREATE_FAILED']);
    expect(rev.status?.statusMessage).toMatch(/container runtime/);
    expect(findCondition(rev.status?.conditions, 'Ready')).toMatchObject({ status: 'False', reason: 'CREATE_FAILED' });
  });
});
