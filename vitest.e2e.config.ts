import { configDefaults, defineConfig } from 'vitest/config';
import suite from './vitest.config.ts';

// `npm run test:e2e`: the end-to-end tier, test/e2e/ (docs/development.md, "The e2e tier: whole platforms"): a real `agentplane dev`
// deploying repos that the SDK, the CLIs and browsers then call, the listener against a control plane, chaos and
// durability kills, LangChain's own CLI and reference suite. Not part of `npm test`; CI runs it after the suite
// (.ci/run). The same machinery as the suite (three files at a time, longest first, retries only on CI and each
// one reported), its flaky list in its own file.
export default defineConfig({
  ...suite,
  test: {
    ...suite.test,
    include: ['test/e2e/**/*.test.ts'],
    exclude: [...configDefaults.exclude],
    reporters: ['default', ['./test/support/summary-reporter.ts', { flakyFile: 'test-results/flaky-e2e.txt' }]],
  },
});
