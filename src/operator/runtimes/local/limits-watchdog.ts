// The watchdog of the local runtime's limits (limits.ts): it measures what no rlimit bounds and the kernel does not
// enforce without a delegated cgroup (resident memory of the whole tree plus the sandbox's /tmp, the number of
// processes, the disk of the deployment's writable folders) and kills the server's tree, with the limit's own
// restart reason (OOMKilled, ProcessLimitExceeded, DiskLimitExceeded), once one is exceeded.
import { lstat, opendir, statfs } from 'node:fs/promises';
import { join } from 'node:path';
import type { ServerLimits } from './limits.ts';
import { removeServerCgroup } from './limits-cgroup.ts';
import { killTree, processTree, residentBytes, treeResidentBytes } from './process-tree.ts';
import type { LimitReason } from './restart-policy.ts';

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
