// A test file whose system program is missing: skipped with one line naming the package outside CI (and counted in
// the summary), a failure under CI. Runs vitest in a child on a fixture file, with Chromium pointed at a path that
// does not exist.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const CONFIG = join(ROOT, 'test/fixtures/system-tools/vitest.config.ts');
const scratch = mkdtempSync(join(tmpdir(), 'ap-system-tools-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function runFixture(extraEnv: Record<string, string | undefined>) {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    AGENTPLANE_CHROMIUM: join(scratch, 'no-chromium'),
    // The outer run's `npm run test:durations` records this repository's durations, not the fixture's.
    AGENTPLANE_RECORD_DURATIONS: undefined,
    ...extraEnv,
  };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k];
  const r = spawnSync(process.execPath, [join(ROOT, 'node_modules/vitest/vitest.mjs'), 'run', '--config', CONFIG], {
    cwd: ROOT,
    env,
    encoding: 'utf8',
    timeout: 120_000,
  });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

describe('a test file whose system program is missing', () => {
  it('outside CI: skips with one line naming the package, and the summary counts the skipped tests', () => {
    const r = runFixture({ CI: undefined, GITHUB_ACTIONS: undefined });
    expect(r.output).toContain('skipped needs-chromium.fixture.ts: missing system tool:');
    expect(r.output).toContain('apt-get install chromium');
    expect(r.output).toMatch(/skipped 2 tests: missing system tool: \S+no-chromium \(apt-get install chromium\)/);
    expect(r.output).toMatch(/^tests: 0 passed, 0 failed, 2 skipped$/m);
    expect(r.status).toBe(0);
  });

  it('under CI: fails the run, naming the package', () => {
    const r = runFixture({ CI: 'true' });
    expect(r.output).toContain('apt-get install chromium');
    expect(r.output).toContain('CI installs every tool the tests use');
    expect(r.status).not.toBe(0);
  });
});
