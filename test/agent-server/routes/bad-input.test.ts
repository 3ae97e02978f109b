// Hostile input through HTTP on both stores at once: every body below goes to the embedded and the Postgres
// server, both must answer the same 4xx with a `detail` naming the problem, and a refusal writes nothing.
// Bodies are built as text, because the deepest ones cannot go through JSON.stringify (it recurses).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH } from '../../../src/agent-server/routes/input-guard.ts';
import { MAX_AFTER_SECONDS } from '../../../src/agent-server/schemas/runs.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';

type Json = Record<string, any>;
const STORES = ['embedded', 'postgres'] as const;
type Store = (typeof STORES)[number];

interface Ctx {
  threadId: string;
  assistantId: string;
}

/** Where a route takes free-form JSON: a valid body with the hostile value standing in for X. */
interface Slot {
  route: string;
  method: 'POST' | 'PATCH';
  url: (c: Ctx) => string;
  /** The field path the server should name. */
  path: string;
  body: (x: typeof X) => Json;
  /** Objects and arrays enclosing X (the body counts as one). */
  depth: number;
}

const X = Symbol('hostile value');
const PLACEHOLDER = '__hostile_value__';

/** The slot's body as JSON text with `raw` (JSON text) in place of X. */
function bodyText(slot: Slot, raw: string): string {
  const text = JSON.stringify(slot.body(X), (_k, v: unknown) => (v === X ? PLACEHOLDER : v));
  const at = text.indexOf(`"${PLACEHOLDER}"`);
  return text.slice(0, at) + raw + text.slice(at + PLACEHOLDER.length + 2);
}

const runSlots = (route: string, url: (c: Ctx) => string, withAll: boolean): Slot[] => [
  {
    route,
    method: 'POST',
    url,
    path: 'body.input.steps.0',
    depth: 3,
    body: (x) => ({ assistant_id: 'counter', input: { count: 1, steps: [x] } }),
  },
  {
    route,
    method: 'POST',
    url,
    path: 'body.metadata.note',
    depth: 2,
    body: (x) => ({ assistant_id: 'counter', metadata: { note: x } }),
  },
  ...(withAll
    ? ([
        {
          route,
          method: 'POST',
          url,
          path: 'body.config.configurable.note',
          depth: 3,
          body: (x) => ({ assistant_id: 'counter', config: { configurable: { note: x } } }),
        },
        {
          route,
          method: 'POST',
          url,
          path: 'body.command.resume',
          depth: 2,
          body: (x) => ({ assistant_id: 'counter', command: { resume: x } }),
        },
      ] satisfies Slot[])
    : []),
];

