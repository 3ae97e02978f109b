// The local runtime with --database-url: each deployment gets its own Postgres database, revisions overlap during
// a switch (several agent servers may share a Postgres database), and cleanup drops the database.
import { randomUUID } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import pg from 'pg';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseNameFor, LocalRuntime, PACKAGE_DIR } from '../../../../src/operator/runtimes/local/index.ts';
import { detectSandbox, sharedTrees } from '../../../../src/operator/runtimes/local/sandbox.ts';
import { ensureDeploymentDatabase } from '../../../../src/operator/runtimes/local/postgres.ts';
import { deploymentProxy } from '../../../../src/operator/runtimes/local/proxy.ts';
import type { BuildSpec, RevisionRef } from '../../../../src/operator/runtimes/types.ts';
import { silentLogger } from '../../../../src/lib/logger.ts';
import { LINKED_INSTALL } from '../../../support/linked-install.ts';
import { makeExampleRepo, type ExampleRepo } from '../../helpers/example-repo.ts';
import { databaseUrl, testDatabaseUrl } from '../../../support/postgres.ts';

const dep = { namespace: 'default', deployment: 'pg-agent', deploymentId: randomUUID() };
/** Another deployment's database on the same server. */
const otherId = randomUUID();
/** A deployment whose database was made before deployments had roles of their own. */
const legacyId = randomUUID();

let tmp: string;
let repo: ExampleRepo;
let runtime: LocalRuntime;
let app: FastifyInstance;

async function query(sql: string, params: unknown[] = []): Promise<Record<string, unknown>[]> {
  const c = new pg.Client({ connectionString: testDatabaseUrl() });
  await c.connect();
  try {
    return (await c.query(sql, params)).rows as Record<string, unknown>[];
  } finally {
    await c.end();
  }
}

async function databaseExists(name: string): Promise<boolean> {
  const c = new pg.Client({ connectionString: testDatabaseUrl() });
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
  const spec: BuildSpec = {
    ...dep,
    revision,
    repoUrl: repo.path,
    repoRef,
    graphConfigPath: 'langgraph.json',
    installCommand: LINKED_INSTALL,
  };
  expect(await settle(() => runtime.build(spec), ['Succeeded', 'Failed'])).toMatchObject({ phase: 'Succeeded' });
  const server = {
    ...dep,
    revision,
    graphConfigPath: 'langgraph.json',
    env: {},
    tenantId: 't1',
    access: 'public' as const,
  };
  expect(await settle(() => runtime.deploy(server), ['Ready', 'Failed'])).toEqual({ phase: 'Ready' });
}

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-local-runtime-pg-'));
  repo = makeExampleRepo(tmp);
  // Sandboxed when bwrap works here: the server still reaches Postgres on 127.0.0.1.
  const { sandbox } = await detectSandbox('auto', { hidden: [join(tmp, 'data')], shared: sharedTrees(PACKAGE_DIR) });
  runtime = new LocalRuntime({
    agentExecutorThreads: 0,
    dataDir: join(tmp, 'data'),
    logs: { append: async () => {} },
    logger: silentLogger(),
    databaseUrl: testDatabaseUrl(),
    allowLocalRepos: [tmp],
    sandbox,
  });
  app = Fastify();
  await deploymentProxy(app, { resolve: (id) => runtime.backend(id) });
  runtime.setBaseUrl(await app.listen({ host: '127.0.0.1', port: 0 }));
});

afterAll(async () => {
  await runtime?.shutdown();
  await app?.close();
  const c = new pg.Client({ connectionString: testDatabaseUrl() });
  await c.connect();
  for (const id of [dep.deploymentId, otherId, legacyId]) {
    await c.query(`DROP DATABASE IF EXISTS "${databaseNameFor(id)}" WITH (FORCE)`);
    await c.query(`DROP ROLE IF EXISTS "${databaseNameFor(id)}"`);
  }
  await c.end();
  rmSync(tmp, { recursive: true, force: true });
});

