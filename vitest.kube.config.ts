import { defineConfig } from 'vitest/config';

// `npm run test:kube`: the operator and the chart on a real Kubernetes control plane (test/kube/, docs/development.md).
// Not part of `npm test` (vitest.config.ts leaves test/kube/ out): the first run builds the binaries.
export default defineConfig({
  test: {
    include: ['test/kube/**/*.test.ts'],
    testTimeout: 180_000,
    hookTimeout: 300_000,
    retry: process.env.CI ? 1 : 0,
    // One control plane at a time: five servers and two agentplane processes already fill two cores.
    maxWorkers: 1,
    fileParallelism: false,
    pool: 'forks',
    globalSetup: ['./test/kube/global-setup.ts'],
    reporters: ['default', ['./test/support/summary-reporter.ts', { flakyFile: 'test-results/flaky-kube.txt' }]],
  },
});
