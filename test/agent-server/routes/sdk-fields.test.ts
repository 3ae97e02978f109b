// What SDK 1.15 sends and reads beyond the older surface, through the real SDK against a real server process on
// both stores: runs.cancel's reason kept as the run's cancel_reason; strictResume refusing a resume of an
// interrupt no longer waiting; getState and getHistory with `select`; streams of some namespaces only
// (streamNamespaces); GET /ok?check_db=1 asking the database; GET /ok?activity=1 only for the bearer of the
// deployment's activity token; what /info says of it all.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk-v1';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerProc } from '../helpers/process.ts';
import { startServerOnStore, until, type StoreServer } from '../helpers/store-server.ts';
import { testDatabaseUrl } from '../../support/postgres.ts';
import { ARG_PIECES } from '../fixtures/sdk-fields/toolcaller.ts';

type ProtocolEv = { method: string; params: { namespace: string[]; data: Record<string, unknown> } };

const CONFIG = new URL('../fixtures/sdk-fields/langgraph.json', import.meta.url).pathname;

describe.each(['embedded', 'postgres'] as const)('SDK 1.15 fields (%s)', (store) => {
  let server: ServerProc;
  let client: Client;
  let running: StoreServer | undefined;
  // The deployment's activity token, as the kubelet mounts it from the operator's Secret.
  const tokenDir = mkdtempSync(join(tmpdir(), 'ap-activity-'));
  const tokenFile = join(tokenDir, 'token');
  const TOKEN = 'w2Zl3u6mQbq1y0k8cXv5dPaRr7tYh4Nn9sLeGjFo2Ui';
  writeFileSync(tokenFile, `${TOKEN}\n`);

  beforeAll(async () => {
    running = await startServerOnStore(store, ['--config', CONFIG, '--activity-token-file', tokenFile]);
    server = running.server;
    client = new Client({ apiUrl: server.url, callerOptions: { maxRetries: 0 } });
  });
  afterAll(async () => {
    await running?.close();
    rmSync(tokenDir, { recursive: true, force: true });
  });

  /** Polls until the run has left pending (no clock involved: the run blocks until cancelled). */
  async function untilRunning(threadId: string, runId: string): Promise<void> {
    for (;;) {
      const r = await client.runs.get(threadId, runId);
      if (r.status === 'running') return;
      expect(r.status).toBe('pending');
      await new Promise((res) => setTimeout(res, 20));
    }
  }

  describe('runs.cancel(..., {reason})', () => {
    it('a running run cancelled with reason "taken" keeps cancel_reason taken:…; a plain cancel keeps none', async () => {
      const t = await client.threads.create();
      const run = await client.runs.create(t.thread_id, 'slow', { input: { delay_ms: 600_000, mark: 'a' } });
      await untilRunning(t.thread_id, run.run_id);
      await client.runs.cancel(t.thread_id, run.run_id, true, 'interrupt', { reason: 'taken' });
      const after = await client.runs.get(t.thread_id, run.run_id);
      expect(after.status).toBe('interrupted');
      expect(after.cancel_reason).toMatch(/^taken:/);
      // Listed with it too, and a select naming it returns it.
      const listed = await client.runs.list(t.thread_id, { select: ['run_id', 'cancel_reason'] });
      expect(listed).toEqual([{ run_id: run.run_id, cancel_reason: after.cancel_reason }]);

      const plain = await client.runs.create(t.thread_id, 'slow', { input: { delay_ms: 600_000, mark: 'b' } });
      await untilRunning(t.thread_id, plain.run_id);
      await client.runs.cancel(t.thread_id, plain.run_id, true);
      const plainAfter = await client.runs.get(t.thread_id, plain.run_id);
      expect(plainAfter.status).toBe('interrupted');
      expect(plainAfter.cancel_reason).toBeNull();
    });

    it('a pending run (queued behind another) cancelled as taken ends interrupted with the reason', async () => {
      const t = await client.threads.create();
      const first = await client.runs.create(t.thread_id, 'slow', { input: { delay_ms: 600_000, mark: 'a' } });
      const queued = await client.runs.create(t.thread_id, 'slow', {
        input: { delay_ms: 0, mark: 'b' },
        multitaskStrategy: 'enqueue',
      });
      expect((await client.runs.get(t.thread_id, queued.run_id)).status).toBe('pending');
      await client.runs.cancel(t.thread_id, queued.run_id, false, 'interrupt', { reason: 'taken' });
      const after = await client.runs.get(t.thread_id, queued.run_id);
      expect(after).toMatchObject({ status: 'interrupted', cancel_reason: expect.stringMatching(/^taken:/) });
      // Cancelling a finished run again says nothing new about it.
      await client.runs.cancel(t.thread_id, queued.run_id);
      expect((await client.runs.get(t.thread_id, queued.run_id)).cancel_reason).toBe(after.cancel_reason);
      await client.runs.cancel(t.thread_id, first.run_id, true);
    });

    it('refuses a reason it does not know, and "taken" with rollback (the run would be deleted), with a 422', async () => {
      const t = await client.threads.create();
      const run = await client.runs.create(t.thread_id, 'slow', { input: { delay_ms: 600_000 } });
      await expect(client.runs.cancel(t.thread_id, run.run_id, false, 'rollback', { reason: 'taken' })).rejects.toThrow(
        /HTTP 422.*reason/,
      );
      const odd = await fetch(`${server.url}/threads/${t.thread_id}/runs/${run.run_id}/cancel?reason=stolen`, {
        method: 'POST',
      });
      expect(odd.status).toBe(422);
      expect(JSON.stringify(await odd.json())).toContain('reason');
      // Neither refused cancel touched the run.
      expect((await client.runs.get(t.thread_id, run.run_id)).cancel_reason ?? null).toBeNull();
      expect(['pending', 'running']).toContain((await client.runs.get(t.thread_id, run.run_id)).status);
      await client.runs.cancel(t.thread_id, run.run_id, true);
    });
  });

  it("multitaskStrategy interrupt (useStream's default now): the new run starts from the interrupted one's completed steps", async () => {
    const t = await client.threads.create();
    const first = await client.runs.create(t.thread_id, 'slow', { input: { delay_ms: 600_000, mark: 'a' } });
    // Its first step has been written once the thread's state shows it (the run is then in its blocking node).
    await until('the first step of run a is stored', async () => {
      const s = await client.threads.getState(t.thread_id, undefined, { select: ['values.marks'] });
      return ((s.values as { marks?: string[] } | undefined)?.marks ?? []).includes('start:a');
    });
    const second = await client.runs.create(t.thread_id, 'slow', {
      input: { delay_ms: 0, mark: 'b' },
      multitaskStrategy: 'interrupt',
    });
    await client.runs.join(t.thread_id, second.run_id);
    expect((await client.runs.get(t.thread_id, first.run_id)).status).toBe('interrupted');
    expect((await client.runs.get(t.thread_id, second.run_id)).status).toBe('success');
    const marks = ((await client.threads.getState(t.thread_id)).values as { marks: string[] }).marks;
    expect(marks).toEqual(['start:a', 'start:b', 'done:b']);
  });

  describe('getState / getHistory with select', () => {
    it('returns only the selected fields, values.<key> one key of the values', async () => {
      const t = await client.threads.create();
      await client.runs.wait(t.thread_id, 'counter', { input: { count: 1 } });
      const full = await client.threads.getState(t.thread_id);
      expect(full.values).toEqual({ count: 12, steps: ['first', 'second'] });

      const steps = await client.threads.getState(t.thread_id, undefined, { select: ['values.steps'] });
      expect(steps).toEqual({ values: { steps: ['first', 'second'] } });
      const two = await client.threads.getState(t.thread_id, undefined, {
        select: ['next', 'checkpoint', 'values.count'],
      });
      expect(two).toEqual({
        next: [],
        checkpoint: full.checkpoint,
        checkpoint_id: full.checkpoint.checkpoint_id,
        values: { count: 12 },
      });
      // A named checkpoint, by id (query) and by checkpoint (body), takes it too.
      const parentId = full.parent_checkpoint!.checkpoint_id!;
      const byId = await client.threads.getState(t.thread_id, parentId, { select: ['values.count', 'metadata'] });
      expect(Object.keys(byId).sort()).toEqual(['metadata', 'values']);
      expect(byId.values).toEqual({ count: 2 });
      const byCheckpoint = await client.threads.getState(t.thread_id, full.parent_checkpoint!, {
        select: ['values.count'],
      });
      expect(byCheckpoint).toEqual({ values: { count: 2 } });
      // A key the state lacks is left out; an unknown field is a 422 naming it.
      expect(await client.threads.getState(t.thread_id, undefined, { select: ['values.nope'] })).toEqual({
        values: {},
      });
      await expect(
        client.threads.getState(t.thread_id, undefined, { select: ['secrets' as 'values'] }),
      ).rejects.toThrow(/HTTP 422.*select/);

      const history = await client.threads.getHistory(t.thread_id, {
        limit: 3,
        select: ['values.steps', 'created_at'],
      });
      const fullHistory = await client.threads.getHistory(t.thread_id, { limit: 3 });
      expect(history).toEqual(
        fullHistory.map((h) => ({
          values: { steps: (h.values as { steps: string[] }).steps },
          created_at: h.created_at,
        })),
      );
      const bad = await fetch(`${server.url}/threads/${t.thread_id}/history`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ select: ['values', 'tasks.0'] }),
      });
      expect(bad.status).toBe(422);
      expect(JSON.stringify(await bad.json())).toContain('select');
    });
  });

  it('/info advertises strict_resume and stream_namespaces as flags', async () => {
    const info = (await (await fetch(`${server.url}/info`)).json()) as { flags: Record<string, unknown> };
    expect(info.flags).toMatchObject({ strict_resume: true, stream_namespaces: true });
  });

  describe('strictResume', () => {
    /** A thread waiting in hitl's "ask" node, and the id of the interrupt it waits on. */
    async function waiting(): Promise<{ threadId: string; interruptId: string; checkpointId: string }> {
      const t = await client.threads.create();
      await client.runs.wait(t.thread_id, 'hitl', { input: { question: 'ok?' } });
      const s = await client.threads.getState(t.thread_id);
      const interruptId = (s.tasks[0]!.interrupts[0] as { id: string }).id;
      expect(interruptId).toMatch(/^[0-9a-f]{32}$/);
      return { threadId: t.thread_id, interruptId, checkpointId: s.checkpoint.checkpoint_id! };
    }

    it('refuses a resume naming an interrupt that is not waiting: the run fails, the thread stays as it was', async () => {
      const { threadId, interruptId, checkpointId } = await waiting();
      const wrong = 'f'.repeat(32);
      const events: Array<{ event: string; data: unknown }> = [];
      for await (const part of client.runs.stream(threadId, 'hitl', {
        command: { resume: { [wrong]: 'yes' } },
        strictResume: true,
      })) {
        events.push(part as { event: string; data: unknown });
      }
      const error = events.find((e) => e.event === 'error');
      expect(error?.data).toMatchObject({
        error: 'UnknownInterruptError',
        reason: 'unknown_interrupt',
        interrupt_ids: [wrong],
        pending_ids: [interruptId],
      });
      const [refused] = await client.runs.list(threadId, { limit: 1 });
      expect(refused!.status).toBe('error');
      // Nothing ran: same checkpoint, still waiting on the same interrupt, no error on the thread.
      const thread = await client.threads.get(threadId);
      expect(thread.status).toBe('interrupted');
      const s = await client.threads.getState(threadId);
      expect(s.checkpoint.checkpoint_id).toBe(checkpointId);
      expect(s.next).toEqual(['ask']);

      // The right id goes through; answering it again afterwards is refused (nothing waits any more).
      await client.runs.wait(threadId, 'hitl', { command: { resume: { [interruptId]: 'yes' } }, strictResume: true });
      expect((await client.threads.getState(threadId)).values).toMatchObject({ answer: 'yes' });
      const again = await client.runs.create(threadId, 'hitl', {
        command: { resume: { [interruptId]: 'again' } },
        strictResume: true,
      });
      await client.runs.join(threadId, again.run_id);
      expect((await client.runs.get(threadId, again.run_id)).status).toBe('error');
      expect((await client.threads.get(threadId)).status).toBe('idle');
      expect((await client.threads.getState(threadId)).values).toMatchObject({ answer: 'yes' });
    });

    it('refuses a plain resume when nothing waits; without strictResume the old behaviour stays', async () => {
      const t = await client.threads.create();
      await client.runs.wait(t.thread_id, 'counter', { input: { count: 1 } });
      const refused = await client.runs.create(t.thread_id, 'counter', {
        command: { resume: 'x' },
        strictResume: true,
      });
      await client.runs.join(t.thread_id, refused.run_id);
      expect((await client.runs.get(t.thread_id, refused.run_id)).status).toBe('error');
      expect((await client.threads.get(t.thread_id)).status).toBe('idle');

      // Without it, the server does not check: whatever LangGraph makes of the unknown id, it is not this refusal.
      const { threadId } = await waiting();
      const events: Array<{ event: string; data: unknown }> = [];
      for await (const part of client.runs.stream(threadId, 'hitl', {
        command: { resume: { ['0'.repeat(32)]: 'no' } },
      }))
        events.push(part as { event: string; data: unknown });
      expect(events.some((e) => e.event === 'error' && JSON.stringify(e.data).includes('UnknownInterruptError'))).toBe(
        false,
      );
    });
  });

  describe('streamNamespaces', () => {
    it('runs.stream and joinStream send only the namespaces asked for ("" the root)', async () => {
      const t = await client.threads.create();
      const namesOf = async (parts: AsyncIterable<{ event: string }>) => {
        const names: string[] = [];
        for await (const p of parts) names.push(p.event);
        return names;
      };
      const all = await namesOf(
        client.runs.stream(t.thread_id, 'nested', {
          input: { depth: 0 },
          streamMode: 'updates',
          streamSubgraphs: true,
        }),
      );
      // Root, child and grandchild updates without a filter.
      expect(all.some((n) => n === 'updates')).toBe(true);
      expect(all.some((n) => /^updates\|child:[^|]+$/.test(n))).toBe(true);
      expect(all.some((n) => /^updates\|child:[^|]+\|grandchild:[^|]+$/.test(n))).toBe(true);

      const childOnly = await namesOf(
        client.runs.stream(t.thread_id, 'nested', {
          input: { depth: 1 },
          streamMode: 'updates',
          streamSubgraphs: true,
          streamNamespaces: ['child'],
        }),
      );
      const updates = childOnly.filter((n) => n.startsWith('updates'));
      expect(updates.length).toBeGreaterThan(0);
      expect(updates.every((n) => /^updates\|child:[^|]+$/.test(n))).toBe(true);
      expect(childOnly).toContain('metadata');

      const [last] = await client.runs.list(t.thread_id, { limit: 1 });
      const rootOnly = await namesOf(
        client.runs.joinStream(t.thread_id, last!.run_id, { streamNamespaces: [''], lastEventId: '-1' }),
      );
      expect(rootOnly.filter((n) => n.startsWith('updates'))).toEqual(['updates']);
    });
  });

  it('thread protocol: a model streaming a tool call sends tool-call-delta content blocks, its args piece by piece', async () => {
    const thread = client.threads.stream({ assistantId: 'toolcaller', transport: 'sse' });
    try {
      const sub = await thread.subscribe({ channels: ['messages', 'lifecycle'] });
      const it = (sub as unknown as AsyncIterable<ProtocolEv>)[Symbol.asyncIterator]();
      await thread.run.start({ input: { messages: [{ role: 'user', content: 'weather?' }] } });
      const events: ProtocolEv[] = [];
      for (;;) {
        const { value, done } = await it.next();
        if (done) break;
        events.push(value);
        if (value.method === 'lifecycle' && !value.params.namespace.length && value.params.data.event !== 'running')
          break;
      }
      const toolDeltas = events
        .filter((e) => e.method === 'messages' && e.params.data.event === 'content-block-delta')
        .map((e) => e.params.data.delta as { type: string; args?: string })
        .filter((d) => d.type === 'tool-call-delta');
      expect(toolDeltas.map((d) => d.args)).toEqual(ARG_PIECES);
    } finally {
      await thread.close();
    }
  });

  describe('GET /ok?check_db=1', () => {
    it('asks the database: 200 healthy; /ok alone does not; check_db other than 0/1 is a 422', async () => {
      const ok = await fetch(`${server.url}/ok?check_db=1`);
      expect(ok.status).toBe(200);
      expect(await ok.json()).toEqual({ ok: true, services: { database: 'healthy' } });
      expect(await (await fetch(`${server.url}/ok`)).json()).toEqual({ ok: true });
      const bad = await fetch(`${server.url}/ok?check_db=yes`);
      expect(bad.status).toBe(422);
      expect(JSON.stringify(await bad.json())).toContain('check_db');
    });

    it("activity=1 tells nothing without the deployment's token: none, a wrong one, another deployment's, a prefix", async () => {
      // What someone who reaches /ok through the Ingress, or a pod of another workspace, would try.
      const tries: Record<string, string | undefined> = {
        none: undefined,
        wrong: 'Bearer not-the-token',
        "another deployment's": 'Bearer 9fK2pQx7LmZc4Vb8NwRt1YhGd5Sa3Ej6Ou0Ik2Pl7M',
        'a prefix of it': `Bearer ${TOKEN.slice(0, 20)}`,
        'it with more after': `Bearer ${TOKEN}x`,
        'it as a key': undefined,
      };
      for (const [what, authorization] of Object.entries(tries)) {
        const headers: Record<string, string> = authorization ? { authorization } : {};
        if (what === 'it as a key') headers['x-api-key'] = TOKEN;
        const res = await fetch(`${server.url}/ok?activity=1`, { headers });
        const text = await res.text();
        expect(res.status, what).toBe(401);
        expect(text, what).toContain('activity token');
        expect(text, what).not.toMatch(/open_requests|last_request_at|active_runs|next_due_at/);
      }
      // The probes stay open to anyone.
      expect(await (await fetch(`${server.url}/ok`)).json()).toEqual({ ok: true });
      expect((await fetch(`${server.url}/ok?check_db=1`)).status).toBe(200);
      // The token's holder (the operator) gets the activity.
      const own = await fetch(`${server.url}/ok?activity=1`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(own.status).toBe(200);
      expect(((await own.json()) as { activity: { store_read: boolean } }).activity.store_read).toBe(true);
    });

    it('activity=1 (the idle policy on a cluster): a running run and an open stream count, probes do not, a cron is due work', async () => {
      type Activity = {
        open_requests: number;
        last_request_at: string;
        active_runs: number | null;
        next_due_at: string | null;
        store_read: boolean;
      };
      const activity = async () => {
        const res = await fetch(`${server.url}/ok?activity=1`, { headers: { authorization: `Bearer ${TOKEN}` } });
        return ((await res.json()) as { activity: Activity }).activity;
      };
      const t = await client.threads.create();
      const run = await client.runs.create(t.thread_id, 'slow', { input: { delay_ms: 600_000, mark: 'idle' } });
      await untilRunning(t.thread_id, run.run_id);
      // A stream held open while the run goes on: the server counts it as traffic until it closes.
      const ac = new AbortController();
      const stream = await fetch(`${server.url}/threads/${t.thread_id}/runs/${run.run_id}/stream`, {
        signal: ac.signal,
      });
      expect(stream.status).toBe(200);
      const busy = await activity();
      expect(busy.store_read).toBe(true);
      expect(busy.active_runs).toBeGreaterThanOrEqual(1);
      expect(busy.open_requests).toBeGreaterThanOrEqual(1);
      ac.abort();
      await stream.body?.cancel().catch(() => {});
      await client.runs.cancel(t.thread_id, run.run_id, true);
      await until('the stream to close', async () => (await activity()).open_requests < busy.open_requests);
      // Probes (/ok, /ok?check_db=1, activity itself) are not traffic: the last request's time stays.
      const quiet = await activity();
      await fetch(`${server.url}/ok`);
      await fetch(`${server.url}/ok?check_db=1`);
      expect((await activity()).last_request_at).toBe(quiet.last_request_at);
      const cron = await client.crons.create('counter', { schedule: '0 0 1 1 *' });
      try {
        const due = await activity();
        expect(due.next_due_at).not.toBeNull();
        expect(Date.parse(due.next_due_at!)).toBeGreaterThan(Date.now());
        expect(Date.parse(due.last_request_at)).toBeGreaterThan(Date.parse(quiet.last_request_at));
      } finally {
        await client.crons.delete(cron.cron_id);
      }
    });

    it.runIf(store === 'postgres')('answers 503 with the reason while the database refuses connections', async () => {
      const name = new URL(running!.databaseUrl!).pathname.slice(1);
      const admin = new pg.Client({ connectionString: testDatabaseUrl() });
      await admin.connect();
      try {
        await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
        await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]);
        const down = await fetch(`${server.url}/ok?check_db=1`);
        expect(down.status).toBe(503);
        const body = (await down.json()) as { ok: boolean; detail: string; services: unknown };
        expect(body.ok).toBe(false);
        expect(body.services).toEqual({ database: 'unhealthy' });
        expect(body.detail).toMatch(/database \(postgres\) unreachable: .+/);
        // The process itself is fine, and says so without check_db.
        expect((await fetch(`${server.url}/ok`)).status).toBe(200);
      } finally {
        await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
        await admin.end();
      }
      await until('the database answers again', async () => (await fetch(`${server.url}/ok?check_db=1`)).ok);
    });
  });
});
