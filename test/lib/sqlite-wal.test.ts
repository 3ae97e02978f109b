// enableWal: the switch to WAL mode waits out another process's write lock, which SQLite's busy_timeout does not
// (it answers SQLITE_BUSY at once); a lock kept too long ends in an error that names the file.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { enableWal } from '../../src/lib/sqlite-wal.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const dirs: string[] = [];
const children: ChildProcess[] = [];

afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A file in rollback-journal mode with one table, as a store's first open finds it mid-migration. */
function freshFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'sqlite-wal-'));
  dirs.push(dir);
  const file = join(dir, 'state.db');
  const db = new Database(file);
  db.exec('CREATE TABLE t (x)');
  db.close();
  return file;
}

/**
 * Another process that takes the file's write lock (an IMMEDIATE transaction, as a migration does) and, once it
 * holds it, says "locked"; it commits once the file `release` exists (never without one).
 */
async function holdWriteLock(file: string, release = ''): Promise<ChildProcess> {
  const script = `
    const { existsSync } = require('node:fs');
    const Database = require('better-sqlite3');
    const db = new Database(process.argv[1]);
    db.exec('BEGIN IMMEDIATE');
    db.prepare('INSERT INTO t VALUES (1)').run();
    process.stdout.write('locked\\n');
    const release = process.argv[2];
    const poll = setInterval(() => {
      if (!release || !existsSync(release)) return;
      clearInterval(poll);
      db.exec('COMMIT');
      db.close();
    }, 10);
  `;
  const child = spawn(process.execPath, ['-e', script, file, release], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  await new Promise<void>((done, fail) => {
    child.stdout!.on('data', (d: Buffer) => String(d).includes('locked') && done());
    child.once('exit', (code) => fail(new Error(`the lock holder exited ${code} before taking the lock`)));
  });
  return child;
}

describe('enableWal', () => {
  it("waits for another process's write lock, where a plain PRAGMA journal_mode fails at once", async () => {
    const file = freshFile();
    const release = `${file}.release`;
    const holder = await holdWriteLock(file, release);
    const db = new Database(file);
    try {
      db.pragma('busy_timeout = 5000');
      // What the stores did before: SQLITE_BUSY without waiting, busy_timeout or not.
      expect(() => db.pragma('journal_mode = WAL')).toThrow(expect.objectContaining({ code: 'SQLITE_BUSY' }));
      // The holder commits a moment after this, while enableWal is already waiting.
      writeFileSync(release, '');
      enableWal(db, 30_000);
      expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
      // The holder's transaction was committed, not lost to the switch.
      expect(db.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: 1 });
    } finally {
      db.close();
    }
    const code = await new Promise((done) =>
      holder.exitCode !== null ? done(holder.exitCode) : holder.once('exit', done),
    );
    expect(code).toBe(0);
  });

  it('gives up after its timeout with an error that names the file and keeps SQLITE_BUSY as its code', async () => {
    const file = freshFile();
    await holdWriteLock(file);
    const db = new Database(file);
    try {
      let thrown: unknown;
      try {
        enableWal(db, 200);
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(Error);
      expect((thrown as Error).message).toContain(file);
      expect((thrown as Error).message).toMatch(/WAL mode.*locked/);
      expect((thrown as { code?: string }).code).toBe('SQLITE_BUSY');
      expect(db.pragma('journal_mode', { simple: true })).toBe('delete');
    } finally {
      db.close();
    }
  });

  it('is a no-op on a file already in WAL mode and on an in-memory database', () => {
    const file = freshFile();
    const first = new Database(file);
    enableWal(first);
    first.close();
    const again = new Database(file);
    enableWal(again);
    expect(again.pragma('journal_mode', { simple: true })).toBe('wal');
    again.close();
    const memory = new Database(':memory:');
    enableWal(memory);
    expect(memory.pragma('journal_mode', { simple: true })).toBe('memory');
    memory.close();
  });
});
