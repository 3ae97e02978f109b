// Encryption at rest, tried as someone who got hold of a copy of a deployment's store (a backup, a disk, a
// database dump): a real server process on each store writes a note into a thread's values, its checkpoints, the
// memory store, a run's input and a cron's; the copy is then searched byte for byte (SQLite: the files; Postgres: every
// table of the schema, bytea as text and as hex). The same server reads it all back through the SDK, data written
// before a key was set is sealed in place, and a key rotation leaves nothing that needs the old key.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/pg.ts';
import { startServerProcess, type ServerProc } from '../helpers/process.ts';
import { until, type StoreKind } from '../helpers/store-server.ts';

const CONFIG = new URL('../fixtures/encrypted/langgraph.json', import.meta.url).pathname;
// Keys as LANGGRAPH_AES_KEY takes them on the LangGraph platform: 32 and 24 bytes of text.
const K1 = 'first-data-key-32-bytes-long-ok!';
const K2 = 'second-key-24-bytes-long';
const RESEALED = 'stored agent data is sealed under the current data key';

interface Store {
  args: string[];
  /** Everything the store holds (stream events aside), as text, once no server runs on it. */
  dump(): Promise<string>;
  /** Runs SQL on the store (Postgres) or its file (embedded), while no server runs on it. */
  close(): Promise<void>;
}

