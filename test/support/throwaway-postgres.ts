// A PostgreSQL server of the caller's own (embedded-postgres.ts in a process of its own), on a free port with its
// data in a temporary folder: the test run's server when the machine offers none, and the server a chaos test
// restarts (down/up) without touching anyone else's.
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { TEST_DATABASE_URL_ENV } from './postgres.ts';

const EMBEDDED = resolve(import.meta.dirname, 'embedded-postgres.ts');

export interface ThrowawayPostgres {
  url: string;
  where: string;
  /** Fast shutdown (SIGINT: every client gets 57P01); resolves once the server has exited. */
  down(): Promise<void>;
  /** Starts it again on the same port and data; resolves once it accepts connections. */
  up(): Promise<void>;
  /** Stops it and deletes its data. */
  stop(): Promise<void>;
}

type Message = { url?: string; where?: string; error?: string; log?: string; down?: string; up?: string };

export async function startThrowawayPostgres(): Promise<ThrowawayPostgres> {
  const child = spawn(process.execPath, ['--import', 'tsx', EMBEDDED], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-8000)));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const waiting: ((m: Message) => void)[] = [];
  const lines = createInterface({ input: child.stdout });
  lines.on('line', (line) => {
    let msg: Message;
    try {
      msg = JSON.parse(line) as Message;
    } catch {
      return;
    }
    waiting.shift()?.(msg);
  });
  const next = () =>
    new Promise<Message>((r) => {
      waiting.push(r);
      void exited.then(() => r({ error: 'the process exited' }));
    });
  const first = await next();
  if (!first.url) {
    child.kill();
    throw new Error(
      `could not start an embedded PostgreSQL (${first.error ?? 'the process exited'}). Set ${TEST_DATABASE_URL_ENV} to a ` +
        `server whose role may create databases, or run one at 127.0.0.1:5432.\n--- output ---\n${first.log ?? ''}${stderr}`,
    );
  }
  const command = async (name: 'down' | 'up') => {
    const answer = next();
    child.stdin.write(`${name}\n`);
    const msg = await answer;
    if (msg[name] !== 'ok') throw new Error(`postgres ${name} failed: ${msg.error ?? ''}\n${msg.log ?? ''}${stderr}`);
  };
  return {
    url: first.url,
    where: first.where ?? '',
    down: () => command('down'),
    up: () => command('up'),
    async stop() {
      child.stdin.end();
      await exited;
    },
  };
}
