// The committed list of each test file's duration in the last recorded full run (test/support/durations.json),
// which orders the suite (sequencer.ts) and picks the quick tier (scripts/test-quick.ts). It is keyed by path, so a
// file moved since the last recording would be unknown until the next one: a record whose file is gone is read as
// the record of the one file that now has its name and no record of its own (a `git mv` keeps the name).
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** Where the list lives, relative to the project root (the reporter writes it there too). */
export const DURATIONS_FILE = 'test/support/durations.json';

function readDurations(root: string): Record<string, number> {
  try {
    return JSON.parse(readFileSync(path.join(root, DURATIONS_FILE), 'utf8')) as Record<string, number>;
  } catch {
    return {};
  }
}

/**
 * The recorded seconds of each of `files` (paths relative to the root, '/'-separated) that has a record: its own, or
 * that of a file no longer on disk when exactly one such record and one unrecorded file of `files` share the name.
 */
export function durationsOf(root: string, files: readonly string[]): Map<string, number> {
  const durations = readDurations(root);
  const found = new Map<string, number>();
  const present = new Set(files);
  const unrecorded = new Map<string, string[]>();
  for (const f of files) {
    const own = durations[f];
    if (own !== undefined) found.set(f, own);
    else unrecorded.set(path.posix.basename(f), [...(unrecorded.get(path.posix.basename(f)) ?? []), f]);
  }
  const vanished = new Map<string, number[]>();
  for (const [f, secs] of Object.entries(durations)) {
    if (present.has(f) || !unrecorded.has(path.posix.basename(f)) || existsSync(path.join(root, f))) continue;
    vanished.set(path.posix.basename(f), [...(vanished.get(path.posix.basename(f)) ?? []), secs]);
  }
  for (const [name, secs] of vanished) {
    const heirs = unrecorded.get(name)!;
    if (secs.length === 1 && heirs.length === 1) found.set(heirs[0]!, secs[0]!);
  }
  return found;
}
