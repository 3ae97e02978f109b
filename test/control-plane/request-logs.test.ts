// The control plane writes one line per request: changes and failures at info, successful reads (the CLI's and the
// console's polling) at debug, with the path but never the query (it may carry an OAuth code or state).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, expect, it } from 'vitest';
import { createControlPlane } from '../../src/control-plane/app.ts';
import { openEmbeddedPlatformState } from '../../src/state/embedded/index.ts';

const levels: Record<number, string> = { 20: 'debug', 30: 'info', 40: 'warn', 50: 'error' };
const dir = mkdtempSync(join(tmpdir(), 'ap-cp-reqlog-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it('logs reads that succeed at debug, changes and failures at info, without the query', async () => {
  const lines: { level: number; msg: string; method?: string; path?: string; statusCode?: number }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString()));
      done();
    },
  });
  const store = openEmbeddedPlatformState({ dataDir: dir });
  const app = await createControlPlane({
    store,
    logger: pino({ level: 'debug' }, sink),
    consoleDir: false,
    bootstrapKeys: [{ key: 'request-logs-admin-key-0123', tenants: ['*'] }],
  });
  const headers = { 'x-api-key': 'request-logs-admin-key-0123', 'x-tenant-id': 'team-1' };
  try {
    for (let i = 0; i < 3; i++)
      expect((await app.inject({ url: '/v2/deployments?code=s3cret', headers })).statusCode).toBe(200);
    expect((await app.inject({ url: '/v2/deployments/nope', headers })).statusCode).toBe(404);
    expect((await app.inject({ method: 'POST', url: '/v2/deployments', headers, payload: {} })).statusCode).toBe(422);
  } finally {
    await app.close();
    store.close();
  }
  const done = lines.filter((l) => l.msg === 'request completed');
  expect(done.map((l) => [levels[l.level], l.method, l.path, l.statusCode])).toEqual([
    ['debug', 'GET', '/v2/deployments', 200],
    ['debug', 'GET', '/v2/deployments', 200],
    ['debug', 'GET', '/v2/deployments', 200],
    ['info', 'GET', '/v2/deployments/nope', 404],
    ['info', 'POST', '/v2/deployments', 422],
  ]);
  // Fastify's own two lines per request are gone, and no line holds the query.
  expect(lines.filter((l) => l.msg === 'incoming request')).toEqual([]);
  expect(JSON.stringify(lines)).not.toContain('s3cret');
});
