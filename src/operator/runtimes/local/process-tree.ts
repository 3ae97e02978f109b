// An agent server's process tree as /proc shows it (every Linux has it): its processes, the memory a container's
// cgroup would be charged for them, and a kill of the whole tree that a forking tree cannot outrun.
import { readdir, readFile } from 'node:fs/promises';

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

export async function residentBytes(pids: number[]): Promise<number> {
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
