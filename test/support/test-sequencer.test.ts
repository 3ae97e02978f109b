// The suite's own scheduling: longest files first from the committed durations list, unknown files before them.
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { TestSpecification, Vitest } from 'vitest/node';
import { DURATIONS_FILE } from './durations.ts';
import LongestFirstSequencer from './sequencer.ts';

const dirs: string[] = [];
afterAll(async () => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

async function sequencerWith(durations: Record<string, number> | null) {
  const root = await mkdtemp(path.join(os.tmpdir(), 'ap-seq-'));
  dirs.push(root);
  if (durations) {
    await mkdir(path.dirname(path.join(root, DURATIONS_FILE)), { recursive: true });
    await writeFile(path.join(root, DURATIONS_FILE), JSON.stringify(durations));
  }
  const seq = new LongestFirstSequencer({ config: { root } } as unknown as Vitest);
  const spec = (rel: string) => ({ moduleId: path.join(root, rel) }) as unknown as TestSpecification;
  const order = async (rels: string[]) =>
    (await seq.sort(rels.map(spec))).map((s) => path.relative(root, s.moduleId).split(path.sep).join('/'));
  return order;
}

describe('test sequencer', () => {
  it('starts the longest known files first and files it has no record of before them', async () => {
    const order = await sequencerWith({ 'test/a.test.ts': 2, 'test/b.test.ts': 90, 'test/c.test.ts': 15 });
    expect(await order(['test/a.test.ts', 'test/c.test.ts', 'test/new.test.ts', 'test/b.test.ts'])).toEqual([
      'test/new.test.ts',
      'test/b.test.ts',
      'test/c.test.ts',
      'test/a.test.ts',
    ]);
  });

  it('knows a file moved since the last recording by its name, unless the name is ambiguous', async () => {
    // test/old/moved.test.ts and both twin.test.ts records are of files no longer on disk.
    const order = await sequencerWith({
      'test/old/moved.test.ts': 50,
      'test/a.test.ts': 10,
      'test/one/twin.test.ts': 90,
      'test/two/twin.test.ts': 80,
    });
    expect(await order(['test/a.test.ts', 'test/new/moved.test.ts', 'test/three/twin.test.ts'])).toEqual([
      'test/three/twin.test.ts',
      'test/new/moved.test.ts',
      'test/a.test.ts',
    ]);
  });

  it('without a list keeps a stable (path) order', async () => {
    const order = await sequencerWith(null);
    expect(await order(['test/z.test.ts', 'test/a.test.ts'])).toEqual(['test/a.test.ts', 'test/z.test.ts']);
  });
});
