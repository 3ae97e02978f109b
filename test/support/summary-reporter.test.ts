// A test that passed only on a retry, as CI sees it: the run stays green (a red CI blocks every landing) but its last
// lines name the test as FLAKY with its file, and test-results/flaky.txt (which .ci/run prints at its end) keeps it
// with what the failed attempt threw. Runs vitest in a child on a fixture file.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FLAKY_FILE } from './summary-reporter.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const FIXTURE = join(ROOT, 'test/fixtures/flaky');
const flakyFile = join(FIXTURE, FLAKY_FILE);
afterAll(() => rmSync(join(FIXTURE, 'test-results'), { recursive: true, force: true }));

function runFixture(ci: boolean) {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    CI: ci ? 'true' : undefined,
    AGENTPLANE_RECORD_DURATIONS: undefined,
  };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k];
  const r = spawnSync(
    process.execPath,
    [join(ROOT, 'node_modules/vitest/vitest.mjs'), 'run', '--config', join(FIXTURE, 'vitest.config.ts')],
    { cwd: ROOT, env, encoding: 'utf8', timeout: 120_000 },
  );
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

describe('a test that passes only on a retry', () => {
  it('under CI: the run passes, its last lines say FLAKY with the file, and the flaky file keeps the error', () => {
    const r = runFixture(true);
    expect(r.status, r.output).toBe(0);
    const tail = r.output.trimEnd().split('\n').slice(-3);
    expect(tail).toEqual([
      'tests: 2 passed, 0 failed, 0 skipped, 1 flaky',
      'FLAKY passes-on-retry.fixture.ts > wins on its second attempt',
      `1 test(s) passed only on a retry: each is a bug to fix (${FLAKY_FILE})`,
    ]);
    const written = readFileSync(flakyFile, 'utf8');
    expect(written).toContain('flaky (passed on a retry): passes-on-retry.fixture.ts > wins on its second attempt');
    expect(written).toContain('attempt failed: AssertionError: the first attempt lost its race');
    expect(written).toMatch(/at .*\(passes-on-retry\.fixture\.ts:\d+:\d+\)/);
  });

  it('without retries (outside CI) the run fails, and no stale flaky file is left to speak for it', () => {
    expect(existsSync(flakyFile)).toBe(true); // from the run above
    const r = runFixture(false);
    expect(r.status).not.toBe(0);
    expect(r.output).toMatch(/^tests: 1 passed, 1 failed, 0 skipped$/m);
    expect(r.output).not.toContain('FLAKY');
    expect(existsSync(flakyFile)).toBe(false);
  });
});
