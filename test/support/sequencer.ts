// Test files start longest first (from test/support/durations.json), so that with two workers the long files do
// not end up last, alone, while the other worker is idle. vitest orders by its own cache of earlier runs, which a
// fresh clone (CI) does not have: there it would start files in discovery order. Files missing from the list
// (new ones) start first, as vitest does with files it has no record of. Refresh the list with
// `npm run test:durations` after adding or reshaping slow tests.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** Where the list lives, relative to the project root (the reporter writes it there too). */
export const DURATIONS_FILE = 'test/support/durations.json';

function knownDurations(root: string): Record<string, number> {
  try {
    return JSON.parse(readFileSync(path.join(root, DURATIONS_FILE), 'utf8')) as Record<string, number>;
  } catch {
    return {};
  }
}

export default class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const durations = knownDurations(root);
    const weight = (f: TestSpecification) =>
      durations[path.relative(root, f.moduleId).split(path.sep).join('/')] ?? Number.POSITIVE_INFINITY;
    return [...files].sort((a, b) => weight(b) - weight(a) || (a.moduleId < b.moduleId ? -1 : 1));
  }
}
