// Idle memory of an awake agent server (not a test): the example agent on a fresh embedded store, its resident set
// at start, right after --cycles run cycles, and --wait-secs later, with the executor threads released when idle
// (--executor-idle-secs 30, the default) and kept (0), one server after the other.
//
//   node --import tsx bench/idle-rss.ts [--cycles 300] [--wait-secs 45] [--port 18931] [--out bench/results/idle-rss.md]
//
// Results go to stdout and --out. The servers run from the bundle (dist/cli) when it is up to
// date, as deployed servers do, else from the TypeScript sources through tsx, which holds tens of MB more (its
// loader, the compiled modules, in each thread): the report says which, and `npm run build:cli` first makes it the
// bundle. At the end it splits the resident set into anonymous memory (heaps, malloc) and file pages (node's code)
// and counts the process's threads, so a thread that has not ended yet shows.
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Client } from '@langchain/langgraph-sdk';
import { cycles, freshStore, startAgentServer } from './agent-server-process.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    cycles: { type: 'string', default: '300' },
    'wait-secs': { type: 'string', default: '45' },
    // The two servers' ports: this and the next.
    port: { type: 'string', default: '18931' },
    // Where the report goes (besides stdout), from the checkout's root.
    out: { type: 'string', default: 'bench/results/idle-rss.md' },
  },
});
const n = Number(args.cycles);
const waitSecs = Number(args['wait-secs']);

/** A `Name:   <n> kB` line of a /proc file, in MB (or the plain number for a count). */
const procField = (file: string, name: string, kb = true) =>
  Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(readFileSync(file, 'utf8'))?.[1]) / (kb ? 1024 : 1);
/** Resident set of a process (MB), from /proc. */
const rssMb = (pid: number) => procField(`/proc/${pid}/status`, 'VmRSS');

/** Whether bin/agentplane.mjs runs the bundle: built, and no input of it changed since (its own test). */
function fromBundle(): boolean {
  if (process.env.AGENTPLANE_FROM_SOURCES === '1') return false;
  try {
    const manifest = JSON.parse(readFileSync(path.join(root, 'dist/cli/manifest.json'), 'utf8')) as {
      builtFrom: number;
      inputs: string[];
    };
    return manifest.inputs.every((f) => statSync(path.join(root, f)).mtimeMs <= manifest.builtFrom);
  } catch {
    return false;
  }
}

async function measure(idleSecs: number, port: number) {
  const store = await freshStore('embedded', `idle_rss_${idleSecs}`);
  const { proc, url } = await startAgentServer(root, port, store.args, [], {
    AGENTPLANE_EXECUTOR_IDLE_SECS: String(idleSecs),
    AGENTPLANE_EXECUTOR_THREADS: '1',
  });
  const pid = proc.pid!;
  const atStart = rssMb(pid);
  const sdk = [new Client({ apiUrl: url, callerOptions: { maxRetries: 0 } })];
  let done = 0;
  while (done < n) done += await cycles(sdk, 2_000);
  const afterRuns = rssMb(pid);
  await new Promise((r) => setTimeout(r, waitSecs * 1000));
  const later = rssMb(pid);
  const anon = procField(`/proc/${pid}/smaps_rollup`, 'Anonymous');
  const threads = procField(`/proc/${pid}/status`, 'Threads', false);
  proc.kill('SIGTERM');
  await new Promise((r) => proc.once('exit', r));
  await store.cleanup();
  return { idleSecs, atStart, afterRuns, later, anon, threads, cyclesRun: done };
}

const bundle = fromBundle();
const port = Number(args.port);
const rows = [await measure(30, port), await measure(0, port + 1)];
const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const mb = (x: number) => `${x.toFixed(0)} MB`;
const report = `# Idle memory of an awake agent server (bench/idle-rss.ts)

${new Date().toISOString().slice(0, 10)}, Node ${process.version}, the example agent, embedded store, one executor
thread, the servers ${bundle ? 'running from the bundle (dist/cli)' : 'running from the TypeScript sources (no up-to-date bundle)'};
\`node --import tsx bench/idle-rss.ts --cycles ${n} --wait-secs ${waitSecs}\` (RSS from /proc, shared machine: load
average ${load} at the end).

| executor threads | RSS at start | after the run cycles | ${waitSecs} s later | of which anonymous | process threads then |
|---|---|---|---|---|---|
${rows
  .map(
    (r) =>
      `| ${r.idleSecs ? `released after ${r.idleSecs} s idle` : 'kept (--executor-idle-secs 0)'} | ${mb(r.atStart)} | ${mb(r.afterRuns)} (${r.cyclesRun} cycles) | ${mb(r.later)} | ${mb(r.anon)} | ${r.threads} |`,
  )
  .join('\n')}
`;
console.log(report);
writeFileSync(path.resolve(root, args.out), report);
