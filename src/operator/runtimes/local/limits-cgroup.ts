// The cgroup v2 side of the local runtime's limits (limits.ts): which directory servers' cgroups may go under (only
// a delegated one: writable, memory enabled for children), and each server's own cgroup with memory.max (swap off),
// cpu.max and pids.max, which the kernel enforces like a container's limits.
import { constants } from 'node:fs';
import { access, mkdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

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