async function newStore(kind: StoreKind): Promise<Store> {
  if (kind === 'embedded') {
    const dir = mkdtempSync(join(tmpdir(), 'ap-enc-'));
    return {
      args: ['--data-dir', dir],
      async dump() {
        return readdirSync(dir)
          .map((f) => readFileSync(join(dir, f)).toString('latin1'))
          .join('\n');
      },
      async close() {
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const db = await createTestDatabase();
  return {
    args: ['--database-url', db.url],
    async dump() {
      const c = new pg.Client({ connectionString: db.url });
      await c.connect();
      try {
        const { rows: tables } = await c.query<{ name: string }>(
          `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'agentplane'`,
        );
        let out = '';
        for (const { name } of tables) {
          // Stream events are kept minutes for joins and replays, not encrypted (docs/security.md).
          if (name === 'stream_events') continue;
          const { rows } = await c.query<{ row: string }>(`SELECT t::text AS row FROM agentplane."${name}" t`);
          out += rows.map((r) => r.row).join('\n');
        }
        return out;
      } finally {
        await c.end();
      }
    },
    close: db.drop,
  };
}

/** Whether `dump` holds `note` in clear: as text, or as the hex of a bytea column. */
const holds = (dump: string, note: string) =>
  dump.includes(note) || dump.includes(Buffer.from(note, 'utf8').toString('hex'));

// One store per kind goes through a key's whole life, each step a test that takes the store (and, from the first
// to the second, the running server) as the step before left it: plain data, a key set over it, a rotation, the old
// key retired. Five server starts per kind instead of one store and server set per behaviour; each start is ~1 s of
// CPU and the steps are the same either way.
describe.each(['embedded', 'postgres'] as const)('agent data encrypted at rest (%s)', (kind) => {
  const servers: ServerProc[] = [];
  let s: Store;
  afterAll(async () => {
    for (const server of servers.splice(0)) await server.stop();
    await s?.close();
  });

  async function start(env: Record<string, string>): Promise<{ server: ServerProc; client: Client }> {
    const server = await startServerProcess(['--config', CONFIG, ...s.args], {
      LANGGRAPH_AES_KEY: '',
      AGENTPLANE_AES_PREVIOUS_KEYS: '',
      ...env,
    });
    servers.push(server);
    return { server, client: new Client({ apiUrl: server.url, callerOptions: { maxRetries: 0 } }) };
  }

  async function stop(server: ServerProc) {
    await server.stop();
    servers.splice(servers.indexOf(server), 1);
  }

  /**
   * Writes `note` through a run (values, checkpoints, writes, store item, run input) and the store API; items are
   * kept under the thread's id (item keys name items, they are not encrypted).
   */
  async function keep(client: Client, note: string): Promise<string> {
    const thread = await client.threads.create();
    const key = thread.thread_id;
    const out = (await client.runs.wait(key, 'notes', { input: { note, key } })) as Record<string, unknown>;
    expect(out.notes).toEqual([note]);
    await client.store.putItem(['api'], key, { note });
    return key;
  }

  async function readBack(client: Client, threadId: string, note: string): Promise<void> {
    const state = await client.threads.getState<{ notes: string[]; key_in_env: boolean }>(threadId);
    expect(state.values.notes).toEqual([note]);
    expect((await client.threads.get(threadId)).values).toMatchObject({ notes: [note] });
    const history = await client.threads.getHistory(threadId, { limit: 10 });
    expect(history.length).toBeGreaterThan(1);
    expect((await client.store.getItem(['notes'], threadId))?.value).toEqual({ note });
    expect((await client.store.getItem(['api'], threadId))?.value).toEqual({ note });
    // Filters compare opened values.
    const found = await client.store.searchItems(['api'], { filter: { note } });
    expect(found.items.map((i) => i.key)).toEqual([threadId]);
    const [run] = await client.runs.list(threadId);
    expect(JSON.stringify(run)).toContain(note);
  }

  // What the steps leave for the next: the notes written so far (by thread) and the server running under K1.
  const written = new Map<string, string>();
  let sealed: { server: ServerProc; client: Client };

  it('data written before a key was set still reads, and is sealed in place', async () => {
    s = await newStore(kind);
    const plain = await start({});
    const old = `old-${randomUUID()}`;
    const threadId = await keep(plain.client, old);
    await stop(plain.server);
    expect(holds(await s.dump(), old)).toBe(true);

    sealed = await start({ LANGGRAPH_AES_KEY: K1 });
    await readBack(sealed.client, threadId, old);
    await until('the reseal pass ended', async () => sealed.server.output().includes(RESEALED));
    expect(sealed.server.output()).toMatch(/"failed":0/);
    await readBack(sealed.client, threadId, old);
    written.set(threadId, old);
  });

  it('a copy of the store holds no note in clear; the server reads every one back; the key is in no log or env', async () => {
    const { server, client } = sealed;
    const note = `note-${randomUUID()}`;
    const threadId = await keep(client, note);
    await readBack(client, threadId, note);
    written.set(threadId, note);
    // A cron keeps the input of the runs it will start.
    const cronNote = `cron-${randomUUID()}`;
    const cron = await client.crons.createForThread(threadId, 'notes', {
      schedule: '0 0 1 1 *',
      input: { note: cronNote, key: threadId },
    });
    const [found] = await client.crons.search({ threadId });
    expect(found?.cron_id).toBe(cron.cron_id);
    expect(JSON.stringify(found)).toContain(cronNote);
    // Graph code does not find the key in its environment (nor do the programs it starts).
    expect((await client.threads.getState<{ key_in_env: boolean }>(threadId)).values.key_in_env).toBe(false);
    // A values filter cannot look inside sealed values: a 422 naming the field, not an empty page.
    const res = await fetch(`${server.url}/threads/search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ values: { notes: [note] } }),
    });
    expect(res.status).toBe(422);
    expect(await res.text()).toContain('values');
    await stop(server);
    expect(server.output()).not.toContain(K1);
    const dump = await s.dump();
    for (const n of [...written.values(), cronNote]) expect(holds(dump, n), n).toBe(false);
    expect(dump).toContain('apenc1:');
  });

  it('a rotated key: the previous key still opens old data until it is resealed, then only the new key is needed', async () => {
    // Everything so far is sealed under K1.
    const rotating = await start({ LANGGRAPH_AES_KEY: K2, AGENTPLANE_AES_PREVIOUS_KEYS: K1 });
    for (const [threadId, note] of written) await readBack(rotating.client, threadId, note);
    await until('the reseal pass ended', async () => rotating.server.output().includes(RESEALED));
    const b = `b-${randomUUID()}`;
    written.set(await keep(rotating.client, b), b);
    await stop(rotating.server);

    const rotated = await start({ LANGGRAPH_AES_KEY: K2 });
    for (const [threadId, note] of written) await readBack(rotated.client, threadId, note);
    await stop(rotated.server);

    // The old key alone opens nothing any more.
    const old = await start({ LANGGRAPH_AES_KEY: K1 });
    for (const threadId of written.keys()) {
      const res = await fetch(`${old.server.url}/threads/${threadId}/state`);
      expect(res.ok).toBe(false);
    }
    const dump = await s.dump();
    for (const n of written.values()) expect(holds(dump, n), n).toBe(false);
  });
});
