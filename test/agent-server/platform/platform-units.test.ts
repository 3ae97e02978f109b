// Pure parts of the platform environment: LANGGRAPH_CONFIG / AGENTPLANE_GRAPH_CONFIG / --strict parsing, the SDK
// logger's argument mapping, the internal-call token, the platform fetch's origin rule, and isolated graph loading.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAgentServerConfig } from '../../../src/agent-server/config.ts';
import { GraphUnavailableError, loadGraphs } from '../../../src/agent-server/graphs/index.ts';
import { createPlatformFetch } from '../../../src/agent-server/platform/fetch.ts';
import {
  INTERNAL_CALL_HEADER,
  internalCallToken,
  isInternalCall,
  loopbackUrl,
} from '../../../src/agent-server/platform/index.ts';
import { toPinoArgs } from '../../../src/agent-server/platform/sdk-logger.ts';
import { UsageError } from '../../../src/lib/cli-args.ts';
import { silentLogger } from '../../../src/lib/logger.ts';

describe('graph defaults and config path settings', () => {
  it('LANGGRAPH_CONFIG is JSON of per-graph assistant defaults; the path comes from AGENTPLANE_GRAPH_CONFIG', () => {
    const c = parseAgentServerConfig(
      [],
      {
        LANGGRAPH_CONFIG: '{"agent": {"configurable": {"model_name": "openai"}, "context": {"a": 1}}}',
        AGENTPLANE_GRAPH_CONFIG: 'app/langgraph.json',
      },
      '/srv',
    )!;
    expect(c.graphDefaults).toEqual({ agent: { configurable: { model_name: 'openai' }, context: { a: 1 } } });
    expect(c.configPath).toBe('/srv/app/langgraph.json');
    expect(c.notes).toBeUndefined();
    expect(parseAgentServerConfig(['--graph-defaults', '{"g": {}}'], {})!.graphDefaults).toEqual({ g: {} });
  });

  it('a LANGGRAPH_CONFIG holding a path is still read as the path of langgraph.json, with a note', () => {
    const c = parseAgentServerConfig([], { LANGGRAPH_CONFIG: '/deps/app/langgraph.json' }, '/srv')!;
    expect(c.configPath).toBe('/deps/app/langgraph.json');
    expect(c.graphDefaults).toBeUndefined();
    expect(c.notes?.[0]).toMatch(/AGENTPLANE_GRAPH_CONFIG/);
    // --config and AGENTPLANE_GRAPH_CONFIG win over it.
    expect(parseAgentServerConfig(['--config', 'x.json'], { LANGGRAPH_CONFIG: '/a.json' }, '/srv')!.configPath).toBe(
      '/srv/x.json',
    );
  });

  it('refuses LANGGRAPH_CONFIG that is not an object of objects', () => {
    expect(() => parseAgentServerConfig([], { LANGGRAPH_CONFIG: '{"agent": ' })).toThrow(UsageError);
    expect(() => parseAgentServerConfig([], { LANGGRAPH_CONFIG: '{"agent": 3}' })).toThrow(/LANGGRAPH_CONFIG/);
  });

  it('--strict (or AGENTPLANE_STRICT=true) is off by default', () => {
    expect(parseAgentServerConfig([], {})!.strict).toBeUndefined();
    expect(parseAgentServerConfig(['--strict'], {})!.strict).toBe(true);
    expect(parseAgentServerConfig([], { AGENTPLANE_STRICT: 'true' })!.strict).toBe(true);
  });
});

describe('SDK logger arguments (winston style) -> pino', () => {
  it.each([
    [['plain'], {}, 'plain'],
    [['with meta', { a: 1 }, { b: 2 }], { a: 1, b: 2 }, 'with meta'],
    [['with values', 3, 'x'], { args: [3, 'x'] }, 'with values'],
    [[{ message: 'from object', a: 1 }], { a: 1 }, 'from object'],
    [[{ a: 1 }], { a: 1 }, undefined],
  ] as const)('%j', (args, fields, msg) => {
    expect(toPinoArgs([...args])).toEqual([fields, msg]);
  });

  it('keeps errors as err', () => {
    const e = new Error('bad');
    expect(toPinoArgs([e])).toEqual([{ err: e }, 'bad']);
    expect(toPinoArgs(['failed', e])).toEqual([{ err: e }, 'failed']);
  });
});

describe('internal calls', () => {
  it('accepts only this process token in its header', () => {
    expect(isInternalCall({ [INTERNAL_CALL_HEADER]: internalCallToken() })).toBe(true);
    expect(isInternalCall({ [INTERNAL_CALL_HEADER]: 'nope' })).toBe(false);
    expect(isInternalCall({})).toBe(false);
    expect(internalCallToken()).toMatch(/^[0-9a-f]{64}$/);
  });

  let seen: Array<string | undefined> = [];
  let url: string;
  const server = createServer((req, res) => {
    seen.push(req.headers[INTERNAL_CALL_HEADER] as string | undefined);
    res.end('{}');
  });
  beforeAll(async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = loopbackUrl(server.address() as AddressInfo);
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('the platform fetch adds the token for its own origin only', async () => {
    seen = [];
    const own = new URL(url).origin;
    const f = createPlatformFetch({ isOwn: (u) => u.origin === own, app: () => undefined });
    await f(`${url}/assistants/search`, { method: 'POST', body: '{}' });
    await f(`${url.replace('127.0.0.1', 'localhost')}/x`);
    expect(seen).toEqual([internalCallToken(), undefined]);
  });

  it('loopbackUrl reaches wildcard addresses over loopback', () => {
    expect(loopbackUrl({ address: '0.0.0.0', family: 'IPv4', port: 80 })).toBe('http://127.0.0.1:80');
    expect(loopbackUrl({ address: '::', family: 'IPv6', port: 80 })).toBe('http://[::1]:80');
    expect(loopbackUrl({ address: '10.1.2.3', family: 'IPv4', port: 80 })).toBe('http://10.1.2.3:80');
  });
});

describe('loadGraphs with isolateFailures', () => {
  const config = fileURLToPath(new URL('../fixtures/platform-broken/langgraph.json', import.meta.url));

  it('keeps the good graph, reports the broken one and refuses to hand it out with a 422', async () => {
    const registry = await loadGraphs(config, { logger: silentLogger(), isolateFailures: true });
    expect(registry.specs.map((s) => s.graphId)).toEqual(['good', 'broken', 'unbuildable']);
    expect(Object.keys(registry.failures)).toEqual(['broken']);
    expect(registry.failures.broken).toMatch(/SOME_REQUIRED_SETTING is not set/);
    expect(await (await registry.getGraph('good')).invoke({})).toEqual({ ok: true });
    const err = await registry.getGraph('broken').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GraphUnavailableError);
    expect(err).toMatchObject({ status: 422, message: expect.stringMatching(/SOME_REQUIRED_SETTING/) });
    await expect(registry.getSchemas('broken')).rejects.toBeInstanceOf(GraphUnavailableError);
  });

  it('rejects on the first failure without it', async () => {
    await expect(loadGraphs(config, { logger: silentLogger() })).rejects.toThrow(/graph "broken": importing/);
  });
});
