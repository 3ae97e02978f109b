// An agent server whose Postgres comes up after it (its own database pod still provisioning) waits for it with
// backoff instead of exiting; a database that refuses it, or never comes, ends the start with the reason.
import { createServer, connect, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isConnectionError } from '../../src/lib/connection-errors.ts';
import { FIXTURE_CONFIG } from './helpers/harness.ts';
import { createTestDatabase } from './helpers/pg.ts';
import { startServerProcess } from './helpers/process.ts';

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as { port: number };
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

/** A TCP relay on `port` to the real server: "the database" appears when the relay starts. */
function relay(port: number, target: URL): Promise<{ close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const srv: Server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => s.destroy());
    }
    client.pipe(upstream).pipe(client);
  });
  return new Promise((resolve) =>
    srv.listen(port, '127.0.0.1', () =>
      resolve({
        close: () => {
          for (const s of sockets) s.destroy();
          return new Promise<void>((r) => srv.close(() => r()));
        },
      }),
    ),
  );
}

describe('first database connection', () => {
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('classifies "not reachable yet" apart from refusals', () => {
    const coded = (message: string, code: string) => Object.assign(new Error(message), { code });
    // A restart (admin shutdown, crash shutdown), a dropped socket, a failover's standby: all worth waiting for.
    for (const err of [
      coded('terminating connection due to administrator command', '57P01'),
      coded('terminating connection because of crash of another server process', '57P02'),
      coded('read ECONNRESET', 'ECONNRESET'),
      coded('the database system is in recovery mode', '57P03'),
      coded('connection failure', '08006'),
      coded('cannot execute INSERT in a read-only transaction', '25006'),
      new Error('Connection terminated unexpectedly'),
      new Error('Client has encountered a connection error and is not queryable'),
      new Error('cannot connect to Redis: x', { cause: coded('connect ECONNREFUSED', 'ECONNREFUSED') }),
    ])
      expect(isConnectionError(err), err.message).toBe(true);
    expect(isConnectionError(coded('syntax error', '42601'))).toBe(false);
    expect(isConnectionError(new Error('duplicate key value violates unique constraint'))).toBe(false);
    expect(isConnectionError(Object.assign(new Error('x'), { code: 'ECONNREFUSED' }))).toBe(true);
    expect(isConnectionError(Object.assign(new Error('starting up'), { code: '57P03' }))).toBe(true);
    expect(isConnectionError(new AggregateError([Object.assign(new Error('a'), { code: 'ECONNREFUSED' })]))).toBe(true);
    expect(isConnectionError(Object.assign(new Error('password authentication failed'), { code: '28P01' }))).toBe(
      false,
    );
    expect(isConnectionError(Object.assign(new Error('database "x" does not exist'), { code: '3D000' }))).toBe(false);
  });

  it('waits for a database that comes up after the server, then serves', async () => {
    const port = await freePort();
    const target = new URL(db.url);
    const url = new URL(db.url);
    url.hostname = '127.0.0.1';
    url.port = String(port);
    // The database appears only once the server has been refused at least once and said it will retry.
    let retried!: () => void;
    const sawRetry = new Promise<void>((r) => (retried = r));
    let seen = '';
    const starting = startServerProcess(
      ['--config', FIXTURE_CONFIG, '--database-url', url.toString(), '--database-wait', '60'],
      {},
      (chunk) => {
        seen += chunk;
        if (/database not reachable yet; retrying/.test(seen)) retried();
      },
    );
    await Promise.race([
      sawRetry,
      starting.then(
        () => undefined,
        () => undefined,
      ),
    ]);
    const proxy = await relay(port, target);
    try {
      const server = await starting;
      try {
        expect(server.output()).toMatch(/database not reachable yet; retrying/);
        expect((await fetch(`${server.url}/ok`)).status).toBe(200);
      } finally {
        await server.stop();
      }
    } finally {
      await proxy.close();
    }
  }, 90_000);

  it('gives up after --database-wait, and at once on a refusal', async () => {
    const port = await freePort();
    const url = new URL(db.url);
    url.hostname = '127.0.0.1';
    url.port = String(port);
    await expect(
      startServerProcess(['--config', FIXTURE_CONFIG, '--database-url', url.toString(), '--database-wait', '1']),
    ).rejects.toThrow(/ECONNREFUSED/);
    const missing = new URL(db.url);
    missing.pathname = '/ap_no_such_database_here';
    const refused = await startServerProcess([
      '--config',
      FIXTURE_CONFIG,
      '--database-url',
      missing.toString(),
      '--database-wait',
      '60',
    ]).then(
      () => new Error('started'),
      (err: Error) => err,
    );
    expect(refused.message).toMatch(/does not exist/);
    expect(refused.message).not.toMatch(/retrying/); // a refusal is not waited for
  }, 90_000);
});
