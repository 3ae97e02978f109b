// The test-layout check of `npm run checks` on a tree of its own: a test file whose folder mirrors no src/ folder is
// named, wherever the other exceptions (test/e2e/, test/support/, fixtures, code outside src/) leave it alone.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { misplacedTests } from '../../scripts/test-layout.ts';

const dirs: string[] = [];
afterAll(async () => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

it('names the test files whose folder has no src/ counterpart, and only those', async () => {
  const root = await mkdtemp(path.join(os.tmpdir(), 'ap-layout-'));
  dirs.push(root);
  const files = [
    'src/agent-server/storage/index.ts',
    'charts/agentplane/Chart.yaml',
    'test/cli.test.ts',
    'test/agent-server/storage/contract.test.ts',
    'test/agent-server/helpers/process.ts',
    'test/charts/render.test.ts',
    'test/e2e/flow.test.ts',
    'test/support/kube-apiserver/double.test.ts',
    'test/agent-server/fixtures/graph/graph.test.ts',
    'test/kube/chart.test.ts',
    'test/agent-server/storage/postgres/reads.test.ts',
    'test/kubernetes/operator.test.ts',
    'test/docs/tables.test.ts',
    'test/dist/bundle.test.ts',
  ];
  for (const f of files) {
    await mkdir(path.dirname(path.join(root, f)), { recursive: true });
    await writeFile(path.join(root, f), '');
  }
  await mkdir(path.join(root, 'dist/bundle'), { recursive: true });
  expect(misplacedTests(root).map((line) => line.split(':')[0])).toEqual([
    'test/agent-server/storage/postgres/reads.test.ts',
    'test/dist/bundle.test.ts',
    'test/kubernetes/operator.test.ts',
  ]);
});

it('finds nothing out of place in this repository', () => {
  expect(misplacedTests(path.join(import.meta.dirname, '../..'))).toEqual([]);
});
