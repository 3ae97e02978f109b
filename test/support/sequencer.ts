// Test files start longest first (from test/support/durations.json), so that the long files do not end up last,
// alone, while the other workers are idle. vitest orders by its own cache of earlier runs, which a
// fresh clone (CI) does not have: there it would start files in discovery order. Files missing from the list
// (new ones) start first, as vitest does with files it has no record of. Refresh the list with
// `npm run test:durations` after adding or reshaping slow tests.
import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { durationsOf } from './durations.ts';

export default class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const rel = (f: TestSpecification) => path.relative(root, f.moduleId).split(path.sep).join('/');
    const durations = durationsOf(root, files.map(rel));
    const weight = (f: TestSpecification) => durations.get(rel(f)) ?? Number.POSITIVE_INFINITY;
    return [...files].sort((a, b) => weight(b) - weight(a) || (a.moduleId < b.moduleId ? -1 : 1));
  }
}
