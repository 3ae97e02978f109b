// Custom auth hides an assistant from every route, not only from GET: user B probes user A's assistant (whose read
// filter hides it from B) through every request that names an assistant and must get exactly the answer an id
// that does not exist gets, learn nothing from counts and pages, and start nothing with it. A real server process
// per store, the real SDK for the owner's side.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/pg.ts';
import { startServerProcess, type ServerProc } from '../helpers/process.ts';

const CONFIG = new URL('../fixtures/auth-assistants/langgraph.json', import.meta.url).pathname;
const SECRET = 'alpha-secret-7f3a';

describe.each(['embedded', 'postgres'] as const)('a hidden assistant stays hidden (%s store)', (store) => {
  let dir: string;
  let server: ServerProc;
  let dropDb: (() => Promise<void>) | undefined;
  let hidden: string;
  let bobThread: string;

  const sdk = (token: string) =>
    new Client({
      apiUrl: server.url,
      apiKey: null,
      defaultHeaders: { Authorization: `Bearer ${token}` },
      callerOptions: { maxRetries: 0 },
    });
  const call = async (token: string, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: {
        Authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, text: await res.text(), next: res.headers.get('x-pagination-next') };
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-hidden-assistant-'));
    const storeArgs = ['--data-dir', join(dir, 'data')];
    if (store === 'postgres') {
      const db = await createTestDatabase();
      dropDb = db.drop;
      storeArgs.push('--database-url', db.url);
    }
    server = await startServerProcess(['--config', CONFIG, ...storeArgs]);
    const a = await sdk('token-alice').assistants.create({
      graphId: 'counter',
      config: { configurable: { secret: SECRET } },
      metadata: { tag: SECRET },
      name: 'alice private',
    });
    hidden = a.assistant_id;
    bobThread = (await sdk('token-bob').threads.create()).thread_id;
  });
  afterAll(async () => {
    await server?.stop();
    await dropDb?.();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the owner reads and runs it; B gets 404 on GET', async () => {
    const alice = sdk('token-alice');
    expect((await alice.assistants.get(hidden)).config).toEqual({ configurable: { secret: SECRET } });
    const t = await alice.threads.create();
    expect(await alice.runs.wait(t.thread_id, hidden, { input: {} })).toMatchObject({ count: 11 });
    expect((await call('token-bob', 'GET', `/assistants/${hidden}`)).status).toBe(404);
  });

  // Every request that names an assistant, answered for B alike for A's assistant and for an unknown id.
  const probes: Array<[string, (id: string, thread: string) => [string, string, unknown?]]> = [
    ['GET /assistants/{id}', (id) => ['GET', `/assistants/${id}`]],
    ['GET /assistants/{id}/schemas', (id) => ['GET', `/assistants/${id}/schemas`]],
    ['GET /assistants/{id}/graph', (id) => ['GET', `/assistants/${id}/graph`]],
    ['POST /assistants/{id}/versions', (id) => ['POST', `/assistants/${id}/versions`, {}]],
    ['PATCH /assistants/{id}', (id) => ['PATCH', `/assistants/${id}`, { name: 'mine now' }]],
    ['POST /threads/{t}/runs', (id, t) => ['POST', `/threads/${t}/runs`, { assistant_id: id, input: {} }]],
    ['POST /threads/{t}/runs/wait', (id, t) => ['POST', `/threads/${t}/runs/wait`, { assistant_id: id, input: {} }]],
    [
      'POST /threads/{t}/runs/stream',
      (id, t) => ['POST', `/threads/${t}/runs/stream`, { assistant_id: id, input: {} }],
    ],
    ['POST /runs', (id) => ['POST', '/runs', { assistant_id: id, input: {} }]],
    ['POST /runs/wait', (id) => ['POST', '/runs/wait', { assistant_id: id, input: {} }]],
    ['POST /runs/stream', (id) => ['POST', '/runs/stream', { assistant_id: id, input: {} }]],
    ['POST /runs/batch', (id) => ['POST', '/runs/batch', [{ assistant_id: id, input: {} }]]],
    ['POST /runs/crons', (id) => ['POST', '/runs/crons', { assistant_id: id, schedule: '0 0 1 1 *' }]],
    [
      'POST /threads/{t}/runs/crons',
      (id, t) => ['POST', `/threads/${t}/runs/crons`, { assistant_id: id, schedule: '0 0 1 1 *' }],
    ],
  ];
  it.each(probes)('%s: the same answer as an unknown id, nothing started', async (_name, probe) => {
    const unknown = randomUUID();
    const [m1, p1, b1] = probe(hidden, bobThread);
    const [m2, p2, b2] = probe(unknown, bobThread);
    const onHidden = await call('token-bob', m1, p1, b1);
    const onUnknown = await call('token-bob', m2, p2, b2);
    expect(onHidden.status, onHidden.text).toBe(404);
    expect({ status: onHidden.status, text: onHidden.text.replaceAll(hidden, 'ID') }).toEqual({
      status: onUnknown.status,
      text: onUnknown.text.replaceAll(unknown, 'ID'),
    });
    expect(onHidden.text).not.toContain(SECRET);
  });

  it('B started no run and no cron with it, and it is unchanged', async () => {
    const bob = sdk('token-bob');
    expect(await bob.runs.list(bobThread)).toEqual([]);
    expect(await bob.crons.search({})).toEqual([]);
    const a = await sdk('token-alice').assistants.get(hidden);
    expect(a.name).toBe('alice private');
    expect(a.version).toBe(1);
  });

  it('POST /assistants with its id: a 409 for B under either if_exists, never the record', async () => {
    for (const if_exists of ['do_nothing', 'raise']) {
      const res = await call('token-bob', 'POST', '/assistants', {
        assistant_id: hidden,
        graph_id: 'counter',
        if_exists,
      });
      expect(res.status, res.text).toBe(409);
      expect(res.text).not.toContain(SECRET);
    }
    // The owner still gets it back with do_nothing.
    const own = await call('token-alice', 'POST', '/assistants', {
      assistant_id: hidden,
      graph_id: 'counter',
      if_exists: 'do_nothing',
    });
    expect(own.status).toBe(200);
    expect(JSON.parse(own.text).config).toEqual({ configurable: { secret: SECRET } });
  });

  it("POST /threads with A's thread id: a 409 for B under either if_exists, never the thread", async () => {
    const aliceThread = await sdk('token-alice').threads.create({ metadata: { topic: SECRET } });
    for (const if_exists of ['do_nothing', 'raise']) {
      const res = await call('token-bob', 'POST', '/threads', { thread_id: aliceThread.thread_id, if_exists });
      expect(res.status, res.text).toBe(409);
      expect(res.text).not.toContain(SECRET);
    }
    const own = await call('token-alice', 'POST', '/threads', {
      thread_id: aliceThread.thread_id,
      if_exists: 'do_nothing',
    });
    expect(own.status).toBe(200);
    expect(JSON.parse(own.text).metadata.topic).toBe(SECRET);
  });

  it("deleting a shared assistant with delete_threads deletes only the caller's threads, never B's", async () => {
    const alice = sdk('token-alice');
    const bob = sdk('token-bob');
    const shared = await alice.assistants.create({ graphId: 'counter', name: 'shared' });
    await alice.assistants.update(shared.assistant_id, { metadata: { members: ['alice', 'bob'] } });
    expect((await bob.assistants.get(shared.assistant_id)).name).toBe('shared');
    const tag = { assistant_id: shared.assistant_id };
    const aliceThread = await alice.threads.create({ metadata: tag });
    const bobThread2 = await bob.threads.create({ metadata: tag });
    const res = await call('token-alice', 'DELETE', `/assistants/${shared.assistant_id}?delete_threads=true`);
    expect(res.status, res.text).toBe(204);
    expect((await call('token-alice', 'GET', `/threads/${aliceThread.thread_id}`)).status).toBe(404);
    expect((await bob.threads.get(bobThread2.thread_id)).metadata).toMatchObject({ owner: 'bob' });
  });

  it('counts and pages filtered by its metadata tell B nothing', async () => {
    const byTag = { metadata: { tag: SECRET } };
    expect(JSON.parse((await call('token-bob', 'POST', '/assistants/count', byTag)).text)).toBe(0);
    expect(JSON.parse((await call('token-alice', 'POST', '/assistants/count', byTag)).text)).toBe(1);
    const bobPage = await call('token-bob', 'POST', '/assistants/search', { ...byTag, limit: 1 });
    expect(JSON.parse(bobPage.text)).toEqual([]);
    expect(bobPage.next).toBeNull();
    // B's own assistants page normally, by visible rows.
    const bob = sdk('token-bob');
    const mine = [];
    for (let i = 0; i < 3; i++)
      mine.push((await bob.assistants.create({ graphId: 'counter', name: `b${i}` })).assistant_id);
    const first = await call('token-bob', 'POST', '/assistants/search', {
      limit: 2,
      offset: 0,
      sort_by: 'created_at',
      sort_order: 'asc',
    });
    const second = await call('token-bob', 'POST', '/assistants/search', {
      limit: 2,
      offset: 2,
      sort_by: 'created_at',
      sort_order: 'asc',
    });
    expect(
      [...JSON.parse(first.text), ...JSON.parse(second.text)].map((a: { assistant_id: string }) => a.assistant_id),
    ).toEqual(mine);
    expect(first.next).toBe('2');
    expect(second.next).toBeNull();
    expect(JSON.parse((await call('token-bob', 'POST', '/assistants/count', {})).text)).toBe(3);
    // B runs its own assistant.
    expect(await bob.runs.wait(bobThread, mine[0]!, { input: {} })).toMatchObject({ count: 11 });
  });
});
