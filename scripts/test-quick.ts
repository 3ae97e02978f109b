// `npm run test:quick`: the edit loop's tier. Runs the test files that took at most QUICK_SECONDS in the last
// recorded full run (test/support/durations.json, refreshed with `npm run test:durations`; a file moved since is
// known by its name, test/support/durations.ts): units, table tests and in-process service tests. Files that start
// platforms, builds or browsers take longer and stay in `npm test`, as do files with no record yet; the e2e and kube
// tiers are never part of it. Extra arguments go to vitest (e.g. `npm run test:quick -- test/lib`).
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { durationsOf } from '../test/support/durations.ts';

const QUICK_SECONDS = 5;
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const testFiles = readdirSync(join(root, 'test'), { recursive: true, encoding: 'utf8' })
  .map((f) => `test/${f.split('\\').join('/')}`)
  .filter(
    (f) =>
      f.endsWith('.test.ts') && !f.includes('/fixtures/') && !f.startsWith('test/kube/') && !f.startsWith('test/e2e/'),
  );
const filters = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const files = [...durationsOf(root, testFiles)]
  .filter(([, seconds]) => seconds <= QUICK_SECONDS)
  .map(([file]) => file)
  .filter((file) => !filters.length || filters.some((f) => file.startsWith(f.replace(/^\.\//, ''))))
  .sort();
if (!files.length) {
  process.stderr.write(`test:quick: no quick test file matches ${filters.join(' ')}\n`);
  process.exit(1);
}
process.stderr.write(`test:quick: ${files.length} files that took ≤ ${QUICK_SECONDS} s in the last full run\n`);
const flags = process.argv.slice(2).filter((a) => a.startsWith('-'));
const vitest = join(root, 'node_modules/vitest/vitest.mjs');
const r = spawnSync(process.execPath, [vitest, 'run', ...flags, ...files], { cwd: root, stdio: 'inherit' });
process.exit(r.status ?? 1);
