// Backup and restore of one machine's data folder (`agentplane dev`). What a restore needs and nothing more: every
// SQLite database through SQLite's online backup API (a consistent copy while the platform runs and writes), the
// secret key beside the store, and the ports file so every deployment keeps its URL. Checkouts, builds and the
// install cache are left out: the operator builds a serving revision again from the commit its status records.
//
// A backup is complete once its manifest is written, last; a restore reads only what the manifest lists and copies
// into a data folder nobody holds (the folder's lock, src/lib/data-dir-lock.ts), holding it itself meanwhile.
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import Database from 'better-sqlite3';
import { dataDirOwner, lockDataDir } from '../lib/data-dir-lock.ts';

export const MANIFEST = 'agentplane-backup.json';
const FORMAT = 1;

type Entry = { path: string; kind: 'sqlite' | 'file'; mode?: number };
export type Manifest = { format: number; createdAt: string; files: Entry[] };

/** Something the user can fix (a folder not empty, no backup there, a platform running): said in one line. */
export class BackupError extends Error {}

/** The SQLite databases of a data folder and the small files a restore needs, relative to it. */
function contents(dataDir: string): Entry[] {
  const entries: Entry[] = [];
  const add = (rel: string, kind: Entry['kind'], mode?: number) => {
    if (existsSync(join(dataDir, rel))) entries.push({ path: rel, kind, ...(mode ? { mode } : {}) });
  };
  add(join('control-plane', 'control-plane.db'), 'sqlite');
  add(join('control-plane', 'secret.key'), 'file', 0o600);
  add(join('control-plane', 'secret.key.old'), 'file', 0o600);
  add(join('runtime', 'agent-ports.json'), 'file');
  const deployments = join(dataDir, 'runtime', 'deployments');
  for (const id of existsSync(deployments) ? readdirSync(deployments).sort() : []) {
    const data = join('runtime', 'deployments', id, 'data');
    if (!existsSync(join(dataDir, data))) continue;
    for (const name of readdirSync(join(dataDir, data)).sort()) {
      // The database files themselves: the backup API folds -wal in; owner.lock is the folder's lock, not data.
      if (name.endsWith('.sqlite') || name.endsWith('.db')) add(join(data, name), 'sqlite');
    }
  }
  return entries;
}

export async function backup(dataDir: string, to: string): Promise<Manifest> {
  if (!existsSync(join(dataDir, 'control-plane', 'control-plane.db'))) {
    throw new BackupError(`no platform data in ${dataDir} (no control-plane/control-plane.db): pass its --data-dir`);
  }
  if (existsSync(to) && readdirSync(to).length > 0) {
    throw new BackupError(`${to} is not empty: back up into a new or empty folder`);
  }
  const files = contents(dataDir);
  for (const entry of files) {
    const target = join(to, entry.path);
    mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
    if (entry.kind === 'sqlite') {
      // Read-only beside the running platform; the backup API copies a consistent snapshot, WAL included.
      const db = new Database(join(dataDir, entry.path), { readonly: true, fileMustExist: true });
      try {
        await db.backup(target);
      } finally {
        db.close();
      }
      chmodSync(target, 0o600);
    } else {
      copyFileSync(join(dataDir, entry.path), target);
      chmodSync(target, entry.mode ?? 0o644);
    }
  }
  const manifest: Manifest = { format: FORMAT, createdAt: new Date().toISOString(), files };
  writeFileSync(join(to, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o600 });
  return manifest;
}

export function restore(from: string, dataDir: string): Manifest {
  const manifest = readManifest(from);
  const held = dataDirOwner(dataDir);
  if (held.held) {
    const who = held.owner ? `${held.owner.command} (pid ${held.owner.pid})` : 'another process';
    throw new BackupError(`${dataDir} is in use by ${who}: stop the platform before restoring into its data folder`);
  }
  if (existsSync(join(dataDir, 'control-plane', 'control-plane.db'))) {
    throw new BackupError(
      `${dataDir} already holds a platform (control-plane/control-plane.db): restore into a new or empty --data-dir`,
    );
  }
  // Held while copying, so a platform started meanwhile is refused rather than opening half a restore.
  const lock = lockDataDir(dataDir, 'agentplane restore');
  try {
    for (const entry of manifest.files) {
      const target = join(dataDir, entry.path);
      mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
      copyFileSync(join(from, entry.path), target);
      chmodSync(target, entry.kind === 'sqlite' ? 0o600 : (entry.mode ?? 0o644));
    }
  } finally {
    lock.release();
  }
  return manifest;
}

function readManifest(from: string): Manifest {
  let manifest: Manifest;
  try {
    manifest = JSON.parse(readFileSync(join(from, MANIFEST), 'utf8')) as Manifest;
  } catch {
    throw new BackupError(
      `${from} holds no complete backup (no readable ${MANIFEST}; it is written last, by agentplane backup)`,
    );
  }
  if (manifest.format !== FORMAT || !Array.isArray(manifest.files)) {
    throw new BackupError(`${join(from, MANIFEST)} is not a backup this version reads (format ${manifest.format})`);
  }
  for (const entry of manifest.files) {
    // The manifest is input: a path leading out of the backup or the data folder is refused, not followed.
    const rel = relative('.', entry.path);
    if (typeof entry.path !== 'string' || rel !== entry.path || rel.startsWith(`..${sep}`) || rel === '..') {
      throw new BackupError(`${join(from, MANIFEST)} lists a path outside the backup: ${String(entry.path)}`);
    }
  }
  for (const entry of manifest.files) {
    if (!existsSync(join(from, entry.path))) {
      throw new BackupError(`${from} is missing ${entry.path}, which its manifest lists`);
    }
  }
  return manifest;
}
