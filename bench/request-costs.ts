// Server CPU per request, by kind: where the run cycle's CPU goes on the agent server's HTTP thread and elsewhere.
//   node --import tsx bench/request-costs.ts [--seconds 8] [--warmup 4] [--clients 16] [--store embedded|postgres]
//     [--only TEXT] (the kinds whose name contains TEXT) [--profile DIR] (the server runs with --cpu-prof into DIR)
// Starts `agentplane agent-server` on the example agent and, per phase, has the clients repeat one kind of request
// (create thread; create run + join, i.e. one run end to end; get state of a finished thread; get run; join a
// finished run), then reports the server's CPU per request from /proc: its main thread (HTTP, storage, state
// reads) and its other threads (executor threads running graphs, V8's GC and compiler helpers). Linux only.
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client } from '@langchain/langgraph-sdk';
import { startAgentServer, threadCpuSeconds } from './agent-server-process.ts';
import pg from 'pg';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '8' },
    clients: { type: 'string', default: '16' },
    store: { type: 'string', default: 'embedded' },
    warmup: { type: 'string', default: '4' },
    only: { type: 'string' },
    profile: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  process.stdout.write(
    [
      'Usage: node --import tsx bench/request-costs.ts [options]',
      '  --seconds N     measured seconds per kind of request (default 8)',
      '  --warmup N      unmeasured seconds of the same requests before each (default 4)',
      '  --clients N     concurrent SDK clients (default 16)',
      '  --store S       embedded (default) or postgres (a fresh database, dropped afterwards)',
      '  --only TEXT     only the kinds whose name contains TEXT, e.g. "get state"',
      '  --profile DIR   run the server with --cpu-prof into DIR (then bench/profile-summary.ts)',
      '',
    ].join('\n'),
  );
  process.exit(0);
}
const seconds = Number(args.seconds);
const clients = Number(args.clients);
const root = path.resolve(import.meta.dirname, '..');
const INPUT = { messages: [{ role: 'user', content: 'What is the weather in San Francisco?' }] };

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

async function main(): Promise<void> {
  const port = await freePort();
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'ap-costs-'));
  let database: string | undefined;
  const storeArgs = ['--data-dir', dataDir];
  if (args.store === 'postgres') {
    database = `ap_costs_${process.pid}`;
    const admin = new pg.Client({ connectionString: 'postgres://postgres@127.0.0.1:5432/postgres' });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${database}`);
    await admin.end();
    storeArgs.push('--database-url', `postgres://postgres@127.0.0.1:5432/${database}`);
  }
  const { proc, url } = await startAgentServer(
    root,
    port,
    storeArgs,
    args.profile ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(args.profile)}`] : [],
  );
  try {
    const sdk = Array.from({ length: clients }, () => new Client({ apiUrl: url }));
    // Finished threads and runs for the read phases.
    const done: Array<{ thread: string; run: string }> = [];
    await Promise.all(
      sdk.map(async (c) => {
        for (let i = 0; i < 8; i++) {
          const t = await c.threads.create();
          const r = await c.runs.create(t.thread_id, 'agent', { input: INPUT });
          await c.runs.join(t.thread_id, r.run_id);
          done.push({ thread: t.thread_id, run: r.run_id });
        }
      }),
    );
    const phases: Array<[string, (c: Client, i: number) => Promise<unknown>]> = [
      ['create thread', (c) => c.threads.create()],
      [
        'create run + join (new thread each)',
        async (c) => {
          const t = await c.threads.create();
          const r = await c.runs.create(t.thread_id, 'agent', { input: INPUT });
          return c.runs.join(t.thread_id, r.run_id);
        },
      ],
      ['get state (finished thread)', (c, i) => c.threads.getState(done[i % done.length]!.thread)],
      ['get run', (c, i) => c.runs.get(done[i % done.length]!.thread, done[i % done.length]!.run)],
      ['join a finished run', (c, i) => c.runs.join(done[i % done.length]!.thread, done[i % done.length]!.run)],
    ];
    const rows: string[] = [];
    for (const [name, op] of phases) {
      if (args.only && !name.includes(args.only)) continue;
      const runFor = async (ms: number) => {
        let count = 0;
        const end = Date.now() + ms;
        await Promise.all(
          sdk.map(async (c, k) => {
            for (let i = k; Date.now() < end; i += clients) {
              await op(c, i);
              count++;
            }
          }),
        );
        return count;
      };
      await runFor(Number(args.warmup) * 1000);
      const [m0, r0] = await threadCpuSeconds(proc.pid!);
      const count = await runFor(seconds * 1000);
      const [m1, r1] = await threadCpuSeconds(proc.pid!);
      const per = (s: number) => ((s * 1000) / count).toFixed(2);
      rows.push(
        `| ${name} | ${(count / seconds).toFixed(0)} | ${per(m1 - m0)} | ${per(r1 - r0)} | ${per(m1 - m0 + r1 - r0)} |`,
      );
      console.error(rows.at(-1));
    }
    console.log(
      `\nServer CPU per request (${args.store}, ${clients} clients, ${seconds} s per kind, load avg ${os.loadavg()[0]!.toFixed(1)})\n`,
    );
    console.log('| request | per s | main thread ms | other threads ms | total ms |');
    console.log('|---|---|---|---|---|');
    for (const r of rows) console.log(r);
  } finally {
    proc.kill('SIGTERM');
    await new Promise((r) => proc.once('exit', r));
    await rm(dataDir, { recursive: true, force: true });
    if (database) {
      const admin = new pg.Client({ connectionString: 'postgres://postgres@127.0.0.1:5432/postgres' });
      await admin.connect();
      await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      await admin.end();
    }
  }
}

await main();
