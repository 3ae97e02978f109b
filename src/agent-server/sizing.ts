// Defaults sized to what the process may use: the cores and memory of its cgroup (a pod's limits), not the node's.
import { readFileSync } from 'node:fs';

/** A cgroup file's text; undefined where it does not exist (no such controller, or not in a container). */
export function readCgroupFile(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

const MIB = 2 ** 20;

/**
 * The default young generation of an executor thread, in MiB (0: V8's own, 48): executor threads allocate fast and
 * hold a run's objects for the run's few milliseconds, so a young generation that outlasts them saves the copying
 * (bench/results/issue-30.md, ninth session). The budget is the V8 heap limit (--max-old-space-size, which the
 * local runtime sets from a deployment's memory limit), or 3/4 of the cgroup's memory limit when that is lower (a
 * pod's limit: `constrained` at or above the machine's memory means none); a sixteenth of it, in V8's steps.
 */
export function executorYoungMb(heapLimitBytes: number, constrainedBytes: number, totalBytes: number): number {
  const limited = constrainedBytes > 0 && constrainedBytes < totalBytes ? (constrainedBytes * 3) / 4 : Infinity;
  const budget = Math.min(heapLimitBytes, limited) / MIB;
  if (budget >= 3 * 1024) return 192;
  if (budget >= 1.5 * 1024) return 96;
  return 0;
}

/**
 * CPUs this process may use: the cores it sees, bounded by the container's CPU quota (cgroup v2 `cpu.max`, else v1
 * `cpu.cfs_quota_us`/`cpu.cfs_period_us`). In a pod with a 1-CPU limit on a 16-core node this is 1, not 16.
 */
export function usableCpus(cores: number, read: (file: string) => string | undefined): number {
  const v2 = read('/sys/fs/cgroup/cpu.max')?.trim().split(/\s+/);
  let quota: number | undefined;
  if (v2 && v2[0] !== 'max' && v2.length === 2) quota = Number(v2[0]) / Number(v2[1]);
  if (quota === undefined && !v2) {
    const q = Number(read('/sys/fs/cgroup/cpu/cpu.cfs_quota_us')?.trim());
    const p = Number(read('/sys/fs/cgroup/cpu/cpu.cfs_period_us')?.trim());
    if (q > 0 && p > 0) quota = q / p;
  }
  return quota !== undefined && Number.isFinite(quota) && quota > 0 ? Math.min(cores, quota) : cores;
}

/**
 * The process's Postgres connections by default: twice its usable cores (a CPU quota rounded up), at least 4 and at
 * most 20. More connections than there are cores to serve them mostly add switching between their backends: on a
 * 2-core machine running the server and its database, 4 in place of 40 took Postgres' CPU per run cycle down by a
 * quarter to a third and the cycles per second up (bench/results/issue-30.md, thirteenth session).
 */
export function defaultPostgresPoolMaxSize(usableCores: number): number {
  return Math.min(20, Math.max(4, 2 * Math.ceil(usableCores)));
}

/**
 * The Postgres pools' sizes: the HTTP thread's (`main`, which also serves the checkpoints of graphs run inline) and
 * each executor thread's (`executor`), from the process's budget (--postgres-pool-max-size) shared out evenly, the
 * HTTP thread taking what does not divide; at least one connection each.
 */
export function postgresPoolSizes(maxSize: number, executorThreads: number): { main: number; executor: number } {
  const executor = Math.max(1, Math.floor(maxSize / (executorThreads + 1)));
  return { main: Math.max(1, maxSize - executor * executorThreads), executor };
}
