// `npm run test:cpu [-- vitest args]`: runs the suite (vitest run, as `npm test` does without the static checks) and
// reports where the machine's CPU went: per test file, per kind of process (agent servers, `agentplane dev`, npm,
// PostgreSQL backends, the vitest workers themselves...). `/usr/bin/time` cannot tell
// this: it counts only the processes waited for, not the agent servers a SIGKILLed `agentplane dev` leaves orphaned,
// nor what runs outside the process tree (PostgreSQL backends, sandboxed processes).
//
// How: every 100 ms each process's user + system time is read from /proc/<pid>/stat; each increase is charged to the
// test file its vitest worker was running at that moment (test/support/file-isolation.ts writes when each file
// starts and ends in each worker, to AGENTPLANE_SUITE_CPU_LOG), found by walking up the process's parents as they
// were when it was first seen. A process that lives less than 100 ms may go unseen; PostgreSQL backends and other
// processes outside a worker's tree are charged to no file ("outside the workers"), and so is whatever else the
// machine runs meanwhile: measure on a quiet machine. Linux only.
// Writes the whole attribution as JSON beside the report (--out FILE, default .agentplane/suite-cpu.json).
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const root = path.join(import.meta.dirname, '..');

/** One process as first seen: its parent then, and what it runs. */
export interface ProcessSeen {
  key: string; // pid:starttime (pids are reused)
  pid: number;
  ppid: number;
  cmd: string;
}
/** CPU seconds a process gained between two looks, at `at` (ms since epoch). */
export interface CpuDelta {
  key: string;
  at: number;
  cpu: number;
}
/** A test file's time in one vitest worker (from file-isolation.ts). */
export interface FileSpan {
  pid: number;
  file: string;
  start: number;
  end: number;
}

const OUTSIDE = '(outside the workers)';
const BETWEEN = '(a worker between files)';

