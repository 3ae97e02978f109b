// `npm test`: the static checks (scripts/checks.mjs) and the suite (vitest run) side by side, not one after the
// other. The suite's workers spend much of their time waiting on the processes, databases and sockets their
// tests start, and the checks (~90 s of CPU) fill those gaps: they run at a lower priority (nice 10), so the suite,
// which starts its longest files first, is hardly slowed by them. The suite prints as it goes; the checks' report
// follows it, and the exit code is non-zero when either failed. Arguments go to vitest (`npm test -- <files>`).
import { spawn } from 'node:child_process';
import { setPriority } from 'node:os';
import path from 'node:path';

const root = path.join(import.meta.dirname, '..');

function run(args, { capture, nice }) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, {
      cwd: root,
      stdio: capture ? ['ignore', 'pipe', 'pipe'] : 'inherit',
    });
    if (nice) {
      try {
        // Before the checks start their own processes (they inherit it): they load their modules first.
        setPriority(child.pid, nice);
      } catch {
        // Not permitted here: the checks run at the suite's priority, which is only slower.
      }
    }
    let out = '';
    child.stdout?.on('data', (d) => (out += d));
    child.stderr?.on('data', (d) => (out += d));
    child.on('error', (err) => resolve({ code: 1, out: `${out}${err.message}\n` }));
    child.on('close', (code, signal) => resolve({ code: code ?? (signal ? 1 : 0), out }));
  });
}

const vitest = path.join(root, 'node_modules', 'vitest', 'vitest.mjs');
const [checks, suite] = await Promise.all([
  run([path.join(import.meta.dirname, 'checks.mjs')], { capture: true, nice: 10 }),
  run([vitest, 'run', ...process.argv.slice(2)], { capture: false }),
]);
process.stdout.write(`\nstatic checks (scripts/checks.mjs, run beside the suite):\n${checks.out}`);
if (checks.code !== 0) process.stdout.write('npm test: the static checks failed (above)\n');
if (suite.code !== 0) process.stdout.write('npm test: the suite failed\n');
process.exit(checks.code || suite.code);
