// Where the CPU of a run cycle goes: the server's threads one by one (main, executor threads, V8's helpers), the
// Postgres server processes, this process (the SDK clients), context switches per thread and how busy the machine
// was, in windows of the bench's cycle (create thread → create run → join → get state → get run).
//   node --import tsx bench/cpu-split.ts [--store embedded|postgres] [--clients 32] [--seconds 10] [--windows 2]
//     [--node-flags="<flags for the server's node, e.g. --max-semi-space-size=32>"]
//     [-- <extra agent-server flags, e.g. --executor-threads 0>]
// Needs `npm run build:cli`. Linux only (/proc). Postgres processes are every process named "postgres" on the
// machine: run it on a machine where nothing else uses that server.
import { readdir, readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { Client } from '@langchain/langgraph-sdk';
import { cycles, freshStore, postgresCpuSeconds, startAgentServer } from './agent-server-process.ts';

const { values: args, positionals } = parseArgs({
  options: {
    store: { type: 'string', default: 'embedded' },
    clients: { type: 'string', default: '32' },
    seconds: { type: 'string', default: '10' },
    windows: { type: 'string', default: '2' },
    'node-flags': { type: 'string', default: '' },
  },
  allowPositionals: true,
});

interface ThreadStat {
  ticks: number;
  switches: number;
}

/** CPU ticks and context switches of each thread of `pid`, by thread id ('main' for the process's own). */
async function threads(pid: number): Promise<Map<string, ThreadStat>> {
  const out = new Map<string, ThreadStat>();
  for (const tid of await readdir(`/proc/${pid}/task`).catch(() => [])) {
    const stat = await readFile(`/proc/${pid}/task/${tid}/stat`, 'utf8').catch(() => '');
    const status = await readFile(`/proc/${pid}/task/${tid}/status`, 'utf8').catch(() => '');
    if (!stat) continue;
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const switches = [...status.matchAll(/ctxt_switches:\s+(\d+)/g)].reduce((a, m) => a + Number(m[1]), 0);
    out.set(Number(tid) === pid ? 'main' : tid, { ticks: Number(f[11]) + Number(f[12]), switches });
  }
  return out;
}

/** Idle and total ticks of the machine. */
async function machine(): Promise<{ idle: number; total: number }> {
  const f = (await readFile('/proc/stat', 'utf8')).split('\n')[0]!.split(/\s+/).slice(1).map(Number);
  return { idle: f[3]! + f[4]!, total: f.reduce((a, b) => a + b, 0) };
}

const store = await freshStore(args.store!, `ap_split_${process.pid}`);
const port = 18971;
const nodeFlags = args['node-flags']!.split(' ').filter(Boolean);
const { proc } = await startAgentServer('.', port, [...store.args, ...positionals], nodeFlags);
try {
  const sdk = Array.from({ length: Number(args.clients) }, () => new Client({ apiUrl: `http://127.0.0.1:${port}` }));
  await cycles(sdk, 8_000); // JIT warm-up
  for (let w = 0; w < Number(args.windows); w++) {
    const [t0, p0, m0, c0] = [
      await threads(proc.pid!),
      await postgresCpuSeconds(),
      await machine(),
      process.cpuUsage(),
    ];
    const started = performance.now();
    const n = await cycles(sdk, Number(args.seconds) * 1000);
    const secs = (performance.now() - started) / 1000;
    const [t1, p1, m1, c1] = [
      await threads(proc.pid!),
      await postgresCpuSeconds(),
      await machine(),
      process.cpuUsage(c0),
    ];
    const ms = (ticks: number) => ((ticks * 10) / n).toFixed(2); // USER_HZ 100: a tick is 10 ms
    const rows: string[] = [];
    let server = 0;
    for (const [tid, s] of t1) {
      const d = s.ticks - (t0.get(tid)?.ticks ?? 0);
      const sw = (s.switches - (t0.get(tid)?.switches ?? 0)) / n;
      server += d;
      if (d > 0 || sw >= 0.05) rows.push(`${tid} ${ms(d)} ms, ${sw.toFixed(2)} switches`);
    }
    const busy = 1 - (m1.idle - m0.idle) / (m1.total - m0.total);
    process.stdout.write(
      [
        `window ${w + 1}: ${(n / secs).toFixed(1)} cycles/s, machine ${(100 * busy).toFixed(0)}% busy; per cycle:`,
        `  server ${ms(server)} ms (threads: ${rows.join('; ')})`,
        `  postgres processes ${(((p1 - p0) * 1000) / n).toFixed(2)} ms; clients (this process) ${((c1.user + c1.system) / 1000 / n).toFixed(2)} ms`,
        '',
      ].join('\n'),
    );
  }
} finally {
  proc.kill();
  await store.cleanup().catch(() => undefined);
}
