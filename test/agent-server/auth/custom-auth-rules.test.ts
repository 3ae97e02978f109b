// The pure rules behind custom auth (filters, user normalization, handler lookup), and a guard that every
// thread, run and assistant route of the app has an auth event, so a new route cannot skip authorization.
import { Auth, HTTPException } from '@langchain/langgraph-sdk/auth';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ForbiddenError } from '../../../src/lib/errors.ts';
import {
  AuthHandlerError,
  AuthHttpError,
  createCustomAuth,
  matchesFilters,
  mergeMetadataFilter,
  normalizeUser,
  type RequestAuth,
} from '../../../src/agent-server/auth/custom.ts';
import { routeEvent } from '../../../src/agent-server/auth/events.ts';
import { corsPolicy } from '../../../src/agent-server/http/cors.ts';
import { ignoredConfigKeys, langgraphJsonSchema } from '../../../src/agent-server/graphs/config.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';

describe('matchesFilters', () => {
  it.each([
    [{ owner: 'a' }, { owner: 'a' }, true],
    [{ owner: 'a' }, { owner: 'b' }, false],
    [{}, { owner: 'a' }, false],
    [{ owner: 'a', x: 1 }, { owner: { $eq: 'a' } }, true],
    [{ owner: 'b' }, { owner: { $eq: 'a' } }, false],
    [{ team: ['a', 'b'] }, { team: { $contains: 'a' } }, true],
    [{ team: ['a', 'b'] }, { team: { $contains: ['a', 'b'] } }, true],
    [{ team: ['a'] }, { team: { $contains: ['a', 'b'] } }, false],
    [{ team: 'a' }, { team: { $contains: 'a' } }, false],
    [{ owner: 'a', org: 'o' }, { owner: 'a', org: 'p' }, false],
    [null, undefined, true],
  ])('%j against %j -> %s', (metadata, filters, expected) => {
    expect(matchesFilters(metadata as never, filters as never)).toBe(expected);
  });
});

describe('mergeMetadataFilter', () => {
  it.each([
    [undefined, { owner: 'a' }, { owner: 'a' }],
    [{ topic: 't' }, { owner: 'a' }, { topic: 't', owner: 'a' }],
    [{ owner: 'a' }, { owner: { $eq: 'a' } }, { owner: 'a' }],
    [{ owner: 'b' }, { owner: 'a' }, null],
    // $contains is left to the row check: the stores compare metadata by equality/containment of their own.
    [{ topic: 't' }, { team: { $contains: 'x' } }, { topic: 't' }],
  ])('query %j + filter %j -> %j', (query, filters, expected) => {
    expect(mergeMetadataFilter(query as never, filters as never)).toEqual(expected);
  });
});

describe('normalizeUser', () => {
  it('accepts a bare identity or an object with identity, filling in the platform defaults', () => {
    expect(normalizeUser('u1')).toEqual({
      user: { identity: 'u1', display_name: 'u1', is_authenticated: true, permissions: [] },
      permissions: [],
    });
    expect(normalizeUser({ identity: 'u2', permissions: ['p'], org: 'o' })).toEqual({
      user: { identity: 'u2', display_name: 'u2', is_authenticated: true, permissions: ['p'], org: 'o' },
      permissions: ['p'],
    });
    expect(normalizeUser({ identity: 'u3', is_authenticated: false, display_name: 'U' }).user).toMatchObject({
      is_authenticated: false,
      display_name: 'U',
    });
    for (const bad of [null, undefined, '', 42, { name: 'x' }])
      expect(() => normalizeUser(bad)).toThrow(AuthHandlerError);
  });
});

