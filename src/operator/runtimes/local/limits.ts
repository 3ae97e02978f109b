// resource_spec's memory and CPU limits for an agent server on one machine, as close to a Kubernetes pod's as the
// machine allows. With a delegated, writable cgroup v2 (--cgroup-parent, or the process's own cgroup when its
// memory controller is already enabled for children) each server gets a cgroup of its own with memory.max (swap
// off) and cpu.max: the kernel enforces both, like a container's limits. Without one (cgroup v1, no delegation: CI,
// containers) memory is bounded three ways instead: the V8 heap limit (--max-old-space-size, 3/4 of the limit), an
// RLIMIT_DATA hard cap (the limit plus room for address space Node reserves but never touches) under which a large
// allocation fails at once, and a watchdog that kills the server's whole process tree once its resident memory is
// over the limit, as the kernel's OOM killer would; CPU is then not limited, and the deploy log says so.
import { constants } from 'node:fs';
import { access, mkdir, readdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ResourceSpec } from '../../../resources/agent-deployment.ts';
import { shell } from './tools.ts';

export type LimitsOptions = {
  /** Memory limit of a deployment that names none (resource_spec.memory_limit_mb); undefined or 0: none. */
  defaultMemoryLimitMb?: number;
  /** A writable cgroup v2 directory with memory (and cpu) enabled for its children; undefined: none. */
  cgroupParent?: string;
  /** How often the watchdog reads resident memory (default 500 ms). */
  watchIntervalMs?: number;
};

export type ServerLimits = {
  memoryMb?: number;
  cpu?: number;
  /** Node flags of the agent server (the V8 heap limit). */
  nodeArgs: string[];
  /** The command line that starts `command args` inside the limits. */
  wrap(command: string, args: string[]): { command: string; args: string[] };
  /** One line for the deploy log: what is enforced and how. */
  describe: string;
  /** A cgroup made for this server (removed by release()). */
  cgroup?: string;
};

/** Address space Node reserves writable but never touches (thread stacks, heap reservations): above the limit. */
export function dataLimitMb(memoryMb: number): number {
  return memoryMb + Math.max(256, memoryMb);
}

export function heapLimitMb(memoryMb: number): number {
  return Math.max(32, Math.floor(memoryMb * 0.75));
}

/** The limits resource_spec asks for, as Kubernetes reads them: the *_limit fields, else the runtime's default. */
export function requestedLimits(
  spec: ResourceSpec | null | undefined,
  opts: LimitsOptions,
): { memoryMb?: number; cpu?: number } {
  const memoryMb = spec?.memoryLimitMb ?? (opts.defaultMemoryLimitMb || undefined);
  return { ...(memoryMb ? { memoryMb } : {}), ...(spec?.cpuLimit ? { cpu: spec.cpuLimit } : {}) };
}

// sh (not prlimit) sets the rlimit and joins the cgroup: it is always there, and `exec` keeps the pid, so the
// process we spawn is still the one we signal.
const LAUNCH =
  'cg=$1; data=$2; shift 2; ' +
  'if [ -n "$cg" ]; then echo $$ > "$cg/cgroup.procs" || exit 125; fi; ' +
  'if [ -n "$data" ]; then ulimit -d "$data" || exit 125; fi; ' +
  'exec "$@"';

/**
 * Pure: the launch line and Node flags for given limits and cgroup (undefined: no cgroup); `cpuInCgroup` false when
 * the cgroup has no cpu controller (cpu.max could not be written).
 */