const SLOTS: Slot[] = [
  {
    route: 'POST /threads',
    method: 'POST',
    url: () => '/threads',
    path: 'body.metadata.note',
    depth: 2,
    body: (x) => ({ metadata: { note: x } }),
  },
  {
    route: 'PATCH /threads/{id}',
    method: 'PATCH',
    url: (c) => `/threads/${c.threadId}`,
    path: 'body.metadata.note',
    depth: 2,
    body: (x) => ({ metadata: { note: x } }),
  },
  {
    route: 'POST /threads/search',
    method: 'POST',
    url: () => '/threads/search',
    path: 'body.metadata.note',
    depth: 2,
    body: (x) => ({ metadata: { note: x } }),
  },
  {
    route: 'POST /assistants',
    method: 'POST',
    url: () => '/assistants',
    path: 'body.metadata.note',
    depth: 2,
    body: (x) => ({ graph_id: 'counter', metadata: { note: x } }),
  },
  {
    route: 'POST /assistants',
    method: 'POST',
    url: () => '/assistants',
    path: 'body.config.configurable.note',
    depth: 3,
    body: (x) => ({ graph_id: 'counter', config: { configurable: { note: x } } }),
  },
  {
    route: 'POST /assistants',
    method: 'POST',
    url: () => '/assistants',
    path: 'body.context.note',
    depth: 2,
    body: (x) => ({ graph_id: 'counter', context: { note: x } }),
  },
  {
    route: 'PATCH /assistants/{id}',
    method: 'PATCH',
    url: (c) => `/assistants/${c.assistantId}`,
    path: 'body.metadata.note',
    depth: 2,
    body: (x) => ({ metadata: { note: x } }),
  },
  {
    route: 'PATCH /assistants/{id}',
    method: 'PATCH',
    url: (c) => `/assistants/${c.assistantId}`,
    path: 'body.config.configurable.note',
    depth: 3,
    body: (x) => ({ config: { configurable: { note: x } } }),
  },
  {
    route: 'POST /assistants/search',
    method: 'POST',
    url: () => '/assistants/search',
    path: 'body.metadata.note',
    depth: 2,
    body: (x) => ({ metadata: { note: x } }),
  },
  ...runSlots('POST /threads/{id}/runs', (c) => `/threads/${c.threadId}/runs`, true),
  ...runSlots('POST /threads/{id}/runs/wait', (c) => `/threads/${c.threadId}/runs/wait`, false),
  ...runSlots('POST /threads/{id}/runs/stream', (c) => `/threads/${c.threadId}/runs/stream`, false),
  ...runSlots('POST /runs', () => '/runs', false),
  ...runSlots('POST /runs/wait', () => '/runs/wait', true),
  ...runSlots('POST /runs/stream', () => '/runs/stream', false),
  {
    route: 'POST /threads/{id}/state',
    method: 'POST',
    url: (c) => `/threads/${c.threadId}/state`,
    path: 'body.values.steps.0',
    depth: 3,
    body: (x) => ({ values: { steps: [x] }, as_node: 'first' }),
  },
  {
    route: 'POST /threads/count',
    method: 'POST',
    url: () => '/threads/count',
    path: 'body.metadata.note',
    depth: 2,
    body: (x) => ({ metadata: { note: x } }),
  },
  {
    route: 'POST /assistants/count',
    method: 'POST',
    url: () => '/assistants/count',
    path: 'body.metadata.note',
    depth: 2,
    body: (x) => ({ metadata: { note: x } }),
  },
  {
    route: 'POST /threads/{id}/state/checkpoint',
    method: 'POST',
    url: (c) => `/threads/${c.threadId}/state/checkpoint`,
    path: 'body.checkpoint.checkpoint_map.note',
    depth: 3,
    body: (x) => ({ checkpoint: { checkpoint_map: { note: x } } }),
  },
  {
    route: 'POST /threads/{id}/history',
    method: 'POST',
    url: (c) => `/threads/${c.threadId}/history`,
    path: 'body.metadata.note',
    depth: 2,
    body: (x) => ({ metadata: { note: x } }),
  },
];

/** A hostile (or deliberately fine) value, as JSON text, and what both servers must answer. */
interface ValueCase {
  name: string;
  raw: (slot: Slot) => string;
  only?: (slot: Slot) => boolean;
  /** 'accepted': 2xx; 'either': 2xx, 413 or 422; otherwise the 4xx status and what `detail` must say. */
  expect: 'accepted' | 'either' | { status: number; detail: (slot: Slot) => string | RegExp };
}

/** One slot per kind of write (thread, assistant, run, search), for the cases that cost megabytes per request. */
const WRITE_KINDS = (s: Slot) =>
  s.path.startsWith('body.metadata.') &&
  ['POST /threads', 'POST /assistants', 'POST /threads/{id}/runs', 'POST /threads/search'].includes(s.route);

const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const arrays = (levels: number) => '['.repeat(levels) + '"x"' + ']'.repeat(levels);

