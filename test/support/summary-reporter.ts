// Prints one plain closing line ("tests: N passed, N failed, N skipped") after vitest's own summary, so CI
// logs end with a count any reader or tool can parse; before it, the tests skipped for a missing system tool, counted
// by the tool (system-tools.ts), and each test that passed only when retried (see
// `retry` in vitest.config.ts), by file and name, with what its failed attempts threw (the message and where in the
// tests), so a flaky test is visible in every run that saw it and can be mended from that log alone. A retried test
// is a defect even when the run passes (exit code 0: a red CI would block every landing): the very last lines name
// each as `FLAKY <file> > <test>`, and test-results/flaky.txt keeps them with their errors for .ci/run to print at
// its end (the file is removed when a run has none, so a stale one never speaks for a later run). With
// AGENTPLANE_RECORD_DURATIONS=1 (npm run test:durations) it also writes each file's duration to
// test/support/durations.json, which the sequencer reads.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { TestError } from 'vitest';
import type { Reporter, TestModule, Vitest } from 'vitest/node';
import { DURATIONS_FILE } from './durations.ts';

/** Where the tests that passed only on a retry are written, relative to the run's root (a config may name another:
 * the kube tier's run must not remove the suite's list). */
export const FLAKY_FILE = 'test-results/flaky.txt';

export default class SummaryReporter implements Reporter {
  private root = process.cwd();
  private readonly flakyFile: string;

  constructor(options: { flakyFile?: string } = {}) {
    this.flakyFile = options.flakyFile ?? FLAKY_FILE;
  }

  onInit(ctx: Vitest): void {
    this.root = ctx.config.root;
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    const flaky: { name: string; why: string[] }[] = [];
    // Tests skipped with a note (a missing system tool: system-tools.ts), counted by note.
    const notes = new Map<string, number>();
    for (const mod of testModules) {
      for (const test of mod.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed' && test.diagnostic()?.flaky) {
          const why = (test.result().errors ?? []).map((e) => attemptError(e, this.root));
          flaky.push({ name: `${path.relative(this.root, mod.moduleId)} > ${test.fullName}`, why });
        }
        if (state === 'passed') passed++;
        else if (state === 'failed') failed++;
        else {
          skipped++;
          const result = test.result();
          const note = result.state === 'skipped' ? result.note : undefined;
          if (note) notes.set(note, (notes.get(note) ?? 0) + 1);
        }
      }
      // A file that failed to load has no tests but must still count as a failure.
      if (mod.state() === 'failed' && [...mod.children.allTests()].length === 0) failed++;
    }
    const details = flaky.map((f) => [`flaky (passed on a retry): ${f.name}`, ...f.why].join('\n'));
    for (const text of details) process.stdout.write(`\n${text}`);
    for (const [note, n] of notes) process.stdout.write(`\nskipped ${n} test${n === 1 ? '' : 's'}: ${note}`);
    process.stdout.write(
      `\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped${flaky.length ? `, ${flaky.length} flaky` : ''}\n`,
    );
    for (const f of flaky) process.stdout.write(`FLAKY ${f.name}\n`);
    const flakyFile = path.join(this.root, this.flakyFile);
    if (flaky.length) {
      process.stdout.write(
        `${flaky.length} test(s) passed only on a retry: each is a bug to fix (${this.flakyFile})\n`,
      );
      mkdirSync(path.dirname(flakyFile), { recursive: true });
      writeFileSync(flakyFile, `${details.join('\n')}\n`);
    } else rmSync(flakyFile, { force: true });
    if (process.env.AGENTPLANE_RECORD_DURATIONS === '1') recordDurations(this.root, testModules);
  }
}

/** A failed attempt's error in a few lines: its message and the first frames of its stack that are in our tree. */
function attemptError(e: TestError, root: string): string {
  const message = `${e.name ?? 'Error'}: ${e.message ?? ''}`.split('\n').slice(0, 30).join('\n    ');
  const frames = (e.stacks ?? [])
    .filter((f) => f.file.startsWith(root) && !f.file.includes('node_modules'))
    .slice(0, 3)
    .map((f) => `    at ${f.method || '<anonymous>'} (${path.relative(root, f.file)}:${f.line}:${f.column})`);
  return [`  attempt failed: ${message}`, ...frames].join('\n');
}

function recordDurations(root: string, testModules: ReadonlyArray<TestModule>): void {
  const entries = testModules.map(
    (m) => [path.relative(root, m.moduleId).split(path.sep).join('/'), m.diagnostic().duration / 1000] as const,
  );
  // A run of some files updates theirs and keeps the others',
  const file = path.join(root, DURATIONS_FILE);
  let known: Record<string, number> = {};
  try {
    known = JSON.parse(readFileSync(file, 'utf8')) as Record<string, number>;
  } catch {
    // none yet
  }
  for (const [name, secs] of entries) known[name] = Math.round(secs * 10) / 10;
  // and forgets the files that are gone (moved or deleted), so a moved file's old record is not read as its own.
  const sorted = Object.entries(known)
    .filter(([name]) => existsSync(path.join(root, name)))
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  writeFileSync(file, `${JSON.stringify(Object.fromEntries(sorted), null, 2)}\n`);
}
