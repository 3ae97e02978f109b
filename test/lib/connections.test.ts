// Pools, clients and Redis connections only through src/lib/connections.ts: ESLint refuses the constructors
// anywhere else in src/ (a pool without an 'error' listener ends the process when its database restarts), and
// what the factories return carries that listener.
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';
import { duplicateRedis, newPgClient, newPgPool, newRedis } from '../../src/lib/connections.ts';
import { ROOT } from '../agent-server/helpers/process.ts';

describe('the connection factories are the only way', () => {
  const eslint = new ESLint({ cwd: ROOT });
  const lint = async (code: string, file = 'src/agent-server/storage/example.ts') => {
    const [result] = await eslint.lintText(code, { filePath: `${ROOT}/${file}` });
    return result!.messages.map((m) => m.ruleId);
  };

  it.each([
    ['new pg.Pool', "import pg from 'pg';\nexport const p = new pg.Pool({});\n"],
    ['new pg.Client', "import pg from 'pg';\nexport const c = new pg.Client({});\n"],
    ['new Pool', "import { Pool } from 'pg';\nexport const p = new Pool({});\n"],
    ['new Client of pg', "import { Client } from 'pg';\nexport const c = new Client({});\n"],
    ['new Redis', "import { Redis } from 'ioredis';\nexport const r = new Redis('redis://127.0.0.1');\n"],
    ['redis.duplicate()', "import type { Redis } from 'ioredis';\nexport const copy = (r: Redis) => r.duplicate();\n"],
  ])('refuses %s', async (_name, code) => {
    expect((await lint(code)).filter((r) => r?.startsWith('no-restricted'))).not.toEqual([]);
  });

  it('accepts the factories, type imports, and the factory module itself', async () => {
    const viaFactory = [
      "import type pg from 'pg';",
      "import { newPgPool } from '../../lib/connections.ts';",
      'export const p: pg.Pool = newPgPool({});',
      '',
    ].join('\n');
    expect(await lint(viaFactory)).toEqual([]);
    const own = "import pg from 'pg';\nexport const p = new pg.Pool({});\n";
    expect(await lint(own, 'src/lib/connections.ts')).toEqual([]);
  });
});

describe('what the factories return', () => {
  it('has an error listener: a failure is not an unhandled error event', () => {
    const pool = newPgPool({ connectionString: 'postgres://127.0.0.1:1/x' });
    const client = newPgClient({ connectionString: 'postgres://127.0.0.1:1/x' });
    const redis = newRedis('redis://127.0.0.1:1', { lazyConnect: true });
    const copy = duplicateRedis(redis);
    for (const emitter of [pool, client, redis, copy]) {
      expect(emitter.listenerCount('error')).toBeGreaterThan(0);
      expect(() =>
        emitter.emit('error', new Error('terminating connection due to administrator command')),
      ).not.toThrow();
    }
    // Every client the pool makes gets one too.
    expect(pool.listenerCount('connect')).toBeGreaterThan(0);
    redis.disconnect();
    copy.disconnect();
    void pool.end();
  });
});
