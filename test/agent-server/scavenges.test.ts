// The agent server scavenges on the allocating thread alone unless told otherwise (src/agent-server/scavenges.ts).
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parseAgentServerConfig } from '../../src/agent-server/config.ts';
import { scavengeOnAllocatingThread } from '../../src/agent-server/scavenges.ts';
import { ROOT } from './helpers/process.ts';

const exec = promisify(execFile);

describe('young-generation collections', () => {
  it('are switched to the allocating thread by default, and left alone when asked or chosen on the node command line', () => {
    const set: string[] = [];
    const setFlags = (f: string) => void set.push(f);
    expect(scavengeOnAllocatingThread(false, [], setFlags)).toBe(true);
    expect(set).toEqual(['--no-parallel-scavenge']);
    for (const argv of [
      ['--parallel-scavenge'],
      ['--max-old-space-size=512', '--no-parallel-scavenge'],
      ['--single-threaded-gc'],
      ['--single_threaded'],
    ]) {
      expect(scavengeOnAllocatingThread(false, argv, setFlags), argv.join(' ')).toBe(false);
    }
    expect(scavengeOnAllocatingThread(true, ['--max-old-space-size=512'], setFlags)).toBe(false);
    expect(set).toHaveLength(1);
    // Unrelated flags that merely start alike do not count as a choice.
    expect(scavengeOnAllocatingThread(false, ['--parallel-scavenge-extra'], setFlags)).toBe(true);
  });

  it('can go back to parallel with --parallel-scavenge or AGENTPLANE_PARALLEL_SCAVENGE', () => {
    expect(parseAgentServerConfig([], {})!.parallelScavenge).toBeUndefined();
    expect(parseAgentServerConfig(['--parallel-scavenge'], {})!.parallelScavenge).toBe(true);
    expect(parseAgentServerConfig([], { AGENTPLANE_PARALLEL_SCAVENGE: 'true' })!.parallelScavenge).toBe(true);
    expect(parseAgentServerConfig([], { AGENTPLANE_PARALLEL_SCAVENGE: '0' })!.parallelScavenge).toBeUndefined();
  });

  it('change safely in a running process with a worker thread allocating too', async () => {
    // V8 aborts the process when some collector settings change after start-up (--single-threaded-gc does): this
    // one must not, with garbage made on the main thread and on a worker at once, survivors included.
    const script = `
      import { Worker } from 'node:worker_threads';
      import { scavengeOnAllocatingThread } from './src/agent-server/scavenges.ts';
      const churn = \`const keep = []; const end = Date.now() + 800;
        while (Date.now() < end) { const a = []; for (let i = 0; i < 2000; i++) a.push({ i, s: 'x' + i, l: [i] });
          keep.push(a); if (keep.length > 64) keep.splice(0, 32); }\`;
      const worker = new Worker(churn, { eval: true });
      console.log(scavengeOnAllocatingThread(false));
      new Function(churn)();
      await new Promise((r) => worker.once('exit', r));
      console.log('done');
    `;
    const { stdout } = await exec(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: ROOT,
    });
    expect(stdout.trim().split('\n')).toEqual(['true', 'done']);
  });
});
