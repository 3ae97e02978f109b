// How the local runtime confines what a workspace controls (build steps, agent servers): with bubblewrap each one
// gets its own PID namespace, a read-only view of the system and of agentplane itself, a private /tmp, and write
// access to its own revision only; the data dir, the control plane's store and other deployments are not there.
// `none` runs them as plain child processes: every workspace can then read everything the dev process can.
import { execFile } from 'node:child_process';
import { existsSync, lstatSync, readlinkSync, realpathSync } from 'node:fs';
import { dirname, join, resolve, sep } from 'node:path';
import { promisify } from 'node:util';
import { tool } from './tools.ts';

export type SandboxMode = 'auto' | 'bwrap' | 'none';

/** What one sandboxed process sees besides the system: each path appears at the same path inside. */
export type Mounts = {
  /** Read-only (e.g. a local repository to clone, the auth keys folder). */
  ro?: string[];
  /** Writable (the revision folder, the deployment's home and data). */
  rw?: string[];
  /** Read-only on top of a writable one (node_modules that may be hard links shared with other revisions). */
  roOver?: string[];
  /** Empty writable folders on top of everything (node_modules/.cache). */
  tmpfs?: string[];
  /** The working directory. */
  cwd: string;
};

/**
 * infoFd: where bwrap writes the confined process's pid; asPid1: the command is PID 1 inside; argsFd: a descriptor
 * bwrap reads more of its arguments from (NUL-separated), which is how an environment reaches the confined process
 * without passing through argv (readable by every user in /proc) or through the environment of the launch chain;
 * tmpSizeMb: the size of the private /tmp (a tmpfs is memory: unsized, it may take half the machine's).
 */
export type WrapOptions = { infoFd?: number; asPid1?: boolean; argsFd?: number; tmpSizeMb?: number };

export type Sandbox = {
  kind: 'bwrap' | 'none';
  /** The command line to spawn for `command args` confined to `mounts`. */
  wrap(command: string, args: string[], mounts: Mounts, opts?: WrapOptions): { command: string; args: string[] };
};

export type SandboxBase = {
  /** Never visible inside (replaced by an empty folder): the data dir root. */
  hidden: string[];
  /** agentplane's own package and its node_modules, and the Node install: read-only. */
  shared: string[];
};

export const NO_SANDBOX: Sandbox = { kind: 'none', wrap: (command, args) => ({ command, args }) };

const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32', '/etc'];

/** /bin -> usr/bin style links are recreated as links; real folders are bound read-only. */
function systemMounts(): string[] {
  const out: string[] = [];
  for (const dir of SYSTEM_DIRS) {
    let st: ReturnType<typeof lstatSync>;
    try {
      st = lstatSync(dir);
    } catch {
      continue;
    }
    if (st.isSymbolicLink()) out.push('--symlink', readlinkSync(dir), dir);
    else if (st.isDirectory()) out.push('--ro-bind', dir, dir);
  }
  return out;
}

function depth(path: string): number {
  return resolve(path).split(sep).filter(Boolean).length;
}

/**
 * bwrap's arguments, pure given the system mounts. Mounts are applied parents first, so a hidden data dir covers
 * what a shared tree exposed, and a revision folder inside it is bound again on top.
 */
export function bwrapArgs(base: SandboxBase, mounts: Mounts, system: string[], opts: WrapOptions = {}): string[] {
  type M = { path: string; args: string[] };
  const ordered: M[] = [
    ...base.shared.map((p) => ({ path: p, args: ['--ro-bind', p, p] })),
    ...(mounts.ro ?? []).map((p) => ({ path: p, args: ['--ro-bind', p, p] })),
    ...base.hidden.map((p) => ({ path: p, args: ['--tmpfs', p] })),
    ...(mounts.rw ?? []).map((p) => ({ path: p, args: ['--bind', p, p] })),
    ...(mounts.roOver ?? []).map((p) => ({ path: p, args: ['--ro-bind', p, p] })),
    ...(mounts.tmpfs ?? []).map((p) => ({ path: p, args: ['--tmpfs', p] })),
  ];
  // Stable: equal depths keep the order above (hidden before the writable folders beneath it).
  const sorted = ordered.map((m, i) => ({ m, i })).sort((a, b) => depth(a.m.path) - depth(b.m.path) || a.i - b.i);
  return [
    ...(opts.argsFd !== undefined ? ['--args', String(opts.argsFd)] : []),
    ...(opts.infoFd !== undefined ? ['--info-fd', String(opts.infoFd)] : []),
    '--unshare-all',
    '--share-net',
    ...(opts.asPid1 ? ['--as-pid-1'] : []),
    '--die-with-parent',
    '--new-session',
    '--cap-drop',
    'ALL',
    ...system,
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    ...(opts.tmpSizeMb ? ['--size', String(opts.tmpSizeMb * 1024 * 1024)] : []),
    '--tmpfs',
    '/tmp',
    ...sorted.flatMap(({ m }) => m.args),
    '--chdir',
    mounts.cwd,
    '--',
  ];
}

