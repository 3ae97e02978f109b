// One owner per data folder. The lock is SQLite's own exclusive lock on a small database of its own (`owner.lock`),
// held by a connection in locking_mode=EXCLUSIVE for as long as the process lives. SQLite takes it with fcntl(), so
// the kernel drops it the moment the process ends, kill -9 included, and it holds across PID namespaces (inside the
// sandbox every agent server is PID 1, so comparing PIDs can never tell two owners apart). Chosen over an mtime
// lease (proper-lockfile: a paused or killed owner keeps the folder until the lease runs out) and over a native
// flock addon (fs-ext: one more compiled dependency) because better-sqlite3 is already here.
//
// A shared hold is the same lock's shared form (a read kept open): any number of shared holders together (replicas
// of `agentplane control-plane` on one store), but never beside an exclusive one.
//
// The lock database cannot be read while it is held, so who holds it is written beside it (owner.json), for the
// one-line error a second process prints.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';

export const LOCK_FILE = 'owner.lock';
export const OWNER_FILE = 'owner.json';

/** What a holder says about itself, for the error another process prints. */
export type DataDirOwner = {
  /** The command that holds it: "agentplane dev", "agentplane agent-server". */
  command: string;
  pid: number;
  startedAt: string;
  /** Where it answers, when it says. */
  url?: string;
};

export class DataDirInUseError extends Error {
  constructor(
    readonly dir: string,
    readonly owner: DataDirOwner | undefined,
  ) {
    super(`data folder ${dir} is in use by ${describeOwner(owner)}: stop that process or pass another --data-dir`);
    this.name = 'DataDirInUseError';
  }
}

export type DataDirLock = {
  readonly dir: string;
  /** Adds to what other processes are told about the holder (the URL once it listens). */
  describe(extra: Partial<DataDirOwner>): void;
  release(): void;
};

/**
 * Takes the folder's lock or throws DataDirInUseError at once (never waits: a second platform should be told, not
 * queued). The lock is the process's until release() or its end.
 */
export function lockDataDir(dir: string, command: string, opts: { shared?: boolean } = {}): DataDirLock {
  const db = takeLock(dir, opts.shared ?? false);
  let owner: DataDirOwner = { command, pid: process.pid, startedAt: new Date().toISOString() };
  const write = () => {
    const tmp = join(dir, `.${OWNER_FILE}.${process.pid}`);
    writeFileSync(tmp, `${JSON.stringify(owner)}\n`);
    renameSync(tmp, join(dir, OWNER_FILE));
  };
  write();
  let released = false;
  return {
    dir,
    describe(extra) {
      if (released) return;
      owner = { ...owner, ...extra };
      write();
    },
    release() {
      if (released) return;
      released = true;
      db.close();
    },
  };
}

function takeLock(dir: string, shared: boolean): Database.Database {
  mkdirSync(dir, { recursive: true });
  const db = new Database(join(dir, LOCK_FILE));
  try {
    db.pragma('busy_timeout = 0');
    db.pragma('locking_mode = EXCLUSIVE');
    // In exclusive locking mode the lock a transaction takes is kept after it ends, until the connection closes:
    // a read keeps a shared lock, a write an exclusive one.
    if (shared) db.prepare('SELECT count(*) FROM sqlite_master').get();
    else db.exec('BEGIN EXCLUSIVE; COMMIT');
    return db;
  } catch (err) {
    db.close();
    if ((err as { code?: string }).code === 'SQLITE_BUSY') throw new DataDirInUseError(dir, readOwner(dir));
    throw err;
  }
}

/** Whether some process holds the folder's lock now (for commands that must not run beside a platform). */
export function dataDirOwner(dir: string): { held: false } | { held: true; owner: DataDirOwner | undefined } {
  try {
    takeLock(dir, false).close();
    return { held: false };
  } catch (err) {
    if (err instanceof DataDirInUseError) return { held: true, owner: err.owner };
    throw err;
  }
}

function readOwner(dir: string): DataDirOwner | undefined {
  try {
    const o = JSON.parse(readFileSync(join(dir, OWNER_FILE), 'utf8')) as DataDirOwner;
    return typeof o.command === 'string' && typeof o.pid === 'number' ? o : undefined;
  } catch {
    return undefined;
  }
}

function describeOwner(o: DataDirOwner | undefined): string {
  if (!o) return 'another process';
  const url = o.url ? ` at ${o.url}` : '';
  // Inside the sandbox an agent server is PID 1 of its own namespace: say so rather than name this machine's init.
  const pid = o.pid === 1 ? 'pid 1 in its sandbox' : `pid ${o.pid}`;
  return `${o.command} (${pid}${url}, started ${o.startedAt})`;
}