const VALUE_CASES: ValueCase[] = [
  {
    name: 'NUL in a value (escaped \\u0000 in the JSON text)',
    raw: () => '"a\\u0000b"',
    expect: { status: 422, detail: (s) => `${s.path} contains a NUL character (\\u0000)` },
  },
  {
    name: 'NUL in a key',
    raw: () => '{"ok":1,"a\\u0000b":1}',
    expect: { status: 422, detail: (s) => `${s.path} has a key "a\\u0000b" that contains a NUL character (\\u0000)` },
  },
  {
    name: 'lone high surrogate',
    raw: () => '"x\\ud800y"',
    expect: { status: 422, detail: (s) => `${s.path} contains a lone UTF-16 surrogate (\\ud800)` },
  },
  {
    name: 'lone low surrogate',
    raw: () => '"\\udc00"',
    expect: { status: 422, detail: (s) => `${s.path} contains a lone UTF-16 surrogate (\\udc00)` },
  },
  {
    name: 'lone surrogate in a key',
    raw: () => '{"\\udbff":1}',
    expect: {
      status: 422,
      detail: (s) => `${s.path} has a key "\\udbff" that contains a lone UTF-16 surrogate (\\udbff)`,
    },
  },
  {
    name: 'a raw NUL byte inside a JSON string (not valid JSON)',
    raw: () => '"a\u0000b"',
    expect: { status: 422, detail: () => /^Malformed JSON body/ },
  },
  { name: 'a valid surrogate pair (emoji, raw and escaped)', raw: () => '"😀 \\ud83d\\ude00"', expect: 'accepted' },
  {
    name: `nesting exactly at the bound (${MAX_JSON_DEPTH} levels)`,
    raw: (s) => arrays(MAX_JSON_DEPTH - s.depth),
    expect: 'accepted',
  },
  {
    name: `one level past the bound (${MAX_JSON_DEPTH + 1} levels)`,
    raw: (s) => arrays(MAX_JSON_DEPTH + 1 - s.depth),
    expect: {
      status: 422,
      detail: (s) => new RegExp(`^${esc(s.path)}(\\.0)*.* is nested deeper than ${MAX_JSON_DEPTH} levels`),
    },
  },
  {
    name: '5 000 levels of objects',
    raw: () => '{"a":'.repeat(5_000) + '1' + '}'.repeat(5_000),
    expect: {
      status: 422,
      detail: (s) => new RegExp(`^${esc(s.path)}(\\.a)*.* is nested deeper than ${MAX_JSON_DEPTH} levels`),
    },
  },
  {
    name: '1 000 000 levels of arrays (2 MB of brackets)',
    raw: () => arrays(1_000_000),
    // The guard is one walk for every route (each slot's bound is checked by the two cases above); a million levels
    // is about that walk and the parser not exhausting the stack, so one route per kind of write carries it.
    only: WRITE_KINDS,
    expect: { status: 422, detail: () => new RegExp(`is nested deeper than ${MAX_JSON_DEPTH} levels`) },
  },
  {
    name: 'a 9 MiB metadata string',
    raw: () => `"${'x'.repeat(9 * 1024 * 1024)}"`,
    // One route per kind of write (thread, assistant, run, search): every one stores or scans 9 MiB twice over.
    only: WRITE_KINDS,
    expect: 'either',
  },
];

/** Numeric fields that reach timers or SQL: each route's own fields, each value refused with 422. */
const NUMBER_CASES: { field: string; values: unknown[]; routes: { slot: Slot; base: Json }[] }[] = [
  {
    field: 'after_seconds',
    values: [1e300, MAX_AFTER_SECONDS + 1, -1, 'abc', true],
    routes: SLOTS.filter((s) => s.path === 'body.metadata.note' && s.route.includes('runs')).map((slot) => ({
      slot,
      base: { assistant_id: 'counter' },
    })),
  },
  {
    field: 'limit',
    values: [-1, 0, 1e9, 1.5, 'abc', 1e300],
    routes: SLOTS.filter((s) => /search|history/.test(s.route) && s.path === 'body.metadata.note').map((slot) => ({
      slot,
      base: {},
    })),
  },
  {
    field: 'offset',
    values: [-1, 2 ** 31, 1e300, 0.5, 'abc'],
    routes: SLOTS.filter((s) => /search/.test(s.route) && s.path === 'body.metadata.note').map((slot) => ({
      slot,
      base: {},
    })),
  },
];

