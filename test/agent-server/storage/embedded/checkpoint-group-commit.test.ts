// The embedded checkpointer commits the writes of one event-loop turn together; each write still resolves only
// once it is in the file, stores the same rows the package's SqliteSaver stores, and fails alone.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import { emptyCheckpoint, ERROR, type Checkpoint, type CheckpointMetadata } from '@langchain/langgraph-checkpoint';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkpointSaver } from '../../../../src/agent-server/storage/embedded/checkpoint-saver.ts';
import { openDatabase, statementCache } from '../../../../src/agent-server/storage/embedded/context.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'ap-group-commit-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

function open(name: string) {
  const db = openDatabase(path.join(dir, name));
  const saver = checkpointSaver(db, statementCache(db));
  saver.init();
  return { db, saver };
}

const checkpoint = (id: string, messages: unknown[]): Checkpoint => ({
  ...emptyCheckpoint(),
  id,
  ts: '2026-11-27T00:00:00.000Z',
  channel_values: { messages },
  channel_versions: { messages: messages.length },
});
const metadata = (step: number) => ({ source: 'loop', step, parents: {}, run_id: 'r1' }) as CheckpointMetadata;
const cfg = (thread: string, checkpointId?: string) => ({
  configurable: { thread_id: thread, checkpoint_ns: '', ...(checkpointId ? { checkpoint_id: checkpointId } : {}) },
});

describe('embedded checkpointer, group commit', () => {
  it('commits the writes of one turn together, and each is in the file when it resolves', async () => {
    const { saver } = open('a.sqlite');
    const threads = Array.from({ length: 30 }, (_, i) => `t${i}`);
    await Promise.all(
      threads.map(async (t) => {
        await saver.put(cfg(t), checkpoint(`${t}-1`, [new HumanMessage(`hi ${t}`)]), metadata(0));
        await saver.putWrites(cfg(t, `${t}-1`), [['messages', [new AIMessage(`yo ${t}`)]]], `task-${t}`);
      }),
    );
    expect(saver.commits.writes).toBe(60);
    expect(saver.commits.groups).toBeLessThan(10);
    // Another connection (as after a crash) finds every checkpoint and write.
    const other = new SqliteSaver(openDatabase(path.join(dir, 'a.sqlite')));
    for (const t of threads) {
      const tuple = await other.getTuple(cfg(t));
      expect(tuple?.checkpoint.id).toBe(`${t}-1`);
      expect(tuple?.pendingWrites).toEqual([
        [`task-${t}`, 'messages', [expect.objectContaining({ content: `yo ${t}` })]],
      ]);
    }
  });

  it('stores exactly the rows the package stores, conflict rules included', async () => {
    const ours = open('ours.sqlite');
    const pkgDb = openDatabase(path.join(dir, 'package.sqlite'));
    const theirs = new SqliteSaver(pkgDb);
    for (const saver of [ours.saver, theirs]) {
      await saver.put(cfg('t'), checkpoint('c1', [new HumanMessage({ content: 'q', id: 'm1' })]), metadata(0));
      await saver.put(cfg('t', 'c1'), checkpoint('c2', [new HumanMessage('q'), new AIMessage('a')]), metadata(1));
      await saver.put(cfg('t', 'c1'), checkpoint('c2', [new AIMessage('replaced')]), metadata(2));
      await saver.putWrites(
        cfg('t', 'c2'),
        [
          ['messages', ['first']],
          ['other', 1],
        ],
        'task',
      );
      await saver.putWrites(cfg('t', 'c2'), [['messages', ['ignored: the row exists']]], 'task');
      await saver.putWrites(cfg('t', 'c2'), [[ERROR, 'boom']], 'task2');
      await saver.putWrites(cfg('t', 'c2'), [[ERROR, 'replaced: special channels upsert']], 'task2');
    }
    const rows = (db: typeof pkgDb) => ({
      checkpoints: db.prepare('SELECT * FROM checkpoints ORDER BY checkpoint_id').all(),
      writes: db.prepare('SELECT * FROM writes ORDER BY checkpoint_id, task_id, idx').all(),
    });
    expect(rows(ours.db)).toEqual(rows(pkgDb));
    expect(rows(ours.db).writes).toHaveLength(3);
  });

  it('fails a write alone: the others of its group are committed', async () => {
    const { db, saver } = open('b.sqlite');
    db.exec(`CREATE TRIGGER refuse BEFORE INSERT ON checkpoints WHEN NEW.thread_id = 'bad'
      BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`);
    const results = await Promise.allSettled(
      ['g1', 'bad', 'g2', 'g3'].map((t) => saver.put(cfg(t), checkpoint(`${t}-1`, []), metadata(0))),
    );
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect(String((results[1] as PromiseRejectedResult).reason)).toContain('refused by the test');
    const stored = db.prepare('SELECT thread_id FROM checkpoints ORDER BY thread_id').all() as Array<{
      thread_id: string;
    }>;
    expect(stored.map((r) => r.thread_id)).toEqual(['g1', 'g2', 'g3']);
  });

  it('rejects every write of a group whose commit cannot happen', async () => {
    const { db, saver } = open('c.sqlite');
    const pending = Promise.allSettled(['x', 'y'].map((t) => saver.put(cfg(t), checkpoint(`${t}-1`, []), metadata(0))));
    db.close();
    const results = await pending;
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
  });
});