describe('createCustomAuth over a real Auth object', () => {
  const who: RequestAuth = normalizeUser({ identity: 'alice', permissions: ['read'] });
  const seen: string[] = [];
  const auth = new Auth()
    .authenticate(async (req) => {
      if (req.headers.get('x-teapot'))
        throw new HTTPException(418, { message: 'short and stout', headers: { 'x-why': 'tea' } });
      if (req.headers.get('x-bug')) throw new TypeError('boom');
      return 'alice';
    })
    .on('threads:create', ({ value, user }) => {
      seen.push('threads:create');
      (value as { metadata: Record<string, unknown> }).metadata.owner = user.identity;
      return { owner: user.identity };
    })
    .on('threads', () => {
      seen.push('threads');
      return { owner: 'alice' };
    })
    .on('*:delete', () => {
      seen.push('*:delete');
      return false;
    })
    .on('*', () => {
      seen.push('*');
    });
  const custom = createCustomAuth(auth['~handlerCache'] as never, 'test');

  it('picks the most specific handler and lets it edit the value', async () => {
    const value = { metadata: {} as Record<string, unknown> };
    expect(await custom.authorize(who, 'threads:create', value)).toEqual({ owner: 'alice' });
    expect(value.metadata).toEqual({ owner: 'alice' });
    expect(await custom.authorize(who, 'threads:read', {})).toEqual({ owner: 'alice' });
    await expect(custom.authorize(who, 'assistants:delete', {})).rejects.toBeInstanceOf(ForbiddenError);
    expect(await custom.authorize(who, 'assistants:read', {})).toBeUndefined();
    expect(seen).toEqual(['threads:create', 'threads', '*:delete', '*']);
  });

  it('maps HTTPException to its status and headers, other errors to AuthHandlerError', async () => {
    const teapot = await custom
      .authenticate(new Request('http://x/', { headers: { 'x-teapot': '1' } }))
      .catch((e: unknown) => e);
    expect(teapot).toBeInstanceOf(AuthHttpError);
    expect(teapot).toMatchObject({ status: 418, message: 'short and stout', headers: { 'x-why': 'tea' } });
    await expect(custom.authenticate(new Request('http://x/', { headers: { 'x-bug': '1' } }))).rejects.toBeInstanceOf(
      AuthHandlerError,
    );
    expect(await custom.authenticate(new Request('http://x/'))).toMatchObject({ user: { identity: 'alice' } });
  });
});

describe('corsPolicy', () => {
  it('allows any origin by default and echoes it only when credentials are on', () => {
    expect(corsPolicy(undefined).origin('https://a.example')).toBe('*');
    expect(corsPolicy({ allow_origins: ['*'], allow_credentials: true }).origin('https://a.example')).toBe(
      'https://a.example',
    );
    const listed = corsPolicy({ allow_origins: ['https://a.example'], allow_origin_regex: 'https://.*\\.b\\.example' });
    expect(listed.origin('https://a.example')).toBe('https://a.example');
    expect(listed.origin('https://x.b.example')).toBe('https://x.b.example');
    expect(listed.origin('https://x.b.example.evil')).toBeNull();
    expect(listed.origin('https://c.example')).toBeNull();
  });
});

describe('ignoredConfigKeys', () => {
  it('names top-level and nested keys this server does not act on', () => {
    const json = langgraphJsonSchema.parse({
      graphs: { a: './a.ts:g' },
      node_version: '20',
      dependencies: ['.'],
      store: { ttl: {}, keys: 1 },
      ui: {},
      checkpointer: { ttl: {}, serde: {} },
      ui_config: { shared: [], theme: 1 },
      auth: { path: './auth.ts:auth', openapi: {}, cache: {} },
      http: { app: './app.ts:app', configurable_headers: {}, middleware_order: 'auth_first', logging_headers: {} },
      dockerfile_lines: ['RUN true'],
      python_version: '3.12',
    });
    expect(ignoredConfigKeys(json).sort()).toEqual([
      'auth.cache',
      'checkpointer.serde',
      'http.logging_headers',
      'python_version',
      'store.keys',
      'ui_config.theme',
    ]);
  });
});

describe('auth events cover the API', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ store: 'embedded' });
  });
  afterAll(async () => h?.close());

  it('every thread, run and assistant route raises an auth event', async () => {
    await h.app.ready();
    const doc = h.app.swagger() as { paths: Record<string, Record<string, unknown>> };
    const missing: string[] = [];
    let checked = 0;
    for (const [path, methods] of Object.entries(doc.paths)) {
      if (!/^\/(threads|runs|assistants|store|crons)/.test(path)) continue;
      const url = path.replace(/\{([^}]+)\}/g, ':$1');
      for (const method of Object.keys(methods)) {
        checked++;
        if (!routeEvent(method.toUpperCase(), url)) missing.push(`${method.toUpperCase()} ${url}`);
      }
    }
    expect(checked).toBeGreaterThan(30);
    expect(missing).toEqual([]);
  });
});