/** Path and query strings that would reach a store. */
const URL_CASES: {
  name: string;
  url: (c: Ctx) => string;
  method?: 'GET' | 'DELETE' | 'PATCH';
  status: number;
  detail: RegExp;
}[] = [
  { name: 'non-UUID thread id', url: () => '/threads/not-a-uuid', status: 422, detail: /params\.thread_id.*UUID/ },
  { name: 'non-UUID thread id (delete)', method: 'DELETE', url: () => '/threads/123', status: 422, detail: /UUID/ },
  { name: 'non-UUID run id', url: (c) => `/threads/${c.threadId}/runs/nope`, status: 422, detail: /params\.run_id/ },
  { name: 'unknown assistant name', url: () => '/assistants/nope', status: 404, detail: /not found/ },
  {
    name: 'NUL in an assistant id',
    url: () => '/assistants/a%00b',
    status: 422,
    detail: /^params\.assistant_id contains a NUL character/,
  },
  {
    name: 'NUL in a checkpoint id',
    url: (c) => `/threads/${c.threadId}/state/a%00b`,
    status: 422,
    detail: /^params\.checkpoint_id contains a NUL character/,
  },
  {
    name: 'NUL in a query string',
    url: (c) => `/threads/${c.threadId}/history?before=a%00b`,
    status: 422,
    detail: /^querystring\.before contains a NUL character/,
  },
  {
    name: 'NUL in a query key',
    url: (c) => `/threads/${c.threadId}/history?a%00b=1`,
    status: 422,
    detail: /^querystring has a key "a\\u0000b" that contains a NUL character/,
  },
  // fastify refuses an undecodable path before any route or hook runs; app.ts's frameworkErrors keeps {detail}.
  {
    name: 'invalid UTF-8 (an encoded lone surrogate) in a path id',
    url: () => '/assistants/%ED%A0%80',
    status: 400,
    detail: /not a valid url component/,
  },
  // A query value that does not decode stays as sent (percent signs and all): a plain string, accepted.
  {
    name: 'invalid UTF-8 (an encoded lone surrogate) in a query string',
    url: (c) => `/threads/${c.threadId}/history?before=%ED%A0%80`,
    status: 200,
    detail: /^$/,
  },
  {
    name: 'unknown checkpoint id',
    url: (c) => `/threads/${c.threadId}/state/not-a-checkpoint`,
    status: 200,
    detail: /^$/,
  },
  {
    name: 'unknown checkpoint id as history cursor',
    url: (c) => `/threads/${c.threadId}/history?before=zzz`,
    status: 200,
    detail: /^$/,
  },
  {
    name: 'run list limit -1',
    url: (c) => `/threads/${c.threadId}/runs?limit=-1`,
    status: 422,
    detail: /querystring\.limit/,
  },
  {
    name: 'run list limit 1e9',
    url: (c) => `/threads/${c.threadId}/runs?limit=1e9`,
    status: 422,
    detail: /querystring\.limit/,
  },
  {
    name: 'run list offset 1e300',
    url: (c) => `/threads/${c.threadId}/runs?offset=1e300`,
    status: 422,
    detail: /querystring\.offset/,
  },
  {
    name: 'run list limit abc',
    url: (c) => `/threads/${c.threadId}/runs?limit=abc`,
    status: 422,
    detail: /querystring\.limit/,
  },
  {
    name: 'history limit 0',
    url: (c) => `/threads/${c.threadId}/history?limit=0`,
    status: 422,
    detail: /querystring\.limit/,
  },
];

