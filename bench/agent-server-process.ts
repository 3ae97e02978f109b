// An `agentplane agent-server` process of a checkout for the benchmarks that drive one (request-costs.ts,
// ab-cycle.ts, cpu-split.ts): started on the example agent with a fresh store, waited for until it answers, its CPU
// time read from /proc, and the bench's run cycle.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@langchain/langgraph-sdk';
import pg from 'pg';

const ADMIN = 'postgres://postgres@127.0.0.1:5432/postgres';
const INPUT = { messages: [{ role: 'user', content: 'What is the weather in San Francisco?' }] };

/** The server flags of a fresh store (a new Postgres database `name`, or a temp data dir) and its removal. */
export async function freshStore(store: string, name: string): Promise<{ args: string[]; cleanup(): Promise<void> }> {
  if (store === 'postgres') {
    const admin = async (sql: string) => {
      const c = new pg.Client({ connectionString: ADMIN });
      await c.connect();
      await c.query(sql).finally(() => c.end());
    };
    await admin(`CREATE DATABASE ${name}`);
    return {
      args: ['--database-url', `postgres://postgres@127.0.0.1:5432/${name}`],
      cleanup: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
    };
  }
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'ap-bench-store-'));
  return { args: ['--data-dir', dataDir], cleanup: () => rm(dataDir, { recursive: true, force: true }) };
}

/** The bench's cycle, by every client in a loop for `ms`: create thread → create run → join → get state → get run. */
export async function cycles(sdk: Client[], ms: number, latencies?: number[]): Promise<number> {
  let n = 0;
  const end = Date.now() + ms;
  await Promise.all(
    sdk.map(async (c) => {
      while (Date.now() < end) {
        const started = performance.now();
        const t = await c.threads.create();
        const r = await c.runs.create(t.thread_id, 'agent', { input: INPUT });
        await c.runs.join(t.thread_id, r.run_id);
        await c.threads.getState(t.thread_id);
        await c.runs.get(t.thread_id, r.run_id);
        latencies?.push(performance.now() - started);
        n++;
      }
    }),
  );
  return n;
}

/**
 * Starts the server of checkout `dir` (its bin/ and examples/agent) on 127.0.0.1:`port` with the store's flags, and
 * resolves once GET /ok answers. `nodeFlags` go before the script (e.g. --cpu-prof); `env` is added to this process's.
 */
export async function startAgentServer(
  dir: string,
  port: number,
  storeArgs: string[],
  nodeFlags: string[] = [],
  env: Record<string, string> = {},
): Promise<{ proc: ChildProcess; url: string }> {
  const config = path.join(dir, 'examples/agent/langgraph.json');
  const script = path.join(dir, 'bin/agentplane.mjs');
  const hostPort = ['--host', '127.0.0.1', '--port', String(port)];
  const proc = spawn(
    process.execPath,
    [...nodeFlags, script, 'agent-server', '--config', config, ...hostPort, ...storeArgs],
    {
      stdio: 'ignore',
      cwd: dir,
      env: { ...process.env, ...env },
    },
  );
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (proc.exitCode !== null) throw new Error(`the server of ${dir} exited with code ${proc.exitCode}`);
    if (i > 600) throw new Error(`the server of ${dir} did not start`);
    const up = await fetch(`${url}/ok`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) return { proc, url };
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * CPU seconds (user + system) so far of every process named postgres on this machine, ended ones included (Linux):
 * the database's share of a cycle, when nothing else uses that server.
 */
export async function postgresCpuSeconds(): Promise<number> {
  let ticks = 0;
  for (const p of await readdir('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    const stat = await readFile(`/proc/${p}/stat`, 'utf8').catch(() => '');
    if (!stat.includes('(postgres)')) continue;
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime, stime, and cutime, cstime: the postmaster holds the CPU of the backends it reaped, so a connection
    // closing inside a window does not take its CPU out of the sum.
    ticks += Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
  }
  return ticks / 100; // USER_HZ
}

/** CPU seconds (user + system) of a process's threads so far: [its main thread, all the others]. Linux only. */
export async function threadCpuSeconds(pid: number): Promise<[number, number]> {
  let main = 0;
  let rest = 0;
  for (const tid of await readdir(`/proc/${pid}/task`)) {
    const stat = await readFile(`/proc/${pid}/task/${tid}/stat`, 'utf8').catch(() => '');
    // Fields after the parenthesised command name: state ppid pgrp ... utime(14) stime(15).
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(f[11]) + Number(f[12]);
    if (Number(tid) === pid) main += ticks;
    else rest += ticks;
  }
  return [main / 100, rest / 100]; // USER_HZ
}

/**
 * CPU seconds so far of a process's live threads, to the nanosecond (Linux /proc/<pid>/task/<tid>/schedstat: time
 * on a CPU): /proc's stat counts in 10 ms ticks, which over a few hundred ms of CPU is noise of several percent.
 */
export async function schedCpuSeconds(pid: number): Promise<number> {
  let ns = 0;
  for (const tid of await readdir(`/proc/${pid}/task`)) {
    const stat = await readFile(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').catch(() => '0');
    ns += Number(stat.split(' ')[0]);
  }
  return ns / 1e9;
}
