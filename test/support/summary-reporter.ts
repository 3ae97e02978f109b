// Prints one plain closing line ("tests: N passed, N failed, N skipped") after vitest's own summary, so CI
// logs end with a count any reader or tool can parse; before it, each test that passed only when retried (see
// `retry` in vitest.config.ts), by file and name, so a flaky test is visible in every run that saw it. With
// AGENTPLANE_RECORD_DURATIONS=1 (npm run test:durations) it also writes each file's duration to
// test/support/durations.json, which the sequencer reads.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Reporter, TestModule, Vitest } from 'vitest/node';
import { DURATIONS_FILE } from './sequencer.ts';

export default class SummaryReporter implements Reporter {
  private root = process.cwd();

  onInit(ctx: Vitest): void {
    this.root = ctx.config.root;
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    const flaky: string[] = [];
    for (const mod of testModules) {
      for (const test of mod.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed' && test.diagnostic()?.flaky) {
          flaky.push(`${path.relative(this.root, mod.moduleId)} > ${test.fullName}`);
        }
        if (state === 'passed') passed++;
        else if (state === 'failed') failed++;
        else skipped++;
      }
      // A file that failed to load has no tests but must still count as a failure.
      if (mod.state() === 'failed' && [...mod.children.allTests()].length === 0) failed++;
    }
    for (const name of flaky) process.stdout.write(`\nflaky (passed on a retry): ${name}`);
    process.stdout.write(
      `\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped${flaky.length ? `, ${flaky.length} flaky` : ''}\n`,
    );
    if (process.env.AGENTPLANE_RECORD_DURATIONS === '1') recordDurations(this.root, testModules);
  }
}

function recordDurations(root: string, testModules: ReadonlyArray<TestModule>): void {
  const entries = testModules.map(
    (m) => [path.relative(root, m.moduleId).split(path.sep).join('/'), m.diagnostic().duration / 1000] as const,
  );
  // A run of some files updates theirs and keeps the others'.
  const file = path.join(root, DURATIONS_FILE);
  let known: Record<string, number> = {};
  try {
    known = JSON.parse(readFileSync(file, 'utf8')) as Record<string, number>;
  } catch {
    // none yet
  }
  for (const [name, secs] of entries) known[name] = Math.round(secs * 10) / 10;
  const sorted = Object.entries(known).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  writeFileSync(file, `${JSON.stringify(Object.fromEntries(sorted), null, 2)}\n`);
}