describe('hostile input, embedded and Postgres side by side', () => {
  const h = {} as Record<Store, Harness>;

  beforeAll(async () => {
    const [embedded, postgres] = await Promise.all(STORES.map((store) => startHarness({ store })));
    h.embedded = embedded!;
    h.postgres = postgres!;
  }, 120_000);
  afterAll(async () => {
    await Promise.all(STORES.map((s) => h[s]?.close()));
  });

  async function call(store: Store, method: string, url: string, payload?: string) {
    const res = await h[store].app.inject({
      method: method as 'GET',
      url,
      ...(payload === undefined ? {} : { payload, headers: { 'content-type': 'application/json' } }),
    });
    const text = res.body.trim();
    let body: any;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = text; // event streams
    }
    return { status: res.statusCode, body };
  }

  /** A fresh idle thread (on the counter graph) and assistant per case, so accepted bodies cannot interfere. */
  async function context(store: Store): Promise<Ctx> {
    const t = await call(store, 'POST', '/threads', JSON.stringify({ metadata: { graph_id: 'counter', mark: 1 } }));
    const a = await call(store, 'POST', '/assistants', JSON.stringify({ graph_id: 'counter', metadata: { mark: 1 } }));
    expect([t.status, a.status]).toEqual([200, 200]);
    return { threadId: t.body.thread_id, assistantId: a.body.assistant_id };
  }

  /** What a refusal must leave untouched. */
  async function snapshot(store: Store, c: Ctx) {
    const s = h[store].storage;
    const thread = await s.threads.get(c.threadId);
    return {
      threads: await s.threads.count({}),
      assistants: await s.assistants.count({}),
      thread: { status: thread?.status, metadata: thread?.metadata, values: thread?.values },
      runs: (await s.runs.list(c.threadId, { limit: 10, offset: 0 })).length,
      assistant: (await s.assistants.get(c.assistantId))?.metadata,
    };
  }

  /** Sends one body to both stores; returns both answers after checking they agree. */
  async function both(method: string, url: (c: Ctx) => string, payload: string | undefined) {
    const out = [] as { status: number; body: any; before: Json; after: Json; ctx: Ctx }[];
    for (const store of STORES) {
      const c = await context(store);
      const before = await snapshot(store, c);
      const res = await call(store, method, url(c), payload);
      const after = res.status >= 400 ? await snapshot(store, c) : before;
      out.push({ ...res, before, after, ctx: c });
    }
    const [e, p] = out as [(typeof out)[0], (typeof out)[0]];
    expect(
      p.status,
      `Postgres answered ${p.status}, embedded ${e.status}: ${JSON.stringify(p.body)?.slice(0, 300)}`,
    ).toBe(e.status);
    for (const r of out) {
      expect(r.status, JSON.stringify(r.body)?.slice(0, 300)).toBeLessThan(500);
      if (r.status >= 400) {
        expect(typeof r.body?.detail).toBe('string');
        expect(r.after, 'a refused request wrote nothing').toEqual(r.before);
        expect(r.after.thread.status).toBe('idle');
      }
    }
    return out;
  }

  describe.each(VALUE_CASES)('$name', (vc) => {
    const slots = SLOTS.filter((s) => vc.only?.(s) ?? true);
    it.each(slots.map((s) => [`${s.route} ${s.path}`, s] as const))(
      '%s',
      async (_name, slot) => {
        const [e] = await both(slot.method, slot.url, bodyText(slot, vc.raw(slot)));
        if (vc.expect === 'accepted') {
          expect(e!.status, JSON.stringify(e!.body)?.slice(0, 300)).toBe(200);
        } else if (vc.expect === 'either') {
          expect([200, 413, 422]).toContain(e!.status);
        } else {
          expect(e!.status).toBe(vc.expect.status);
          const want = vc.expect.detail(slot);
          for (const r of [e!]) {
            if (typeof want === 'string') expect(r.body.detail).toBe(want);
            else expect(r.body.detail).toMatch(want);
          }
        }
      },
      60_000,
    );
  });

  describe.each(NUMBER_CASES)('$field out of bounds', ({ field, values, routes }) => {
    it.each(
      routes.flatMap(({ slot, base }) =>
        values.map((v) => [`${slot.route} ${field}=${String(v)}`, slot, base, v] as const),
      ),
    )('%s', async (_name, slot, base, v) => {
      const [e, p] = await both(slot.method, slot.url, JSON.stringify({ ...base, [field]: v }));
      expect(e!.status).toBe(422);
      expect(e!.body.detail).toContain(`body.${field}`);
      expect(p!.body.detail).toBe(e!.body.detail);
    });
  });

  it.each(URL_CASES.map((u) => [u.name, u] as const))('URL: %s', async (_name, u) => {
    const [e, p] = await both(u.method ?? 'GET', u.url, undefined);
    expect(e!.status).toBe(u.status);
    const same = (r: typeof e) => JSON.stringify(r!.body).replaceAll(r!.ctx.threadId, '<thread>');
    if (u.status < 400) return expect(same(p)).toBe(same(e));
    const detail = (r: Json) => r.body.detail as string;
    expect(detail(e!)).toMatch(u.detail);
    expect(detail(p!)).toBe(detail(e!));
  });

  it('over a real socket: 1 000 000 levels get 422, a body over 10 MiB gets 413, and the server keeps answering', async () => {
    for (const store of STORES) {
      const base = await h[store].app.listen({ port: 0, host: '127.0.0.1' });
      const post = (body: string) =>
        fetch(`${base}/threads`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
        });
      const deep = await post(`{"metadata":{"note":${arrays(1_000_000)}}}`);
      expect(deep.status).toBe(422);
      expect(((await deep.json()) as Json).detail).toMatch(
        /^body\.metadata\.note(\.0)*.* is nested deeper than 256 levels/,
      );
      const big = await post(`{"metadata":{"note":"${'x'.repeat(10 * 1024 * 1024)}"}}`);
      expect(big.status).toBe(413);
      expect(((await big.json()) as Json).detail).toEqual(expect.any(String));
      const ok = await post('{"metadata":{"note":"fine"}}');
      expect(ok.status).toBe(200);
    }
  }, 60_000);

  it('after_seconds at the bound is accepted: the run waits, is pending on both stores, and can be cancelled', async () => {
    for (const store of STORES) {
      const c = await context(store);
      const body = JSON.stringify({ assistant_id: 'counter', after_seconds: MAX_AFTER_SECONDS });
      const r = await call(store, 'POST', `/threads/${c.threadId}/runs`, body);
      expect(r.status).toBe(200);
      expect(r.body.status).toBe('pending');
      const cancel = await call(store, 'POST', `/threads/${c.threadId}/runs/${r.body.run_id}/cancel?wait=1`);
      expect(cancel.status).toBe(204);
      const run = await call(store, 'GET', `/threads/${c.threadId}/runs/${r.body.run_id}`);
      expect(run.body.status).toBe('interrupted');
      const thread = await call(store, 'GET', `/threads/${c.threadId}`);
      expect(thread.body.status).not.toBe('busy');
    }
  });

  it('emoji and other astral characters come back intact from both stores, in keys and values', async () => {
    const s = 'emoji 😀, flag 🇺🇳, musical 𝄞, escaped \ud83d\ude80';
    const meta = { note: s, [s]: [s] };
    const seen: unknown[] = [];
    for (const store of STORES) {
      const t = await call(store, 'POST', '/threads', JSON.stringify({ metadata: meta }));
      expect(t.body.metadata).toEqual(meta);
      expect((await call(store, 'GET', `/threads/${t.body.thread_id}`)).body.metadata).toEqual(meta);
      const found = await call(store, 'POST', '/threads/search', JSON.stringify({ metadata: { note: s } }));
      expect(found.body.map((x: Json) => x.thread_id)).toEqual([t.body.thread_id]);

      const a = await call(
        store,
        'POST',
        '/assistants',
        JSON.stringify({
          graph_id: 'counter',
          metadata: meta,
          config: { configurable: meta },
          name: s,
        }),
      );
      const got = (await call(store, 'GET', `/assistants/${a.body.assistant_id}`)).body;
      expect([got.metadata, got.config.configurable, got.name]).toEqual([meta, meta, s]);

      const run = await call(
        store,
        'POST',
        `/threads/${t.body.thread_id}/runs/wait`,
        JSON.stringify({
          assistant_id: 'counter',
          input: { count: 1, steps: [s] },
          metadata: meta,
        }),
      );
      expect(run.body).toEqual({ count: 12, steps: [s, 'first', 'second'] });
      const runs = (await call(store, 'GET', `/threads/${t.body.thread_id}/runs`)).body;
      expect(runs[0].metadata).toEqual(meta);
      expect(runs[0].kwargs.input).toEqual({ count: 1, steps: [s] });

      const upd = await call(
        store,
        'POST',
        `/threads/${t.body.thread_id}/state`,
        JSON.stringify({ values: { steps: [s] }, as_node: 'second' }),
      );
      expect(upd.status).toBe(200);
      const state = (await call(store, 'GET', `/threads/${t.body.thread_id}/state`)).body;
      expect(state.values.steps).toEqual([s, 'first', 'second', s]);
      seen.push(state.values);
    }
    expect(seen[1]).toEqual(seen[0]);
  });
});
