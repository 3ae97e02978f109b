#!/usr/bin/env node
// `npm run test:quick`: the edit loop's tier. Runs the test files that took at most QUICK_SECONDS in the last
// recorded full run (test/support/durations.json, refreshed with `npm run test:durations`): units, table tests and
// in-process service tests. Files that start platforms, builds or browsers take longer and stay in `npm test`, as do
// files with no record yet. Extra arguments go to vitest (e.g. `npm run test:quick -- test/lib`).
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const QUICK_SECONDS = 5;
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const durations = JSON.parse(readFileSync(join(root, 'test/support/durations.json'), 'utf8'));
const filters = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const files = Object.entries(durations)
  .filter(([file, seconds]) => seconds <= QUICK_SECONDS && existsSync(join(root, file)))
  .map(([file]) => file)
  .filter((file) => !filters.length || filters.some((f) => file.startsWith(f.replace(/^\.\//, ''))));
if (!files.length) {
  process.stderr.write(`test:quick: no quick test file matches ${filters.join(' ')}\n`);
  process.exit(1);
}
process.stderr.write(`test:quick: ${files.length} files that took ≤ ${QUICK_SECONDS} s in the last full run\n`);
const flags = process.argv.slice(2).filter((a) => a.startsWith('-'));
const vitest = join(root, 'node_modules/vitest/vitest.mjs');
const r = spawnSync(process.execPath, [vitest, 'run', ...flags, ...files], { cwd: root, stdio: 'inherit' });
process.exit(r.status ?? 1);
