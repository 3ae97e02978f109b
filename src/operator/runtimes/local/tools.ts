// The programs the local runtime starts by name (its launch chain: sh, setpriv, bwrap; build steps: git, npm, cp;
// chown for the sandbox user's folders),
// found once in the PATH this process was started with and then always started by absolute path. spawn() looks a
// bare name up in the PATH of the environment it is given, and that environment may hold a deployment's secrets:
// a secret PATH leading to the workspace's own `bwrap` would otherwise run it outside the sandbox, as us.
import { accessSync, constants, statSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';

export type ToolName = 'sh' | 'setpriv' | 'bwrap' | 'git' | 'npm' | 'cp' | 'tar' | 'chown';

/** The first executable file `name` in the absolute folders of `pathVar` ('' and relative entries are skipped). */
export function findInPath(name: string, pathVar: string | undefined): string | undefined {
  for (const dir of (pathVar ?? '').split(':')) {
    if (!isAbsolute(dir)) continue;
    const file = join(dir, name);
    try {
      if (!statSync(file).isFile()) continue;
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** The platform's own search path, as this process was started (never a child's environment). */
const PLATFORM_PATH = process.env.PATH || '/usr/local/bin:/usr/bin:/bin';
const found = new Map<ToolName, string | undefined>();

/** Absolute path of one of the runtime's programs, or undefined when the platform's PATH has none. */
export function tool(name: ToolName): string | undefined {
  if (!found.has(name)) found.set(name, findInPath(name, PLATFORM_PATH));
  return found.get(name);
}

/** Like tool(), for programs every system has at a fixed place when PATH lacks them. */
export function shell(): string {
  return tool('sh') ?? '/bin/sh';
}
