// resource_spec's memory and CPU limits for an agent server on one machine, as close to a Kubernetes pod's as the
// machine allows. With a delegated, writable cgroup v2 (--cgroup-parent, or the process's own cgroup when its
// memory controller is already enabled for children) each server gets a cgroup of its own with memory.max (swap
// off) and cpu.max: the kernel enforces both, like a container's limits. Without one (cgroup v1, no delegation: CI,
// containers) memory is bounded three ways instead: the V8 heap limit (--max-old-space-size, 3/4 of the limit), an
// RLIMIT_DATA hard cap (the limit plus room for address space Node reserves but never touches) under which a large
// allocation fails at once, and a watchdog that kills the server's whole process tree once its resident memory is
// over the limit, as the kernel's OOM killer would; CPU is then not limited, and the deploy log says so.
// Whatever the machine, the same watchdog also bounds what no rlimit can: the sandbox's /tmp (a tmpfs, memory no
// process is charged for) counts as memory, the server's process tree may hold at most so many processes (unless
// the cgroup's pids.max does it), and the deployment's writable folders at most so much disk. Each exceeded limit
// kills the tree and gives the restart its own reason (OOMKilled, ProcessLimitExceeded, DiskLimitExceeded).
import { constants } from 'node:fs';
import { access, lstat, mkdir, opendir, readdir, readFile, rmdir, statfs, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ResourceSpec } from '../../../resources/agent-deployment.ts';
import type { LimitReason } from './restart-policy.ts';
import { shell } from './tools.ts';

export type LimitsOptions = {
  /** Memory limit of a deployment that names none (resource_spec.memory_limit_mb); undefined or 0: none. */
  defaultMemoryLimitMb?: number;
  /** A writable cgroup v2 directory with memory (and cpu) enabled for its children; undefined: none. */
  cgroupParent?: string;
  /** How often the watchdog reads resident memory and counts processes (default 500 ms). */
  watchIntervalMs?: number;
  /** Processes one agent server's tree may hold at once (default 512; 0: no cap). */
  maxProcesses?: number;
  /** Disk a deployment's writable folders may hold, in MB (default 4096; 0: no bound). */
  diskLimitMb?: number;
  /** How often the watchdog measures those folders (default 5 s). */
  diskWatchIntervalMs?: number;
};

export const DEFAULT_MAX_PROCESSES = 512;
export const DEFAULT_DISK_LIMIT_MB = 4096;

