// The platform's own folders and files (the store, its key, builds, agents' data) are readable by the platform's
// user only: on a shared machine another account must not read API key hashes, sealed secrets or a deployment's
// data. Those made by older releases with the default umask (0755, 0644) are tightened when they are opened.
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, statSync } from 'node:fs';

/** Makes `dir` (and missing parents) mode 0700, and takes group and other access away from it if it had any. */
export function privateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  ownerOnly(dir);
}

/**
 * Makes `file` if missing, mode 0600 before anything is written to it, and takes group and other access away from
 * it and from the `companions` that exist (files kept beside it; SQLite makes its -wal and -shm files with the
 * database's mode).
 */
export function privateFile(file: string, companions: string[] = []): void {
  closeSync(openSync(file, 'a', 0o600));
  for (const path of [file, ...companions]) if (existsSync(path)) ownerOnly(path);
}

function ownerOnly(path: string): void {
  const mode = statSync(path).mode;
  if (mode & 0o077) chmodSync(path, mode & 0o700);
}
