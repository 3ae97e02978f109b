// An `agentplane agent-server` process of a checkout for the benchmarks that drive one (request-costs.ts,
// ab-cycle.ts): started on the example agent, waited for until it answers, and its CPU time read from /proc.
import { spawn, type ChildProcess } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * Starts the server of checkout `dir` (its bin/ and examples/agent) on 127.0.0.1:`port` with the store's flags, and
 * resolves once GET /ok answers. `nodeFlags` go before the script (e.g. --cpu-prof).
 */
export async function startAgentServer(
  dir: string,
  port: number,
  storeArgs: string[],
  nodeFlags: string[] = [],
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
