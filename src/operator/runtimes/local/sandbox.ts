// How the local runtime confines what a workspace controls (build steps, agent servers): with bubblewrap each one
// gets its own PID namespace, a read-only view of the system and of agentplane itself, a private /tmp, and write
// access to its own revision only; the data dir, the control plane's store and other deployments are not there.
// `none` runs them as plain child processes: every workspace can then read everything the dev process can.
// When the platform runs as root, they also run as an unprivileged account (SandboxUser): root in a user namespace
// of root's is still the owner of every root-owned file the read-only system shows.
import { execFile } from 'node:child_process';
import { existsSync, lstatSync, readlinkSync, realpathSync } from 'node:fs';
import { chmod } from 'node:fs/promises';
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
export type WrapOptions = {
  infoFd?: number;
  asPid1?: boolean;
  argsFd?: number;
  tmpSizeMb?: number;
  /** Run the command as this account (the sandbox's `user`); the folders it writes must be its own (ownTree). */
  user?: SandboxUser;
};

/**
 * The unprivileged account sandboxed build steps and agent servers run as when the platform runs as root. bwrap then makes the
 * namespaces as root (it must reach bind sources under 0700 folders) without a user namespace, keeps only the
 * capabilities to change uid, and `setpriv` inside switches to this account with no capability, no supplementary
 * group and no_new_privs before the server's code is loaded.
 */
export type SandboxUser = { uid: number; gid: number; setpriv: string };

export type Sandbox = {
  kind: 'bwrap' | 'none';
  /** The account build steps and servers run as inside (platform running as root), else the platform's uid. */
  user?: SandboxUser;
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
  type M = { path: string; args: string[]; host: boolean };
  const ordered: M[] = [
    ...base.shared.map((p) => ({ path: p, args: ['--ro-bind', p, p], host: true })),
    ...(mounts.ro ?? []).map((p) => ({ path: p, args: ['--ro-bind', p, p], host: true })),
    ...base.hidden.map((p) => ({ path: p, args: ['--tmpfs', p], host: false })),
    ...(mounts.rw ?? []).map((p) => ({ path: p, args: ['--bind', p, p], host: true })),
    ...(mounts.roOver ?? []).map((p) => ({ path: p, args: ['--ro-bind', p, p], host: true })),
    // Writable for the sandbox's user too (bwrap makes a tmpfs root's, 0755).
    ...(mounts.tmpfs ?? []).map((p) => ({
      path: p,
      args: [...(opts.user ? ['--perms', '1777'] : []), '--tmpfs', p],
      host: false,
    })),
  ];
  // Stable: equal depths keep the order above (hidden before the writable folders beneath it).
  const sorted = ordered.map((m, i) => ({ m, i })).sort((a, b) => depth(a.m.path) - depth(b.m.path) || a.i - b.i);
  const user = opts.user;
  const parents = user
    ? parentDirs(
        system,
        sorted.map(({ m }) => m),
      )
    : () => [];
  return [
    ...(opts.argsFd !== undefined ? ['--args', String(opts.argsFd)] : []),
    ...(opts.infoFd !== undefined ? ['--info-fd', String(opts.infoFd)] : []),
    // As root with a user: no user namespace (its only uid would map to root), so that setpriv can switch to the
    // user's real uid; the capabilities kept for that are all gone once it has (a switch from uid 0 clears them,
    // and setpriv empties the bounding and inheritable sets).
    ...(user
      ? ['--unshare-ipc', '--unshare-pid', '--unshare-uts', '--unshare-cgroup-try']
      : ['--unshare-all', '--share-net']),
    ...(opts.asPid1 ? ['--as-pid-1'] : []),
    '--die-with-parent',
    '--new-session',
    '--cap-drop',
    'ALL',
    // CAP_DAC_READ_SEARCH: bwrap, as root without it, could not enter the user's 0700 working folder (--chdir).
    ...(user
      ? [
          '--cap-add',
          'CAP_SETUID',
          '--cap-add',
          'CAP_SETGID',
          '--cap-add',
          'CAP_SETPCAP',
          '--cap-add',
          'CAP_DAC_READ_SEARCH',
        ]
      : []),
    ...system,
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    ...(opts.tmpSizeMb ? ['--size', String(opts.tmpSizeMb * 1024 * 1024)] : []),
    // bwrap makes it root's 0755: the user needs it writable, as a /tmp is.
    ...(user ? ['--perms', '1777'] : []),
    '--tmpfs',
    '/tmp',
    ...sorted.flatMap(({ m }) => [...parents(m.path), ...m.args]),
    '--chdir',
    mounts.cwd,
    '--',
    ...(user
      ? [
          user.setpriv,
          `--reuid=${user.uid}`,
          `--regid=${user.gid}`,
          '--clear-groups',
          '--inh-caps=-all',
          '--bounding-set=-all',
          '--no-new-privs',
          '--',
        ]
      : []),
  ];
}

