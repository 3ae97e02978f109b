// A build's install step for a project with a lock file: npm ci, or node_modules linked from this deployment's
// cached install of the same package.json and lock (hard links, as pnpm's store does), published to that cache after
// a fresh install.
import { existsSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { chmod, mkdir, readFile, rename, rm, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { isRealDir, resetCacheDir, type BuildContext, type Confined } from './build-context.ts';
import { childEnv } from './env.ts';
import { runStep as runStepIn } from './exec.ts';
import { ownerFile } from './housekeeping.ts';
import { tool } from './tools.ts';

function installKey(deploymentId: string, pkg: Buffer, lock: Buffer): string {
  return createHash('sha256')
    .update(deploymentId)
    .update('\0')
    .update(pkg)
    .update('\0')
    .update(lock)
    .update(`\0${process.version}\0${process.platform}\0${process.arch}`)
    .digest('hex')
    .slice(0, 32);
}

/** npm ci, or node_modules linked from this deployment's cached install. Returns node_modules when shared. */
export async function npmCi(
  deploymentId: string,
  cwd: string,
  ctx: BuildContext,
  confined: Confined,
): Promise<string | undefined> {
  const { cache, log, signal } = ctx;
  const args = ['ci', '--prefer-offline', '--no-audit', '--no-fund'];
  const nodeModules = join(cwd, 'node_modules');
  // package.json is part of the key: npm ci refuses a lock file that disagrees with it, and so must we.
  const key = cache
    ? installKey(
        deploymentId,
        await readFile(join(cwd, 'package.json')),
        await readFile(join(cwd, 'package-lock.json')),
      )
    : '';
  const cached = cache ? join(cache.dir, key) : '';
  const own = (label: string, a: string[]) =>
    runStepIn(
      {
        label,
        command: tool('cp') ?? 'cp',
        args: a,
        cwd,
        env: childEnv({ base: ctx.baseEnv, home: ctx.home, npmCache: '' }),
      },
      log,
      signal,
    );
  if (cache && existsSync(cached)) {
    // Whatever the repository put there (a symlink could send cp elsewhere) goes first.
    await rm(nodeModules, { recursive: true, force: true });
    await own(
      `npm ci skipped: node_modules linked from the install cache (same package.json and lock, ${key.slice(0, 12)})`,
      ['-al', cached, nodeModules],
    );
    const now = new Date();
    await utimes(cached, now, now).catch(() => undefined); // least recently used goes first
    await resetCacheDir(nodeModules);
    return nodeModules;
  }
  await confined({ label: `npm ${args.join(' ')}`, command: tool('npm') ?? 'npm', args, cwd });
  // Install scripts ran in there: publish only a real folder, never a link they made.
  if (!cache || !(await isRealDir(nodeModules))) return undefined;
  // Publish atomically: a half-copied tree must never be found by another build.
  await mkdir(cache.dir, { recursive: true });
  await chmod(cache.dir, 0o700).catch(() => undefined);
  const tmp = `${cached}.tmp-${process.pid}-${Date.now()}`;
  try {
    await resetCacheDir(nodeModules);
    await own('cp -al node_modules (install cache)', ['-al', nodeModules, tmp]);
    // Its owner first: an entry is never found without it (deleting the deployment removes its entries).
    await writeFile(ownerFile(cached), deploymentId);
    await rename(tmp, cached);
    await cache.onPublished?.(cached);
    return nodeModules;
  } catch {
    await rm(tmp, { recursive: true, force: true });
    return undefined;
  }
}
