// Idle memory of an awake agent server (not a test): the example agent on a fresh embedded store, its resident set
// at start, right after --cycles run cycles, and --wait-secs later, with the executor threads released when idle
// (--executor-idle-secs 30, the default) and kept (0), one server after the other.
//
//   node --import tsx bench/idle-rss.ts [--cycles 300] [--wait-secs 45]
//
// Results go to stdout and bench/results/idle-rss.md.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Client } from '@langchain/langgraph-sdk';
import { cycles, freshStore, startAgentServer } from './agent-server-process.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: { cycles: { type: 'string', default: '300' }, 'wait-secs': { type: 'string', default: '45' } },
});
const n = Number(args.cycles);
const waitSecs = Number(args['wait-secs']);

/** Resident set of a process (MB), from /proc. */
const rssMb = (pid: number) => Number(/^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024;

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
  proc.kill('SIGTERM');
  await new Promise((r) => proc.once('exit', r));
  await store.cleanup();
  return { idleSecs, atStart, afterRuns, later, cyclesRun: done };
}

const rows = [await measure(30, 18931), await measure(0, 18932)];
const mb = (x: number) => `${x.toFixed(0)} MB`;
const report = `# Idle memory of an awake agent server (bench/idle-rss.ts)

${new Date().toISOString().slice(0, 10)}, Node ${process.version}, the example agent, embedded store, one executor
thread; \`node --import tsx bench/idle-rss.ts --cycles ${n} --wait-secs ${waitSecs}\` (RSS from /proc, shared machine).

| executor threads | RSS at start | after the run cycles | ${waitSecs} s later |
|---|---|---|---|
${rows
  .map(
    (r) =>
      `| ${r.idleSecs ? `released after ${r.idleSecs} s idle` : 'kept (--executor-idle-secs 0)'} | ${mb(r.atStart)} | ${mb(r.afterRuns)} (${r.cyclesRun} cycles) | ${mb(r.later)} |`,
  )
  .join('\n')}
`;
console.log(report);
writeFileSync(path.join(root, 'bench/results/idle-rss.md'), report);