describe('LocalRuntime with Postgres', () => {
  it('gives the deployment its own database, keeps threads across revisions, drops it on cleanup', async () => {
    const dbName = databaseNameFor(dep.deploymentId);
    expect(dbName.startsWith('ap_dev_')).toBe(true);
    await up('pg-agent-r1', 'main');
    expect(await databaseExists(dbName)).toBe(true);

    // The database belongs to a role of its own, with no power over the server, and only it may connect.
    const [role] = await query(
      'SELECT rolsuper, rolcreatedb, rolcreaterole, rolcanlogin FROM pg_roles WHERE rolname = $1',
      [dbName],
    );
    expect(role).toEqual({ rolsuper: false, rolcreatedb: false, rolcreaterole: false, rolcanlogin: true });
    const [owner] = await query('SELECT pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = $1', [
      dbName,
    ]);
    expect(owner!.owner).toBe(dbName);
    const otherDb = databaseNameFor(otherId);
    await ensureDeploymentDatabase(testDatabaseUrl(), otherId, join(tmp, 'other-password'));
    const [cross] = await query(
      "SELECT has_database_privilege($1, $2, 'CONNECT') AS mine, has_database_privilege($1, $3, 'CONNECT') AS theirs",
      [dbName, dbName, otherDb],
    );
    expect(cross).toEqual({ mine: true, theirs: false });
    const asAgentUrl = new URL(databaseUrl(otherDb));
    asAgentUrl.username = dbName;
    // With its own password: the server lets the role in, the database does not (trust or password auth alike).
    asAgentUrl.password = readFileSync(
      join(tmp, 'data', 'deployments', dep.deploymentId, 'postgres-password'),
      'utf8',
    ).trim();
    const asAgent = new pg.Client({ connectionString: asAgentUrl.toString() });
    await expect(asAgent.connect()).rejects.toThrow(/permission denied for database/);
    await asAgent.end().catch(() => undefined);

    // Its password lives in a 0600 file and reaches the agent server through a descriptor it reads at start (graph
    // code would find it in the environment, and /proc/<pid>/environ keeps it), never argv.
    const passwordFile = join(tmp, 'data', 'deployments', dep.deploymentId, 'postgres-password');
    expect(statSync(passwordFile).mode & 0o777).toBe(0o600);
    const password = readFileSync(passwordFile, 'utf8').trim();
    expect(password).toMatch(/^[0-9a-f]{48}$/);
    const argv = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' });
    expect(argv).not.toContain(password);
    const environs = readdirSync('/proc')
      .filter((p) => /^\d+$/.test(p))
      .map((p) => {
        try {
          return readFileSync(`/proc/${p}/environ`, 'utf8');
        } catch {
          return '';
        }
      });
    expect(environs.filter((e) => e.includes(password))).toEqual([]);
    const ours = argv.split('\n').filter((l) => l.includes(tmp) && l.includes('agent-server'));
    expect(ours.length).toBeGreaterThan(0);
    for (const line of ours) expect(line).not.toContain('--database-url');
    await runtime.route(dep, 'pg-agent-r1');
    const client = new Client({ apiUrl: await runtime.url(dep) });
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, 'agent', {
      input: { messages: [{ role: 'human', content: 'Cy' }] },
    });
    await client.runs.join(thread.thread_id, run.run_id);

    // Both servers run at once on the shared database; traffic moves without a pause.
    await up('pg-agent-r2', 'v2');
    const r1Ref: RevisionRef = { ...dep, revision: 'pg-agent-r1' };
    expect(runtime.serverStatus(r1Ref)).toEqual({ phase: 'Ready' });
    await runtime.route(dep, 'pg-agent-r2');
    expect(runtime.routedRevision(dep)).toBe('pg-agent-r2');
    const state = await client.threads.getState<{ messages: { content: unknown }[] }>(thread.thread_id);
    expect(String(state.values.messages.at(-1)!.content)).toContain('Hello, Cy!');
    const run2 = await client.runs.create(thread.thread_id, 'agent', {
      input: { messages: [{ role: 'human', content: 'Cy' }] },
    });
    await client.runs.join(thread.thread_id, run2.run_id);
    const after = await client.threads.getState<{ messages: { content: unknown }[] }>(thread.thread_id);
    expect(after.values.messages).toHaveLength(8);
    expect(String(after.values.messages.at(-1)!.content)).toContain('Howdy, Cy!');

    await runtime.cleanup(dep);
    expect(await databaseExists(dbName)).toBe(false);
    expect(await query('SELECT 1 FROM pg_roles WHERE rolname = $1', [dbName])).toEqual([]);
    expect(runtime.pids()).toEqual([]);
  }, 180_000);

  it('hands an older database (owned by the admin role) and its tables over to the deployment role', async () => {
    const name = databaseNameFor(legacyId);
    await query(`CREATE DATABASE "${name}"`);
    const admin = new pg.Client({ connectionString: databaseUrl(name) });
    await admin.connect();
    await admin.query('CREATE TABLE threads (id serial PRIMARY KEY, v text)');
    await admin.query("INSERT INTO threads (v) VALUES ('kept')");
    await admin.end();

    const url = await ensureDeploymentDatabase(testDatabaseUrl(), legacyId, join(tmp, 'legacy-password'));
    const agent = new pg.Client({ connectionString: url });
    await agent.connect();
    try {
      expect((await agent.query('SELECT v FROM threads')).rows).toEqual([{ v: 'kept' }]);
      await agent.query("INSERT INTO threads (v) VALUES ('new')"); // the serial's sequence came along
      expect((await agent.query('SELECT current_user AS u')).rows[0].u).toBe(name);
    } finally {
      await agent.end();
    }
  });
});