/**
 * What to write to bwrap's --args descriptor so that the confined process gets exactly `env`: bwrap itself keeps
 * the environment it was started with (the runtime's own), and applies these only to the process it starts.
 */
export function bwrapEnvArgs(env: Record<string, string>): Buffer {
  const args = ['--clearenv', ...Object.entries(env).flatMap(([name, value]) => ['--setenv', name, value])];
  return Buffer.from(args.map((a) => `${a}\0`).join(''));
}

/** `sizedTmp` false: this bwrap has no --size (before 0.6), and /tmp stays unsized (the watchdog still counts it). */
export function bwrapSandbox(base: SandboxBase, bwrap: string, sizedTmp = true): Sandbox {
  const system = systemMounts();
  return {
    kind: 'bwrap',
    wrap: (command, args, mounts, opts) => ({
      command: bwrap,
      args: [...bwrapArgs(base, mounts, system, sizedTmp ? opts : { ...opts, tmpSizeMb: undefined }), command, ...args],
    }),
  };
}

/**
 * What an agent server needs of agentplane itself: its code (bin, src, package.json), its node_modules (also at
 * their real path when the folder is a link) and the Node install. Not the whole checkout: a developer's .env or
 * data dir beside it stays out of view.
 */
export function sharedTrees(packageDir: string): string[] {
  const trees = new Set<string>();
  const add = (p: string) => existsSync(p) && trees.add(p);
  const root = realpathSync(packageDir);
  // dist/cli: the prebuilt bundle bin/agentplane.mjs prefers (our code only; the console build stays out).
  for (const entry of ['bin', 'src', 'dist/cli', 'package.json', 'node_modules']) add(join(root, entry));
  if (existsSync(join(root, 'node_modules'))) add(realpathSync(join(root, 'node_modules')));
  const nodePrefix = dirname(dirname(realpathSync(process.execPath)));
  if (!['/usr', '/'].includes(nodePrefix)) add(nodePrefix);
  return [...trees];
}

const run = promisify(execFile);

/**
 * Resolves `auto` by trying bwrap for real (it may be installed but refused by the kernel or a container);
 * `bwrap` insists and throws when it does not work. Returns the sandbox and a line saying why.
 */
export async function detectSandbox(
  mode: SandboxMode,
  base: SandboxBase,
): Promise<{ sandbox: Sandbox; reason: string }> {
  if (mode === 'none')
    return {
      sandbox: NO_SANDBOX,
      reason: 'sandbox disabled (--sandbox none): builds and agent servers run unconfined',
    };
  const bwrap = tool('bwrap');
  try {
    if (!bwrap) throw new Error('bwrap is not in PATH');
    await run(bwrap, ['--version'], { timeout: 5000 });
    const { command, args } = bwrapSandbox(base, bwrap).wrap('true', [], { cwd: '/' }, { tmpSizeMb: 1 });
    const sized = await run(command, args, { timeout: 10_000 }).then(
      () => true,
      () => false,
    );
    const sandbox = bwrapSandbox(base, bwrap, sized);
    if (!sized) {
      const plain = sandbox.wrap('true', [], { cwd: '/' });
      await run(plain.command, plain.args, { timeout: 10_000 });
    }
    return {
      sandbox,
      reason: 'bwrap (bubblewrap): own PID namespace, read-only system, private /tmp, own revision folder writable',
    };
  } catch (err) {
    const why = (err as { stderr?: string; message?: string }).stderr?.trim() || (err as Error).message;
    if (mode === 'bwrap') throw new Error(`--sandbox bwrap: bubblewrap does not work here: ${why}`, { cause: err });
    return {
      sandbox: NO_SANDBOX,
      reason: `bubblewrap not usable (${why.split('\n')[0]}); builds and agent servers run unconfined`,
    };
  }
}
