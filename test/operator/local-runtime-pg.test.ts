// The local runtime with --database-url: each deployment gets its own Postgres database, revisions overlap during
// a switch (several agent servers may share a Postgres database), and cleanup drops the database.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import pg from 'pg';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseNameFor, LocalRuntime } from '../../src/operator/runtimes/local/index.ts';
import { deploymentProxy } from '../../src/operator/runtimes/local/proxy.ts';
import type { BuildSpec, RevisionRef } from '../../src/operator/runtimes/types.ts';
import { silentLogger } from '../../src/lib/logger.ts';
import { makeExampleRepo, type ExampleRepo } from './helpers/example-repo.ts';

const SERVER_URL = 'postgres://postgres@127.0.0.1:5432/postgres';
const dep = { namespace: 'default', deployment: 'pg-agent', deploymentId: randomUUID() };

let tmp: string;
let repo: ExampleRepo;
let runtime: LocalRuntime;
let app: FastifyInstance;

async function databaseExists(name: string): Promise<boolean> {
  const c = new pg.Client({ connectionString: SERVER_URL });
  await c.connect();
  try {
    return ((await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount ?? 0) > 0;
  } finally {
    await c.end();
  }
}

async function settle<T extends { phase: string }>(ask: () => Promise<T>, phases: string[]): Promise<T> {
  for (;;) {
    const s = await ask();
    if (phases.includes(s.phase)) return s;
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function up(revision: string, repoRef: string): Promise<void> {
  const spec: BuildSpec = { ...dep, revision, repoUrl: repo.path, repoRef, graphConfigPath: 'langgraph.json' };
  expect(await settle(() => runtime.build(spec), ['Succeeded', 'Failed'])).toMatchObject({ phase: 'Succeeded' });
  const server = { ...dep, revision, graphConfigPath: 'langgraph.json', env: {} };
  expect(await settle(() => runtime.deploy(server), ['Ready', 'Failed'])).toEqual({ phase: 'Ready' });
}

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-local-runtime-pg-'));
  repo = makeExampleRepo(tmp);
  runtime = new LocalRuntime({ dataDir: join(tmp, 'data'), logs: { append: async () => {} }, logger: silentLogger(), databaseUrl: SERVER_URL });
  app = Fastify();
  await deploymentProxy(app, { resolve: (id) => runtime.backend(id) });
  runtime.setBaseUrl(await app.listen({ host: '127.0.0.1', port: 0 }));
});

afterAll(async () => {
  await runtime?.shutdown();
  await app?.close();
  const c = new pg.Client({ connectionString: SERVER_URL });
  await c.connect();
  await c.query(`DROP DATABASE IF EXISTS "${databaseNameFor(dep.deploymentId)}" WITH (FORCE)`);
  await c.end();
  rmSync(tmp, { recursive: true, force: true });
});

describe('LocalRuntime with Postgres', () => {
  it('gives the deployment its own database, keeps threads across revisions, drops it on cleanup', async () => {
    const dbName = databaseNameFor(dep.deploymentId);
    expect(dbName.startsWith('ap_dev_')).toBe(true);
    await up('pg-agent-r1', 'main');
    expect(await databaseExists(dbName)).toBe(true);
    await runtime.route(dep, 'pg-agent-r1');
    const client = new Client({ apiUrl: runtime.url(dep) });
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, 'agent', { input: { messages: [{ role: 'human', content: 'Cy' }] } });
    await client.runs.join(thread.thread_id, run.run_id);

    // Both servers run at once on the shared database; traffic moves without a pause.
    await up('pg-agent-r2', 'v2');
    const r1Ref: RevisionRef = { ...dep, revision: 'pg-agent-r1' };
    expect(runtime.serverStatus(r1Ref)).toEqual({ phase: 'Ready' });
    await runtime.route(dep, 'pg-agent-r2');
    expect(runtime.routedRevision(dep)).toBe('pg-agent-r2');
    const state = await client.threads.getState<{ messages: { content: unknown }[] }>(thread.thread_id);
    expect(String(state.values.messages.at(-1)!.content)).toContain('Hello, Cy!');
    const run2 = await client.runs.create(thread.thread_id, 'agent', { input: { messages: [{ role: 'human', content: 'Cy' }] } });
    await client.runs.join(thread.thread_id, run2.run_id);
    const after = await client.threads.getState<{ messages: { content: unknown }[] }>(thread.thread_id);
    expect(after.values.messages).toHaveLength(8);
    expect(String(after.values.messages.at(-1)!.content)).toContain('Howdy, Cy!');

    await runtime.cleanup(dep);
    expect(await databaseExists(dbName)).toBe(false);
    expect(runtime.pids()).toEqual([]);
  }, 180_000);
});
