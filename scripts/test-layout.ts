// `npm run checks` (test layout): the tests of a file sit under the same path in test/ as the file under src/
// (test/agent-server/storage/ for src/agent-server/storage/), so a reader finds them by folder names alone, and a
// regrouping of src/ that leaves its tests behind fails here. Cross-cutting scenarios and end-to-end flows live in
// test/e2e/; test/support/ (the suite's own helpers, the Kubernetes API double and their tests), test/fixtures/,
// test/kube/ (the real-Kubernetes tier) and test/docs/ mirror nothing. Code outside src/ with tests of its own (the
// Helm chart, the web console, scripts/) is mirrored by its top-level folder: test/charts/, test/console/.
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';

const UNMIRRORED = ['e2e', 'support', 'fixtures', 'kube', 'docs'];
const NOT_CODE = ['test', 'src', 'node_modules', 'dist', 'docs'];

const isDir = (p: string) => existsSync(p) && statSync(p).isDirectory();

/** Test files under `root`/test whose folder has no counterpart, each with the folder it should mirror. */
export function misplacedTests(root: string): string[] {
  const misplaced: string[] = [];
  const files = readdirSync(path.join(root, 'test'), { recursive: true, encoding: 'utf8' });
  for (const file of files.map((f) => f.split(path.sep).join('/')).sort()) {
    if (!file.endsWith('.test.ts')) continue;
    const dir = path.posix.dirname(file) === '.' ? '' : path.posix.dirname(file);
    const top = dir.split('/')[0]!;
    if (UNMIRRORED.includes(top) || dir.split('/').includes('fixtures')) continue;
    if (isDir(path.join(root, 'src', dir))) continue;
    if (top && !NOT_CODE.includes(top) && isDir(path.join(root, dir))) continue;
    misplaced.push(
      `test/${file}: no src/${dir ? `${dir}/` : ''} to mirror (move it under the path of the code it tests, or to test/e2e/)`,
    );
  }
  return misplaced;
}

if (process.argv[1] === import.meta.filename) {
  const misplaced = misplacedTests(path.join(import.meta.dirname, '..'));
  for (const line of misplaced) process.stderr.write(`${line}\n`);
  process.exitCode = misplaced.length ? 1 : 0;
}
