// The web console's bundle (dist/console), built from this checkout's console/ sources when it is missing or older
// than one of them. npm ci builds it ("prepare"), so a CI run rebuilds nothing: vite empties the folder before it
// writes, and other test files may be serving the console from it at that moment.
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** The newest modification time (ms) of the files under `dir`. */
function newestFile(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) newest = Math.max(newest, statSync(join(entry.parentPath, entry.name)).mtimeMs);
  }
  return newest;
}

/** Builds dist/console under `root` unless it is newer than every file of console/. Returns whether it built. */
export function ensureConsoleBundle(root: string): boolean {
  const built = statSync(join(root, 'dist/console/index.html'), { throwIfNoEntry: false })?.mtimeMs;
  if (built !== undefined && built >= newestFile(join(root, 'console'))) return false;
  execFileSync(process.execPath, [join(root, 'console/build.mjs')], { cwd: root, stdio: 'pipe' });
  return true;
}
