// The layout of a revision's build folder and what a build's steps may touch, shared by the build's steps
// (build-steps.ts, build-fetch.ts, build-install.ts) and the servers that run the result (servers.ts).
import { existsSync } from 'node:fs';
import { lstat, mkdir, realpath, rm } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, sep } from 'node:path';
import type { GitCredential } from '../../../git/credentials.ts';
import type { RepoPolicy } from '../../../git/repo-url.ts';
import type { Step } from './exec.ts';
import type { LogWriter } from './logs.ts';
import type { Mounts, Sandbox } from './sandbox.ts';

/**
 * Installed node_modules keyed by deployment + package.json + lock file: a revision whose dependencies did not
 * change links the packages of an earlier install (hard links, as pnpm's store does) instead of running npm ci
 * again. Entries are never shared between deployments: install scripts, .npmrc and file: dependencies are not part
 * of the key, so one workspace's install must not become another's node_modules.
 */
export type InstallCache = { dir: string; maxBytes: number; onPublished?: (entry: string) => Promise<void> };

/** Where a build's steps run and what they may touch. */
export type BuildContext = {
  /** The revision's folder (cleared first). */
  dir: string;
  /** The deployment's home folder (HOME, npm cache). */
  home: string;
  log: LogWriter;
  signal: AbortSignal;
  sandbox: Sandbox;
  repoPolicy: RepoPolicy;
  /** The dev process's environment, read through the allow-list only. */
  baseEnv: NodeJS.ProcessEnv;
  cache?: InstallCache;
  maxStepOutputBytes?: number;
  /** The deployment's git credential; handed to git only for its host. */
  credential?: GitCredential;
  /** Where the workspace's stored source tarball with this SHA-256 is (internal_source builds). */
  archiveFile?: (sha256: string) => string | undefined;
  /**
   * The environment (secrets) the revision's server will get: with it the graphs are imported at build time
   * (importGraphs); without it (a build asked for without its revision) only the static check runs.
   */
  serverEnv?: Record<string, string>;
};

/** A step of the build run confined as every build step is: the sandbox, the build's environment and pid file. */
export type Confined = (
  step: Omit<Step, 'env' | 'sandbox' | 'mounts' | 'pidFile'> & {
    env?: Record<string, string>;
    mounts?: Omit<Mounts, 'cwd'>;
  },
) => Promise<string>;

/** The directory the agent server and the install run in: the graph config's folder when it is a package. */
export function projectDir(checkout: string, graphConfigPath: string): string {
  const configDir = dirname(join(checkout, graphConfigPath));
  return existsSync(join(configDir, 'package.json')) ? configDir : checkout;
}

export function checkoutDir(dir: string): string {
  return join(dir, 'src');
}

/** True when `path` resolves (symlinks followed) inside the real path of `root`. */
export async function insideReal(path: string, root: string): Promise<boolean> {
  const [p, r] = await Promise.all([realpath(path).catch(() => ''), realpath(root).catch(() => '')]);
  if (!p || !r) return false;
  const rel = relative(r, p);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
}

/** A real folder, not a symlink to one (paths a workspace could have replaced are checked before the runtime uses them). */
export async function isRealDir(path: string): Promise<boolean> {
  const st = await lstat(path).catch(() => undefined);
  return !!st && st.isDirectory() && !st.isSymbolicLink();
}

/** Makes node_modules/.cache an empty real folder (it becomes a writable mount point over read-only node_modules). */
export async function resetCacheDir(nodeModules: string): Promise<void> {
  const cacheDir = join(nodeModules, '.cache');
  if (!(await isRealDir(cacheDir))) await rm(cacheDir, { recursive: true, force: true });
  await mkdir(cacheDir, { recursive: true });
}

/**
 * What a build_command or an agent server may touch: its checkout and the deployment's home, writable;
 * node_modules that share files with the install cache, read-only (a write would change every revision linked to
 * them), with an empty writable node_modules/.cache for the tools that keep caches there.
 */
export function revisionMounts(
  checkout: string,
  home: string,
  sharedNodeModules?: string,
  extraRw: string[] = [],
): Omit<Mounts, 'cwd'> {
  return {
    rw: [checkout, home, ...extraRw],
    ...(sharedNodeModules ? { roOver: [sharedNodeModules], tmpfs: [join(sharedNodeModules, '.cache')] } : {}),
  };
}
