// A real Redis server for tests: AGENTPLANE_TEST_REDIS_URL, else the one on 127.0.0.1:6379, else a redis-server
// started here on a free port (stopped when the test process exits). null when none of these is possible: the
// tests that need Redis skip with that reason (`redisSkipReason`).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { Redis } from 'ioredis';
import { toolMissing } from './system-tools.ts';

let found: Promise<string | null> | undefined;
let started: ChildProcess | undefined;
export let redisSkipReason = '';

async function answers(url: string): Promise<boolean> {
  const r = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 1_000,
  });
  r.on('error', () => undefined);
  try {
    await r.connect();
    return (await r.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    r.disconnect();
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

async function find(): Promise<string | null> {
  const given = process.env.AGENTPLANE_TEST_REDIS_URL;
  if (given) return given;
  const local = 'redis://127.0.0.1:6379';
  if (await answers(local)) return local;
  if (spawnSync('redis-server', ['--version']).status !== 0) {
    redisSkipReason = `no Redis: nothing answers on 127.0.0.1:6379 and ${toolMissing('redis-server')}`;
    return null;
  }
  const port = await freePort();
  started = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
  });
  process.once('exit', () => started?.kill('SIGKILL'));
  const url = `redis://127.0.0.1:${port}`;
  for (let i = 0; i < 50; i++) {
    if (await answers(url)) return url;
    await new Promise((r) => setTimeout(r, 100));
  }
  redisSkipReason = `redis-server on port ${port} did not answer`;
  return null;
}

/** The URL of a Redis server the tests may use, or null (see redisSkipReason). */
export function testRedisUrl(): Promise<string | null> {
  found ??= find();
  return found;
}
