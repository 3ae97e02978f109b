// Bounds on disk use: old revisions' build folders and the install cache. The choices are pure functions with
// table tests; the I/O around them is small.
import { execFile } from 'node:child_process';
import { readdir, rm, stat, writeFile, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

export type BuiltRevision = { revision: string; builtAt: number };

/**
 * Build folders to remove: all but the `keep` most recently built, never a protected one (routed, serving,
 * building, or the newest revision).
 */
export function buildsToRemove(builds: BuiltRevision[], keep: number, protectedRevisions: Set<string>): string[] {
  const newestFirst = [...builds].sort((a, b) => b.builtAt - a.builtAt || b.revision.localeCompare(a.revision));
  return newestFirst
    .slice(Math.max(keep, 0))
    .map((b) => b.revision)
    .filter((r) => !protectedRevisions.has(r));
}

export type CacheEntry = { name: string; bytes: number; usedAt: number };

/** Install cache entries to evict, least recently used first, until the rest fits in `maxBytes`; never `keep`. */
export function cacheEvictions(entries: CacheEntry[], maxBytes: number, keep?: string): string[] {
  let total = entries.reduce((n, e) => n + e.bytes, 0);
  const out: string[] = [];
  for (const e of [...entries].sort((a, b) => a.usedAt - b.usedAt)) {
    if (total <= maxBytes) break;
    if (e.name === keep) continue;
    out.push(e.name);
    total -= e.bytes;
  }
  return out;
}

const run = promisify(execFile);

/** Disk use of a folder in bytes (du counts each hard-linked file once per call). */
async function diskUse(path: string): Promise<number> {
  const { stdout } = await run('du', ['-sk', path], { timeout: 120_000 });
  return Number(stdout.split(/\s/)[0]) * 1024;
}

/** Records a fresh entry's size (measured once) and evicts least recently used entries beyond `maxBytes`. */
export async function trimInstallCache(dir: string, fresh: string, maxBytes: number): Promise<string[]> {
  await writeFile(`${fresh}.size`, String(await diskUse(fresh)));
  const names = (await readdir(dir)).filter((n) => /^[0-9a-f]{32}$/.test(n));
  const entries: CacheEntry[] = [];
  for (const name of names) {
    const path = join(dir, name);
    const bytes =
      Number(await readFile(`${path}.size`, 'utf8').catch(() => '')) || (await diskUse(path).catch(() => 0));
    const usedAt = (await stat(path).catch(() => undefined))?.mtimeMs ?? 0;
    entries.push({ name, bytes, usedAt });
  }
  const evict = cacheEvictions(entries, maxBytes, fresh.split('/').pop());
  for (const name of evict) {
    await rm(join(dir, name), { recursive: true, force: true });
    await rm(join(dir, `${name}.size`), { force: true });
    await rm(ownerFile(join(dir, name)), { force: true });
  }
  return evict;
}

/** The file beside a cache entry that names the deployment it was installed for (entries are never shared). */
export const ownerFile = (entry: string) => `${entry}.owner`;

/**
 * Removes the install cache entries of `deploymentId`, and those of any other deployment `isLive` says is gone
 * (one deleted while this process was down). Entries from before owners were recorded are left to the size trim.
 */
export async function removeInstallCacheOf(
  dir: string,
  deploymentId: string,
  isLive: (deploymentId: string) => boolean,
): Promise<string[]> {
  const names = await readdir(dir).catch(() => [] as string[]);
  const removed: string[] = [];
  for (const name of names.filter((n) => /^[0-9a-f]{32}$/.test(n))) {
    const path = join(dir, name);
    const owner = (await readFile(ownerFile(path), 'utf8').catch(() => '')).trim();
    if (!owner || (owner !== deploymentId && isLive(owner))) continue;
    await rm(path, { recursive: true, force: true });
    await rm(`${path}.size`, { force: true });
    await rm(ownerFile(path), { force: true });
    removed.push(name);
  }
  return removed;
}