export function limitsPlan(
  want: { memoryMb?: number; cpu?: number },
  cgroup: string | undefined,
  cpuInCgroup = true,
): ServerLimits {
  const { memoryMb, cpu } = want;
  const parts: string[] = [];
  const nodeArgs = memoryMb ? [`--max-old-space-size=${heapLimitMb(memoryMb)}`] : [];
  const dataKb = memoryMb && !cgroup ? String(dataLimitMb(memoryMb) * 1024) : '';
  if (memoryMb) {
    parts.push(
      cgroup
        ? `memory ${memoryMb} MB (cgroup v2 memory.max, no swap; V8 heap ${heapLimitMb(memoryMb)} MB)`
        : `memory ${memoryMb} MB (no delegated cgroup v2: V8 heap ${heapLimitMb(memoryMb)} MB, RLIMIT_DATA ` +
            `${dataLimitMb(memoryMb)} MB, killed when resident memory passes ${memoryMb} MB)`,
    );
  }
  if (cpu) {
    parts.push(
      !cgroup
        ? `cpu ${cpu} not enforced (no delegated cgroup v2)`
        : cpuInCgroup
          ? `cpu ${cpu} (cgroup v2 cpu.max)`
          : `cpu ${cpu} not enforced (the cgroup has no cpu controller)`,
    );
  }
  return {
    ...(memoryMb ? { memoryMb } : {}),
    ...(cpu ? { cpu } : {}),
    nodeArgs,
    wrap: (command, args) =>
      cgroup || dataKb
        ? { command: shell(), args: ['-c', LAUNCH, 'agentplane-limits', cgroup ?? '', dataKb, command, ...args] }
        : { command, args },
    describe: parts.length ? `resource limits: ${parts.join('; ')}` : 'resource limits: none',
    ...(cgroup ? { cgroup } : {}),
  };
}

/**
 * The cgroup v2 directory servers' cgroups go under, or why there is none. `parent` (a flag) must be usable;
 * without it the process's own cgroup is used when memory is already enabled for its children.
 */
export async function detectCgroup(
  parent: string | undefined,
  fsRoot = '/sys/fs/cgroup',
  selfCgroup = '/proc/self/cgroup',
): Promise<{ dir?: string; reason: string }> {
  const usable = async (dir: string): Promise<string | undefined> => {
    const controllers = await readFile(join(dir, 'cgroup.subtree_control'), 'utf8').catch(() => undefined);
    if (controllers === undefined) return 'not a cgroup v2 directory';
    if (!controllers.split(/\s+/).includes('memory')) return 'its cgroup.subtree_control does not enable memory';
    try {
      await access(dir, constants.W_OK);
    } catch {
      return 'not writable';
    }
    return undefined;
  };
  if (parent) {
    const problem = await usable(parent);
    if (problem) throw new Error(`--cgroup-parent ${parent}: ${problem}`);
    return { dir: parent, reason: `cgroup v2 under ${parent}` };
  }
  const own = (await readFile(selfCgroup, 'utf8').catch(() => ''))
    .split('\n')
    .find((l) => l.startsWith('0::'))
    ?.slice(3)
    .trim();
  const unified = await access(join(fsRoot, 'cgroup.controllers')).then(
    () => true,
    () => false,
  );
  if (!own || !unified) return { reason: 'no cgroup v2 hierarchy at /sys/fs/cgroup' };
  const dir = join(fsRoot, own);
  const problem = await usable(dir);
  if (problem) return { reason: `own cgroup ${own} not delegated (${problem})` };
  return { dir, reason: `cgroup v2 under ${dir}` };
}

const CPU_PERIOD_US = 100_000;

/**
 * Makes the server's cgroup with its limits; undefined when there is no parent. `cpu` says whether cpu.max took
 * (the parent may enable memory only).
 */
export async function makeServerCgroup(
  parent: string | undefined,
  name: string,
  want: { memoryMb?: number; cpu?: number },
): Promise<{ dir: string; cpu: boolean } | undefined> {
  if (!parent || (!want.memoryMb && !want.cpu)) return undefined;
  const dir = join(parent, name);
  await mkdir(dir, { recursive: true });
  if (want.memoryMb) {
    await writeFile(join(dir, 'memory.max'), String(want.memoryMb * 1024 * 1024));
    await writeFile(join(dir, 'memory.swap.max'), '0').catch(() => undefined);
  }
  const quota = want.cpu && `${Math.max(1000, Math.round(want.cpu * CPU_PERIOD_US))} ${CPU_PERIOD_US}`;
  const cpu = quota
    ? await writeFile(join(dir, 'cpu.max'), quota).then(
        () => true,
        () => false,
      )
    : false;
  return { dir, cpu };
}

