// System programs some test files need beyond Node and npm (an OpenSSH server, Chromium, bubblewrap, Redis).
// `.ci/run` installs them all. Elsewhere a file whose program is missing skips its tests with one line naming the
// Debian package to install, and the closing summary counts them (summary-reporter.ts groups them by that note);
// with CI set, a missing program fails the file instead: CI must never go green by skipping.
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { beforeEach } from 'vitest';

export type SystemTool = 'sshd' | 'chromium' | 'bwrap' | 'redis-server';

/** Where each program is looked for (an absolute path, or a name searched on PATH) and the package that has it. */
const TOOLS: Record<SystemTool, { program: string; pkg: string }> = {
  sshd: { program: '/usr/sbin/sshd', pkg: 'openssh-server' },
  chromium: { program: process.env.AGENTPLANE_CHROMIUM ?? '/usr/bin/chromium', pkg: 'chromium' },
  bwrap: { program: 'bwrap', pkg: 'bubblewrap' },
  'redis-server': { program: 'redis-server', pkg: 'redis-server' },
};

/** The note a skipped test carries; the summary reporter groups skipped tests by it. */
export const MISSING_TOOL_NOTE = 'missing system tool';

function executable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The program's path when it is installed, else undefined. */
export function findTool(tool: SystemTool): string | undefined {
  const { program } = TOOLS[tool];
  if (program.includes('/')) return executable(program) ? program : undefined;
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir && executable(join(dir, program))) return join(dir, program);
  }
  return undefined;
}

/** One line saying what is missing and how to get it. */
export function missingToolMessage(tool: SystemTool): string {
  const { program, pkg } = TOOLS[tool];
  return `${MISSING_TOOL_NOTE}: ${program} (apt-get install ${pkg})`;
}

/**
 * Whether `tool` is installed, for tests that skip some cases without it (`describe.runIf(hasTool(...))`). When it is
 * not: with CI set, throws, so the file fails; otherwise prints one line naming `what` is skipped and returns false.
 */
export function hasTool(tool: SystemTool, what: string): boolean {
  if (findTool(tool)) return true;
  const message = missingToolMessage(tool);
  if (process.env.CI) throw new Error(`${message}: CI installs every tool the tests use (.ci/run)`);
  process.stderr.write(`skipped ${what}: ${message}\n`);
  return false;
}

/**
 * Call at the top of a test file (or of the describe that needs `tool`). Returns true when it is installed. When it is
 * not: with CI set, throws, so the file fails; otherwise prints one line and skips every test of the file (or of that
 * describe) with that line as its note, and returns false, so a beforeAll can return at once.
 */
export function needsTool(tool: SystemTool, what: string): boolean {
  if (hasTool(tool, what)) return true;
  const message = missingToolMessage(tool);
  beforeEach((ctx) => ctx.skip(message));
  return false;
}

/** For helpers that find out lazily (Redis): throws with CI set, else returns the message to skip with. */
export function toolMissing(tool: SystemTool): string {
  const message = missingToolMessage(tool);
  if (process.env.CI) throw new Error(`${message}: CI installs every tool the tests use (.ci/run)`);
  return message;
}
