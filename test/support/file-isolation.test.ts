// What one file leaves changed in a worker it shares with others (vitest `isolate: false`) is put back, and the file
// that left it fails, naming what, while the file after it passes: a vitest child run on fixture files
// (test/fixtures/leaks) with the suite's file-isolation.ts, all in one worker.
import { spawnSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const FIXTURE = join(ROOT, 'test/fixtures/leaks');

describe('a file that leaves process-wide state changed', () => {
  it('fails itself, naming what it left, and the next file in the worker neither sees it nor is blamed', () => {
    const env: NodeJS.ProcessEnv = { ...process.env, CI: undefined, NO_COLOR: '1', FORCE_COLOR: undefined };
    for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k];
    const r = spawnSync(
      process.execPath,
      [join(ROOT, 'node_modules/vitest/vitest.mjs'), 'run', '--config', join(FIXTURE, 'vitest.config.ts')],
      { cwd: ROOT, env, encoding: 'utf8', timeout: 120_000 },
    );
    const output = `${r.stdout}${r.stderr}`;
    expect(r.status, output).not.toBe(0);
    // The file lines of vitest's summary: the two that leaked fail, the clean one after them passes.
    const verdict = (file: string) => new RegExp(`^ ([✓❯×]) ${file}`, 'm').exec(output)?.[1];
    expect([verdict('a-signal-listener'), verdict('b-environment'), verdict('c-clean')], output).toEqual([
      '❯',
      '❯',
      '✓',
    ]);
    expect(output).toMatch(/left process-wide state changed[^\n]*1 'SIGTERM' listener\(s\) on process/);
    expect(output).toMatch(/left process-wide state changed[^\n]*process\.env \(replaced by another object\)/);
    expect(output).toMatch(/Tests\s+3 passed/);
  });
});