/** Removes a server's cgroup once its processes are gone (the kernel refuses while any is left). */
export async function removeServerCgroup(dir: string | undefined): Promise<void> {
  if (dir) await rmdir(dir).catch(() => undefined);
}

/** `pid` and every process below it, parents first, from /proc (which every Linux has, unlike .../children). */
export async function processTree(pid: number): Promise<number[]> {
  const children = new Map<number, number[]>();
  for (const entry of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    // The command name (field 2) may hold spaces and parentheses: the parent pid follows the last ')'.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (ppid) children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
  }
  const tree: number[] = [];
  const queue = [pid];
  while (queue.length) {
    const p = queue.shift()!;
    if (tree.includes(p)) continue;
    tree.push(p);
    queue.push(...(children.get(p) ?? []));
  }
  return tree;
}

/**
 * Private resident memory (bytes) of `pid` and every process below it: anonymous and shared-memory pages, what a
 * container's cgroup is charged for them. Not file pages: the Node binary and libraries are shared with every
 * other process and would count the same 50 MB against each server.
 */
export async function treeResidentBytes(pid: number): Promise<number> {
  let total = 0;
  for (const p of await processTree(pid)) {
    const status = await readFile(`/proc/${p}/status`, 'utf8').catch(() => '');
    for (const field of ['RssAnon', 'RssShmem']) {
      const kb = new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, 'm').exec(status)?.[1];
      total += kb ? Number(kb) * 1024 : 0;
    }
  }
  return total;
}

/**
 * Watches the resident memory of `pid`'s process tree and calls `exceeded` (once) when it passes `memoryMb`.
 * Returns the function that stops watching.
 */
export function watchMemory(
  pid: number,
  memoryMb: number,
  exceeded: (residentMb: number) => void,
  intervalMs = 500,
): () => void {
  let stopped = false;
  let busy = false;
  const timer = setInterval(() => {
    if (busy || stopped) return;
    busy = true;
    void treeResidentBytes(pid)
      .then((bytes) => {
        const mb = Math.round(bytes / 1024 / 1024);
        if (!stopped && mb > memoryMb) {
          stopped = true;
          clearInterval(timer);
          exceeded(mb);
        }
      })
      .finally(() => (busy = false));
  }, intervalMs);
  timer.unref();
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}

/** Kills every process of `pid`'s tree, leaves first (the server is killed as a whole, like a container). */
export async function killTree(pid: number): Promise<void> {
  for (const p of (await processTree(pid)).reverse()) {
    try {
      process.kill(p, 'SIGKILL');
    } catch {
      // gone already
    }
  }
}

/** The limits of one server: its cgroup made (when there is a parent), its launch line and Node flags. */
export async function prepareLimits(
  spec: ResourceSpec | null | undefined,
  opts: LimitsOptions,
  cgroupName: string,
): Promise<ServerLimits> {
  const want = requestedLimits(spec, opts);
  const cgroup = await makeServerCgroup(opts.cgroupParent, cgroupName, want);
  return limitsPlan(want, cgroup?.dir, cgroup?.cpu);
}

/**
 * Enforces what the kernel does not (no cgroup): kills the server's process tree once its resident memory passes
 * the limit, saying so in `line`. Returns the function to call when the server has exited.
 */
export function superviseLimits(
  limits: ServerLimits,
  pid: number | undefined,
  line: (text: string) => void,
  intervalMs?: number,
): () => void {
  const stop =
    pid && limits.memoryMb && !limits.cgroup
      ? watchMemory(
          pid,
          limits.memoryMb,
          (mb) => {
            line(
              `error: out of memory: resident memory ${mb} MB is over the memory limit of ${limits.memoryMb} MB; ` +
                'agent server killed',
            );
            void killTree(pid);
          },
          intervalMs,
        )
      : () => undefined;
  return () => {
    stop();
    void removeServerCgroup(limits.cgroup);
  };
}
