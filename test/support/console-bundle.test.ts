// Test files rebuild the console bundle only when it is missing or older than its sources (test/support/console-bundle.ts).
import { mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ensureConsoleBundle } from './console-bundle.ts';

let root: string | undefined;
afterEach(() => {
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('ensureConsoleBundle', () => {
  it('builds when the bundle is missing or a source is newer, and leaves a fresh bundle alone', () => {
    root = mkdtempSync(join(tmpdir(), 'ap-console-bundle-'));
    mkdirSync(join(root, 'console/src/pages'), { recursive: true });
    const page = join(root, 'console/src/pages/home.tsx');
    writeFileSync(page, 'export {};\n');
    // A stand-in build script: writes the bundle and counts its runs.
    writeFileSync(
      join(root, 'console/build.mjs'),
      `import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
       mkdirSync('dist/console', { recursive: true });
       writeFileSync('dist/console/index.html', '<html></html>');
       appendFileSync('builds.log', 'x');`,
    );
    const builds = () => readFileSync(join(root!, 'builds.log'), 'utf8').length;
    const old = new Date(Date.now() - 60_000);
    for (const f of [page, join(root, 'console/build.mjs')]) utimesSync(f, old, old);

    expect(ensureConsoleBundle(root)).toBe(true);
    expect(ensureConsoleBundle(root)).toBe(false);
    expect(builds()).toBe(1);

    // A source edited after the build (deep in the tree) makes it stale.
    const later = new Date(Date.now() + 60_000);
    utimesSync(page, later, later);
    expect(ensureConsoleBundle(root)).toBe(true);
    expect(builds()).toBe(2);
  });
});