/**
 * `--dir` for the folders bwrap would make on its own above each mount point. bwrap gives those the modes of the
 * source's parents, so a 0700 root-owned data dir or `mktemp -d` folder above a deployment's folder would lock the
 * sandbox's user out of its own folders; made first, they are 0755 folders of the sandbox's tmpfs (their names only).
 * Folders inside a host mount are the host's and exist already.
 */
function parentDirs(system: string[], mounts: { path: string; host: boolean }[]): (path: string) => string[] {
  // Every mount made so far and whether it shows a host folder; the deepest one holding a path decides.
  const made = new Map<string, boolean>([
    ['/', false],
    ['/tmp', false],
    ['/proc', false],
    ['/dev', false],
  ]);
  for (let i = 0; i + 2 < system.length; i += 3) if (system[i] === '--ro-bind') made.set(system[i + 2]!, true);
  const inHost = (p: string) => {
    let best = '';
    for (const m of made.keys()) {
      if ((p === m || p.startsWith(m === '/' ? '/' : `${m}/`)) && m.length > best.length) best = m;
    }
    return made.get(best) ?? false;
  };
  const host = new Map(mounts.map((m) => [resolve(m.path), m.host]));
  return (path) => {
    const out: string[] = [];
    const self = resolve(path);
    const parts = self.split(sep).filter(Boolean);
    for (let i = 1; i < parts.length; i++) {
      const dir = `/${parts.slice(0, i).join('/')}`;
      if (made.has(dir) || inHost(dir)) continue;
      made.set(dir, false);
      out.push('--perms', '0755', '--dir', dir);
    }
    made.set(self, host.get(self) ?? false);
    return out;
  };
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
export function bwrapSandbox(base: SandboxBase, bwrap: string, sizedTmp = true, user?: SandboxUser): Sandbox {
  const system = systemMounts();
  return {
    kind: 'bwrap',
    ...(user ? { user } : {}),
    wrap: (command, args, mounts, opts) => ({
      command: bwrap,
      args: [
        ...bwrapArgs(base, mounts, system, {
          ...(user ? { user } : {}),
          ...opts,
          ...(sizedTmp ? {} : { tmpSizeMb: undefined }),
        }),
        command,
        ...args,
      ],
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
 * Makes `dirs` (the folders a build step or server writes: the checkout, the deployment's home and data) the sandbox
 * user's, the top ones 0700, before it runs. Recursive every time: the platform itself added files (the install
 * cache's links, an older release's data written as root). `chown -hR` works on links themselves and never follows
 * one (fts, relative to each folder's descriptor), so a link a workspace left in its folders cannot turn this into a
 * chown of a platform file.
 */
export async function ownFolders(user: SandboxUser | undefined, dirs: string[]): Promise<void> {
  if (!user || !dirs.length) return;
  await run(tool('chown') ?? '/bin/chown', ['-hR', `${user.uid}:${user.gid}`, '--', ...dirs], { timeout: 120_000 });
  for (const dir of dirs) await chmod(dir, 0o700);
}

/** The account sandboxed servers run as when the platform runs as root, unless --sandbox-uid says otherwise. */
export const DEFAULT_SANDBOX_UID = 65534;

/**
 * Resolves `auto` by trying bwrap for real (it may be installed but refused by the kernel or a container);
 * `bwrap` insists and throws when it does not work. Returns the sandbox and a line saying why. As root, agent
 * servers run as `uid` (its own gid too) when setpriv can switch to it inside bwrap; not as root, `uid` is unused.
 */
export async function detectSandbox(
  mode: SandboxMode,
  base: SandboxBase,
  uid: number = DEFAULT_SANDBOX_UID,
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
    const plain = bwrapSandbox(base, bwrap, sized);
    if (!sized) {
      const probe = plain.wrap('true', [], { cwd: '/' });
      await run(probe.command, probe.args, { timeout: 10_000 });
    }
    const { user, why } = await sandboxUser(base, bwrap, sized, uid);
    return {
      sandbox: user ? bwrapSandbox(base, bwrap, sized, user) : plain,
      reason:
        'bwrap (bubblewrap): own PID namespace, read-only system, private /tmp, own revision folder writable' +
        (why ? `; ${why}` : ''),
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

/** As root: the account servers run as, tried for real, and a line for the sandbox's reason. */
async function sandboxUser(
  base: SandboxBase,
  bwrap: string,
  sized: boolean,
  uid: number,
): Promise<{ user?: SandboxUser; why?: string }> {
  if (process.getuid?.() !== 0) return {};
  const setpriv = tool('setpriv');
  if (!setpriv) return { why: 'agent servers run as root in a user namespace (setpriv is not in PATH)' };
  const user = { uid, gid: uid, setpriv };
  const probe = bwrapSandbox(base, bwrap, sized, user).wrap('true', [], { cwd: '/' }, { user });
  try {
    await run(probe.command, probe.args, { timeout: 10_000 });
    return { user, why: `agent servers run as uid ${uid}` };
  } catch (err) {
    const why = (err as { stderr?: string }).stderr?.trim().split('\n')[0] || (err as Error).message;
    return { why: `agent servers run as root in a user namespace (switching to uid ${uid} failed: ${why})` };
  }
}
