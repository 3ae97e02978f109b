// Server CPU per run cycle of this commit, one line per invocation in bench/results/cpu-per-cycle.tsv, so a
// regression shows up commit by commit without CI. Runs bench/agent-server.ts on the embedded and the Postgres
// store (short windows, several rounds; server CPU per cycle is steady on a busy machine, cycles/s is not).
//   node --import tsx bench/cpu-per-cycle.ts [--seconds 24] [--rounds 4] [--clients 32] [--no-append]
// On a loaded machine a cycle can outlast a window: fewer clients keep the figures meaningful (say so in the commit).
// Columns: commit (with "+" when the tree has uncommitted changes), UTC time, embedded and Postgres server CPU
// ms/cycle, Postgres SQL statements/cycle, embedded and Postgres cycles/s, 1-minute load average, and the CPU of the
// PostgreSQL server's processes per Postgres cycle (every process named postgres; "-" in lines before that column).
import { execFile } from 'node:child_process';
import { appendFile, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const tsv = path.join(root, 'bench/results/cpu-per-cycle.tsv');
const run = promisify(execFile);

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '24' },
    rounds: { type: 'string', default: '4' },
    clients: { type: 'string', default: '32' },
    'no-append': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (args.help) {
  process.stdout.write(
    [
      'Server CPU per run cycle of this commit, appended as one line to bench/results/cpu-per-cycle.tsv.',
      '  node --import tsx bench/cpu-per-cycle.ts [--seconds 24] [--rounds 4] [--clients 32] [--no-append]',
      '--seconds   measured seconds per store, split over the rounds (default 24)',
      '--rounds    how many times the two stores take turns (default 4)',
      '--clients   SDK clients running the cycle at once (default 32; fewer on a loaded machine)',
      '--no-append print the line without adding it to the file',
      'Needs `npm run build:cli` and PostgreSQL at 127.0.0.1:5432. Columns: commit ("+" when the tree has',
      'uncommitted changes), UTC time, embedded and Postgres server CPU ms/cycle, Postgres statements/cycle,',
      "embedded and Postgres cycles/s, 1-minute load average, Postgres' own CPU ms per Postgres cycle.",
      '',
    ].join('\n'),
  );
  process.exit(0);
}

interface Result {
  target: string;
  cyclesPerSec: number;
  cpuMsPerCycle?: number;
  statementsPerCycle?: number;
  dbCpuMsPerCycle?: number;
  loadAvg: number;
}

const git = async (...a: string[]) => (await run('git', a, { cwd: root })).stdout.trim();
const commit = await git('rev-parse', '--short', 'HEAD');
const dirty = (await git('status', '--porcelain', '--untracked-files=no')) !== '';
const dir = await mkdtemp(path.join(os.tmpdir(), 'ap-cpu-per-cycle-'));
try {
  const json = path.join(dir, 'results.json');
  await run(
    process.execPath,
    [
      '--import',
      'tsx',
      path.join(root, 'bench/agent-server.ts'),
      '--only',
      'embedded,postgres',
      '--seconds',
      args.seconds,
      '--rounds',
      args.rounds,
      '--clients',
      args.clients,
      '--latency-samples',
      '1',
      '--no-write',
      '--json',
      json,
    ],
    { cwd: root, maxBuffer: 16 * 1024 * 1024 },
  );
  const results = JSON.parse(await readFile(json, 'utf8')) as Result[];
  const by = (t: string) => results.find((r) => r.target === t);
  const f = (n: number | undefined) => (n === undefined ? '-' : n.toFixed(2));
  const e = by('embedded');
  const p = by('postgres');
  const line = [
    `${commit}${dirty ? '+' : ''}`,
    new Date().toISOString().slice(0, 19) + 'Z',
    f(e?.cpuMsPerCycle),
    f(p?.cpuMsPerCycle),
    f(p?.statementsPerCycle),
    f(e?.cyclesPerSec),
    f(p?.cyclesPerSec),
    f(os.loadavg()[0]),
    f(p?.dbCpuMsPerCycle),
  ].join('\t');
  process.stdout.write(`${line}\n`);
  if (!args['no-append']) {
    const header =
      'commit\tutc\tembedded_cpu_ms_per_cycle\tpostgres_cpu_ms_per_cycle\tpostgres_sql_per_cycle\tembedded_cycles_per_s\tpostgres_cycles_per_s\tload_avg\tpostgres_db_cpu_ms_per_cycle\n';
    const exists = await readFile(tsv, 'utf8').then(
      () => true,
      () => false,
    );
    await appendFile(tsv, `${exists ? '' : header}${line}\n`);
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}
