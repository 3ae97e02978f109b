// Executor threads get a larger V8 young generation when the memory budget allows (--executor-young-mb): the
// default is sized from the heap limit and the cgroup's memory limit, and the thread's isolate really gets it.
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { parseAgentServerConfig } from '../../../src/agent-server/config.ts';
import { executorYoungMb } from '../../../src/agent-server/sizing.ts';
import { InlineExecutor } from '../../../src/agent-server/runs/executor.ts';
import { useThreadExecutor } from '../helpers/thread-executor.ts';

const MIB = 2 ** 20;
const GIB = 1024 * MIB;
const UNCONSTRAINED = 2 ** 64; // what process.constrainedMemory() answers outside a memory-limited cgroup

describe('the default young generation of executor threads', () => {
  it.each<[string, number, number, number]>([
    ["Node's default heap limit on a large machine, no cgroup limit", 4144 * MIB, UNCONSTRAINED, 192],
    ['no constraint reported as 0', 4144 * MIB, 0, 192],
    ['a 512 MB deployment (the local runtime: --max-old-space-size=384)', 432 * MIB, UNCONSTRAINED, 0],
    ['a 2 GiB deployment (--max-old-space-size=1536)', 1584 * MIB, UNCONSTRAINED, 96],
    ['a pod limited to 1 GiB', 4144 * MIB, GIB, 0],
    ['a pod limited to 2 GiB', 4144 * MIB, 2 * GIB, 96],
    ['a pod limited to 8 GiB', 4144 * MIB, 8 * GIB, 192],
    ['a cgroup limit above the machine memory is none', 4144 * MIB, 64 * GIB, 192],
  ])('%s', (_name, heapLimit, constrained, expected) => {
    expect(executorYoungMb(heapLimit, constrained, 24 * GIB)).toBe(expected);
  });

  it('is a flag and a variable, checked', () => {
    expect(parseAgentServerConfig(['--executor-young-mb', '96'], {})!.executorYoungMb).toBe(96);
    expect(parseAgentServerConfig([], { AGENTPLANE_EXECUTOR_YOUNG_MB: '0' })!.executorYoungMb).toBe(0);
    for (const bad of ['-1', '2048', 'big', '1.5']) {
      expect(() => parseAgentServerConfig(['--executor-young-mb', bad], {})).toThrow(/--executor-young-mb/);
    }
  });
});

describe('an executor thread started with a young generation', () => {
  const startExecutor = useThreadExecutor();

  /** The heap sizes each thread's isolate reported when it became ready. */
  async function startedWith(youngMb: number): Promise<Array<Record<string, unknown>>> {
    const lines: Array<Record<string, unknown>> = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const l of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(l));
        done();
      },
    });
    const logger = pino({ level: 'debug' }, sink);
    const executor = startExecutor({
      inline: new InlineExecutor(new Map() as never, undefined as never),
      logger,
      youngMb,
    });
    await executor.whenReady();
    return lines.filter((l) => l.msg === 'executor thread ready');
  }

  it('gets that size from V8', async () => {
    const [ready] = await startedWith(96);
    expect(ready?.young_generation_mb).toBe(96);
  });

  it("keeps V8's own size with 0", async () => {
    const [ready] = await startedWith(0);
    expect(ready?.young_generation_mb).toBeGreaterThan(0);
    expect(ready?.young_generation_mb).toBeLessThan(96);
  });
});