export type ServerLimits = {
  memoryMb?: number;
  cpu?: number;
  /** The cap the watchdog holds the process tree to (undefined: none, or the cgroup's pids.max does it). */
  maxProcesses?: number;
  /** The disk bound of the deployment's writable folders, in MB. */
  diskMb?: number;
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
  want: { memoryMb?: number; cpu?: number; maxProcesses?: number; diskMb?: number },
  cgroup: string | undefined,
  cpuInCgroup = true,
  pidsInCgroup = false,
): ServerLimits {
  const { memoryMb, cpu, maxProcesses, diskMb } = want;
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
  if (maxProcesses) {
    parts.push(
      cgroup && pidsInCgroup
        ? `processes ${maxProcesses} (cgroup v2 pids.max)`
        : `processes ${maxProcesses} (watchdog: the process tree is killed when it holds more)`,
    );
  }
  if (diskMb) parts.push(`disk ${diskMb} MB in the deployment's writable folders (watchdog)`);
  const watchedProcesses = maxProcesses && !(cgroup && pidsInCgroup) ? maxProcesses : undefined;
  return {
    ...(memoryMb ? { memoryMb } : {}),
    ...(cpu ? { cpu } : {}),
    ...(watchedProcesses ? { maxProcesses: watchedProcesses } : {}),
    ...(diskMb ? { diskMb } : {}),
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
  want: { memoryMb?: number; cpu?: number; maxProcesses?: number },
): Promise<{ dir: string; cpu: boolean; pids?: boolean } | undefined> {
  if (!parent || (!want.memoryMb && !want.cpu && !want.maxProcesses)) return undefined;
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
  const pids = want.maxProcesses
    ? await writeFile(join(dir, 'pids.max'), String(want.maxProcesses)).then(
        () => true,
        () => false,
      )
    : false;
  return { dir, cpu, ...(pids ? { pids } : {}) };
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
  return residentBytes(await processTree(pid));
}

async function residentBytes(pids: number[]): Promise<number> {
  let total = 0;
  for (const p of pids) {
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
  return poll(
    async () => {
      const mb = Math.round((await treeResidentBytes(pid)) / 1024 / 1024);
      return mb > memoryMb ? mb : undefined;
    },
    exceeded,
    intervalMs,
  );
}

/**
 * Runs `check` every `intervalMs` (never two at once) until it finds something, then calls `exceeded` with it once.
 * Returns the function that stops polling.
 */
function poll<T>(check: () => Promise<T | undefined>, exceeded: (found: T) => void, intervalMs: number): () => void {
  let stopped = false;
  let busy = false;
  const timer = setInterval(() => {
    if (busy || stopped) return;
    busy = true;
    void check()
      .then((found) => {
        if (found !== undefined && !stopped) {
          stopped = true;
          clearInterval(timer);
          exceeded(found);
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

/**
 * Kills every process of `pid`'s tree (the server is killed as a whole, like a container). The tree is stopped
 * first, round after round until no new process shows up, so a tree that forks while it is being killed (a fork
 * bomb) cannot outrun the kill.
 */
export async function killTree(pid: number): Promise<void> {
  const seen = new Set<number>();
  for (let round = 0; round < 50; round++) {
    const fresh = (await processTree(pid)).filter((p) => !seen.has(p));
    if (!fresh.length) break;
    for (const p of fresh) {
      seen.add(p);
      signalQuietly(p, 'SIGSTOP');
    }
  }
  for (const p of [...seen].reverse()) signalQuietly(p, 'SIGKILL');
}

function signalQuietly(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // gone already
  }
}

/** The limits of one server: its cgroup made (when there is a parent), its launch line and Node flags. */
export async function prepareLimits(
  spec: ResourceSpec | null | undefined,
  opts: LimitsOptions,
  cgroupName: string,
): Promise<ServerLimits> {
  const want = {
    ...requestedLimits(spec, opts),
    maxProcesses: opts.maxProcesses ?? DEFAULT_MAX_PROCESSES,
    diskMb: opts.diskLimitMb ?? DEFAULT_DISK_LIMIT_MB,
  };
  const cgroup = await makeServerCgroup(opts.cgroupParent, cgroupName, want);
  return limitsPlan(want, cgroup?.dir, cgroup?.cpu, cgroup?.pids);
}

/** Bytes used on the filesystem at `path` (a tmpfs: what its files hold in memory); 0 when it cannot be read. */
export async function usedBytes(path: string): Promise<number> {
  const st = await statfs(path).catch(() => undefined);
  return st ? (st.blocks - st.bfree) * st.bsize : 0;
}

/**
 * Disk allocated to the files under `dirs` (symbolic links not followed, a hard-linked file counted once, `skip`
 * not entered); stops counting once past `stopAbove`, which is all a bound needs to know.
 */
export async function folderBytes(dirs: string[], skip: string[] = [], stopAbove = Infinity): Promise<number> {
  const counted = new Set<string>();
  let total = 0;
  const stack = [...dirs];
  while (stack.length && total <= stopAbove) {
    const dir = stack.pop()!;
    if (skip.includes(dir)) continue;
    const handle = await opendir(dir).catch(() => undefined);
    if (!handle) continue;
    for await (const entry of handle) {
      const path = join(dir, entry.name);
      const st = await lstat(path).catch(() => undefined);
      if (!st) continue;
      if (st.nlink > 1 && !st.isDirectory()) {
        const id = `${st.dev}:${st.ino}`;
        if (counted.has(id)) continue;
        counted.add(id);
      }
      total += st.blocks * 512;
      if (st.isDirectory()) stack.push(path);
    }
  }
  return total;
}

export type LimitBreach = {
  /** The server's status reason while it is started again. */
  reason: LimitReason;
  /** One line for the deploy log and the status message. */
  message: string;
};

/** What the watchdog measures besides the process tree. */
export type LimitProbes = {
  /** Bytes held by the sandbox's private /tmp (a tmpfs: memory). */
  tmpBytes?: () => Promise<number>;
  /** The deployment's writable folders, and folders under them not to count (read-only shared node_modules). */
  disk?: { dirs: string[]; skip?: string[] };
};

const MB = 1024 * 1024;

/**
 * Measures one server against its limits every `intervalMs` (disk every `diskIntervalMs`) and calls `exceeded`
 * once, with the first limit found exceeded. Returns the function that stops watching.
 */
export function watchLimits(
  pid: number,
  limits: Pick<ServerLimits, 'memoryMb' | 'maxProcesses' | 'diskMb' | 'cgroup'>,
  probes: LimitProbes,
  exceeded: (breach: LimitBreach) => void,
  intervalMs = 500,
  diskIntervalMs = 5000,
): () => void {
  let lastDisk = Date.now();
  const memoryMb = limits.cgroup ? undefined : limits.memoryMb;
  const check = async (): Promise<LimitBreach | undefined> => {
    if (memoryMb || limits.maxProcesses) {
      const tree = await processTree(pid);
      if (limits.maxProcesses && tree.length > limits.maxProcesses) {
        return {
          reason: 'ProcessLimitExceeded',
          message: `${tree.length} processes are over the limit of ${limits.maxProcesses}`,
        };
      }
      if (memoryMb) {
        const resident = Math.round((await residentBytes(tree)) / MB);
        const tmp = Math.round(((await probes.tmpBytes?.()) ?? 0) / MB);
        if (resident + tmp > memoryMb) {
          const what = tmp
            ? `resident memory ${resident} MB and /tmp ${tmp} MB (${resident + tmp} MB) are`
            : `resident memory ${resident} MB is`;
          return { reason: 'OOMKilled', message: `out of memory: ${what} over the memory limit of ${memoryMb} MB` };
        }
      }
    }
    if (limits.diskMb && probes.disk && Date.now() - lastDisk >= diskIntervalMs) {
      lastDisk = Date.now();
      const bound = limits.diskMb * MB;
      const used = await folderBytes(probes.disk.dirs, probes.disk.skip, bound);
      if (used > bound) {
        return {
          reason: 'DiskLimitExceeded',
          message: `disk: the deployment's folders hold more than ${limits.diskMb} MB, the disk limit`,
        };
      }
    }
    return undefined;
  };
  return poll(check, exceeded, intervalMs);
}

/**
 * Enforces what the kernel does not: kills the server's process tree once a limit is exceeded, saying so in `line`
 * and to `breached`. Returns the function to call when the server has exited.
 */
export function superviseLimits(
  limits: ServerLimits,
  pid: number | undefined,
  line: (text: string) => void,
  opts: { intervalMs?: number; diskIntervalMs?: number; probes?: LimitProbes; breached?: (b: LimitBreach) => void },
): () => void {
  const watched = limits.maxProcesses || limits.diskMb || (limits.memoryMb && !limits.cgroup);
  const stop =
    pid && watched
      ? watchLimits(
          pid,
          limits,
          opts.probes ?? {},
          (breach) => {
            opts.breached?.(breach);
            line(`error: ${breach.message}; agent server killed`);
            void killTree(pid);
          },
          opts.intervalMs,
          opts.diskIntervalMs,
        )
      : () => undefined;
  return () => {
    stop();
    void removeServerCgroup(limits.cgroup);
  };
}
