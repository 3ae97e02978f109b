import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'src/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Suites start real processes and share one Postgres; two cores do not gain from more.
    maxWorkers: 2,
    pool: 'forks',
    reporters: ['default', './test/support/summary-reporter.ts'],
  },
});
