import { configDefaults, defineConfig } from 'vitest/config';
import LongestFirstSequencer from './test/support/sequencer.ts';

// `npm test` runs this tier: every test pinned to the code it tests (test/<path under src>/), the chart, the console
// and the docs. Two tiers run on their own, each after it in CI (.ci/run): the end-to-end scenarios of test/e2e/
// (`npm run test:e2e`, vitest.e2e.config.ts: whole platforms deployed and called, chaos and durability kills, the
// reference suite) and the real Kubernetes control plane of test/kube/ (`npm run test:kube`, vitest.kube.config.ts).
const TIERS_ON_THEIR_OWN = ['test/e2e/**', 'test/kube/**'];

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'src/**/*.test.ts'],
    exclude: [...configDefaults.exclude, ...TIERS_ON_THEIR_OWN],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // On CI a failed test runs again, up to twice: these tests start real processes on a shared 2-core machine, and
    // one lost race there must not discard a whole submission. A test that passes only on a retry is still named
    // in the closing lines (summary-reporter.ts prints it as flaky), so it is seen and mended, not hidden; one that
    // fails three times fails the run. Locally (no CI variable) there are no retries.
    retry: process.env.CI ? 2 : 0,
    // Three files at a time on two cores: much of a file's time is spent waiting on the processes, databases and
    // sockets it started, and a third file fills it (measured in docs/development.md, "What a test costs").
    maxWorkers: 3,
    pool: 'forks',
    // Modules load once per worker, not once per file (the files' imports took ~110 s of a run when each file had a
    // process of its own); what a file changes process-wide is put back by file-isolation.ts.
    isolate: false,
    setupFiles: ['./test/support/file-isolation.ts'],
    // Picks the PostgreSQL server of the run (AGENTPLANE_TEST_DATABASE_URL, 127.0.0.1:5432, or an embedded one).
    globalSetup: ['./test/support/postgres-global-setup.ts'],
    reporters: ['default', './test/support/summary-reporter.ts'],
    // Longest files first, from a committed list, also on a fresh clone without vitest's cache.
    sequence: { sequencer: LongestFirstSequencer },
  },
});
