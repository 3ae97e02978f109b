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
// Here: what a server is held to and how it is launched; its cgroup is made by limits-cgroup.ts, the watchdog is
// limits-watchdog.ts (over process-tree.ts).
import type { ResourceSpec } from '../../../resources/agent-deployment.ts';
import { makeServerCgroup } from './limits-cgroup.ts';
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
