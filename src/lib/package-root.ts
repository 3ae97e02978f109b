// agentplane's own package folder, found from this module's location by walking up to its package.json. Files
// that ship next to the sources (the executor thread's entry, the sandbox helpers, the console build) are addressed
// from here, so the same code works from src/ (through tsx) and from the prebuilt bundle in dist/cli/.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function findPackageRoot(start: string): string {
  for (let dir = start; ; dir = dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string };
      if (pkg.name === 'agentplane') return dir;
    } catch {
      // no package.json here
    }
    if (dirname(dir) === dir) throw new Error(`agentplane's package.json not found above ${start}`);
  }
}

export const PACKAGE_ROOT = findPackageRoot(dirname(fileURLToPath(import.meta.url)));

/** A file of the package, by its path from the package root (e.g. "src/operator/runtimes/local/step-guard.mjs"). */
export function packagePath(relative: string): string {
  return join(PACKAGE_ROOT, relative);
}
