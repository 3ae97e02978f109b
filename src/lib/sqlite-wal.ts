// Switching a SQLite file to write-ahead logging while other processes may be opening or migrating it at the same
// moment. The switch needs the file's exclusive lock, and SQLite answers SQLITE_BUSY at once, without calling the
// busy handler, when another connection holds the write lock (a migration's IMMEDIATE transaction, another process's
// own switch): busy_timeout does not cover it. So the switch is retried here, with short pauses, until a deadline.
import type Database from 'better-sqlite3';

const pauses = new Int32Array(new SharedArrayBuffer(4));
const isBusy = (err: unknown) => String((err as { code?: unknown }).code ?? '').startsWith('SQLITE_BUSY');

/**
 * Puts `db` in WAL mode (a no-op when the file already is, or for ':memory:'), waiting up to `timeoutMs` for a lock
 * another connection holds. Synchronous, as opening a better-sqlite3 database is: it runs once per open.
 */
export function enableWal(db: Database.Database, timeoutMs = 5000): void {
  const deadline = Date.now() + timeoutMs;
  for (let pause = 5; ; pause = Math.min(pause * 2, 100)) {
    try {
      db.pragma('journal_mode = WAL');
      return;
    } catch (err) {
      if (!isBusy(err)) throw err;
      if (Date.now() + pause > deadline) {
        throw Object.assign(
          new Error(
            `${db.name}: could not switch to WAL mode, another connection kept the file locked for ${timeoutMs} ms`,
            { cause: err },
          ),
          { code: (err as { code: string }).code },
        );
      }
      Atomics.wait(pauses, 0, 0, pause);
    }
  }
}
