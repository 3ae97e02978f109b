// The agent server's default executor threads in a pod: the container's CPU quota counts, not the node's cores.
import { describe, expect, it } from 'vitest';
import { usableCpus } from '../../src/agent-server/sizing.ts';

const files = (map: Record<string, string>) => (file: string) => map[file];

describe('usable CPUs from the cgroup quota', () => {
  it.each<[string, number, Record<string, string>, number]>([
    ['no cgroup files: the cores', 8, {}, 8],
    ['cgroup v2 without a limit', 16, { '/sys/fs/cgroup/cpu.max': 'max 100000\n' }, 16],
    ['cgroup v2, a 1-CPU limit on a 16-core node', 16, { '/sys/fs/cgroup/cpu.max': '100000 100000\n' }, 1],
    ['cgroup v2, 2.5 CPUs', 16, { '/sys/fs/cgroup/cpu.max': '250000 100000' }, 2.5],
    ['a quota above the cores', 2, { '/sys/fs/cgroup/cpu.max': '800000 100000' }, 2],
    [
      'cgroup v1 quota',
      16,
      { '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '50000', '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000' },
      0.5,
    ],
    [
      'cgroup v1 without a quota (-1)',
      4,
      { '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '-1', '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000' },
      4,
    ],
  ])('%s', (_name, cores, map, expected) => {
    expect(usableCpus(cores, files(map))).toBe(expected);
  });
});