/** What kind of process a command line is: `agentplane <command>`, the vitest worker, npm, postgres, ... */
export function processKind(cmd: string): string {
  const words = cmd.split(' ').filter(Boolean);
  const bin = words.findIndex((w) => w.endsWith('/agentplane.mjs') || w.endsWith('/agentplane'));
  if (bin >= 0) return `agentplane ${words[bin + 1] ?? ''}`.trim();
  // vitest's workers (and what a test forks from one: it inherits their flags).
  if (cmd.includes('/vitest/suppress-warnings.cjs')) return 'vitest worker';
  if (words.some((w) => w.endsWith('/vitest.mjs'))) return 'vitest';
  if (cmd.startsWith('postgres: ')) return 'postgres backend';
  const base = (w: string | undefined) => (w ?? '?').replace(/.*\//, '');
  const first = base(words[0]);
  // node running a package's binary or a script: name that, not node.
  if (first === 'node' && words[1] && !words[1].startsWith('-')) return `node ${base(words[1])}`;
  return first;
}

/** Each process's nearest ancestor (itself included) that is a vitest worker with file spans. */
function workerOf(procs: Map<string, ProcessSeen>, workers: Set<number>): (key: string) => number | undefined {
  const byPid = new Map<number, ProcessSeen[]>();
  for (const p of procs.values()) byPid.set(p.pid, [...(byPid.get(p.pid) ?? []), p]);
  const memo = new Map<string, number | undefined>();
  return (key) => {
    if (memo.has(key)) return memo.get(key);
    let cur = procs.get(key);
    let found: number | undefined;
    for (let hops = 0; cur && hops < 64; hops++) {
      if (workers.has(cur.pid)) {
        found = cur.pid;
        break;
      }
      // The parent as it was then: the latest process of that pid (pids are rarely reused within a run).
      const parents = byPid.get(cur.ppid);
      cur = parents?.[parents.length - 1];
    }
    memo.set(key, found);
    return found;
  };
}

export interface Attribution {
  totalCpu: number;
  files: { file: string; cpu: number; wall: number; agentServers: number; kinds: Record<string, number> }[];
  kinds: { kind: string; cpu: number; processes: number }[];
}

/** Charges each CPU increase to the file its worker ran then (a grace of 2 s after a file's end, for its teardown). */
export function attribute(procs: ProcessSeen[], deltas: CpuDelta[], spans: FileSpan[]): Attribution {
  const byKey = new Map(procs.map((p) => [p.key, p]));
  const spansOf = new Map<number, FileSpan[]>();
  for (const s of [...spans].sort((a, b) => a.start - b.start)) spansOf.set(s.pid, [...(spansOf.get(s.pid) ?? []), s]);
  const worker = workerOf(byKey, new Set(spansOf.keys()));
  const fileAt = (key: string, at: number): string => {
    const w = worker(key);
    if (w === undefined) return OUTSIDE;
    const span = spansOf
      .get(w)!
      .filter((s) => s.start <= at)
      .at(-1);
    return span && at <= span.end + 2_000 ? span.file : BETWEEN;
  };
  const files = new Map<string, { cpu: number; kinds: Map<string, number>; agentServers: Set<string> }>();
  const kinds = new Map<string, { cpu: number; processes: Set<string> }>();
  let totalCpu = 0;
  for (const d of deltas) {
    const p = byKey.get(d.key);
    if (!p) continue;
    totalCpu += d.cpu;
    const kind = processKind(p.cmd);
    const file = fileAt(d.key, d.at);
    const f = files.get(file) ?? { cpu: 0, kinds: new Map(), agentServers: new Set() };
    f.cpu += d.cpu;
    f.kinds.set(kind, (f.kinds.get(kind) ?? 0) + d.cpu);
    if (kind === 'agentplane agent-server') f.agentServers.add(d.key);
    files.set(file, f);
    const k = kinds.get(kind) ?? { cpu: 0, processes: new Set() };
    k.cpu += d.cpu;
    k.processes.add(d.key);
    kinds.set(kind, k);
  }
  const wallOf = (file: string) =>
    spans.filter((s) => s.file === file).reduce((sum, s) => sum + (Number.isFinite(s.end) ? s.end - s.start : 0), 0) /
    1000;
  return {
    totalCpu,
    files: [...files]
      .map(([file, f]) => ({
        file,
        cpu: f.cpu,
        wall: wallOf(file),
        agentServers: f.agentServers.size,
        kinds: Object.fromEntries([...f.kinds].sort((a, b) => b[1] - a[1])),
      }))
      .sort((a, b) => b.cpu - a.cpu),
    kinds: [...kinds]
      .map(([kind, k]) => ({ kind, cpu: k.cpu, processes: k.processes.size }))
      .sort((a, b) => b.cpu - a.cpu),
  };
}

/** The spans written by file-isolation.ts: `S|E <pid> <ms> <file>` lines. */
export function readSpans(text: string, rootDir: string): FileSpan[] {
  const spans: FileSpan[] = [];
  for (const line of text.split('\n')) {
    const m = /^([SE]) (\d+) (\d+) (.+)$/.exec(line);
    if (!m) continue;
    const [, what, pid, at, abs] = m;
    const file = path.relative(rootDir, abs!);
    if (what === 'S') spans.push({ pid: Number(pid), file, start: Number(at), end: Infinity });
    else {
      const open = spans.findLast((s) => s.pid === Number(pid) && s.file === file && s.end === Infinity);
      if (open) open.end = Number(at);
    }
  }
  return spans;
}

/** Looks at every process every `intervalMs`; `stop()` returns what it saw. */
function sampleProcesses(intervalMs: number) {
  const ticks = 100; // USER_HZ: /proc's clock ticks per second on Linux
  const seen = new Map<string, ProcessSeen>();
  const last = new Map<string, number>();
  const deltas: CpuDelta[] = [];
  const look = (first: boolean) => {
    const at = Date.now();
    for (const name of readdirSync('/proc')) {
      if (!/^\d+$/.test(name)) continue;
      try {
        const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
        const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        const ppid = Number(f[1]);
        if (ppid === 2 || name === '2') continue; // kernel threads
        const key = `${name}:${f[19]}`;
        const cpu = (Number(f[11]) + Number(f[12])) / ticks;
        if (!seen.has(key)) {
          let cmd = '';
          try {
            cmd = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').join(' ').trim().slice(0, 300);
          } catch {
            // gone already
          }
          seen.set(key, { key, pid: Number(name), ppid, cmd });
          // What ran before the suite started is not the suite's.
          last.set(key, first ? cpu : 0);
        }
        const gained = cpu - last.get(key)!;
        if (gained > 0) deltas.push({ key, at, cpu: gained });
        last.set(key, cpu);
      } catch {
        // the process ended between the listing and the read
      }
    }
  };
  look(true);
  const timer = setInterval(() => look(false), intervalMs);
  return {
    stop() {
      clearInterval(timer);
      look(false);
      return { procs: [...seen.values()], deltas };
    },
  };
}

async function main() {
  const args = process.argv.slice(2);
  const at = args.indexOf('--out');
  const out = path.resolve(at >= 0 ? args.splice(at, 2)[1]! : path.join(root, '.agentplane/suite-cpu.json'));
  const work = mkdtempSync(path.join(tmpdir(), 'suite-cpu-'));
  const spanLog = path.join(work, 'files.log');
  writeFileSync(spanLog, '');
  const started = Date.now();
  const sampler = sampleProcesses(100);
  const code = await new Promise<number>((resolve) => {
    const child = spawn(process.execPath, [path.join(root, 'node_modules/vitest/vitest.mjs'), 'run', ...args], {
      cwd: root,
      stdio: 'inherit',
      env: { ...process.env, AGENTPLANE_SUITE_CPU_LOG: spanLog },
    });
    child.on('close', (c) => resolve(c ?? 1));
  });
  const wall = (Date.now() - started) / 1000;
  const { procs, deltas } = sampler.stop();
  const result = attribute(procs, deltas, readSpans(readFileSync(spanLog, 'utf8'), root));
  rmSync(work, { recursive: true, force: true });
  mkdirSync(path.dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify({ wall, ...result }, null, 2)}\n`);
  const s = (n: number) => n.toFixed(1).padStart(7);
  const lines = [
    '',
    `suite CPU (scripts/suite-cpu.ts): ${result.totalCpu.toFixed(0)} CPU-seconds in ${wall.toFixed(0)} s ` +
      `(the machine's CPUs ${((result.totalCpu / wall) * 100).toFixed(0)} % busy on average, counting one CPU as 100 %)`,
    '',
    'by kind of process:         CPU-s  processes',
    ...result.kinds.slice(0, 20).map((k) => `${k.kind.slice(0, 26).padEnd(26)} ${s(k.cpu)}  ${k.processes}`),
    '',
    'by test file (CPU-s, wall s of the file, agent servers, top kinds):',
    ...result.files.slice(0, 40).map(
      (f) =>
        `${s(f.cpu)} ${s(f.wall)} ${String(f.agentServers).padStart(3)}  ${f.file}  ` +
        Object.entries(f.kinds)
          .slice(0, 3)
          .map(([k, v]) => `${k} ${v.toFixed(0)}`)
          .join(', '),
    ),
    '',
    `every file: ${path.relative(process.cwd(), out)}`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  process.exit(code);
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
