// The local runtime's resource limits below the runtime: the plan drawn from resource_spec (Kubernetes' reading:
// the *_limit fields), the launch line that puts a real process under RLIMIT_DATA (a large allocation fails at
// once), the watchdog that kills a real process tree holding more than its limit, and which cgroup v2 directory
// is trusted (only one that is delegated: writable, memory enabled for children).
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { limitsPlan, requestedLimits } from '../../../../src/operator/runtimes/local/limits.ts';
import { detectCgroup, makeServerCgroup } from '../../../../src/operator/runtimes/local/limits-cgroup.ts';
import { watchMemory } from '../../../../src/operator/runtimes/local/limits-watchdog.ts';
import { killTree, treeResidentBytes } from '../../../../src/operator/runtimes/local/process-tree.ts';

const tmp = mkdtempSync(join(tmpdir(), 'ap-limits-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function run(command: string, args: string[]): Promise<{ code: number | null; out: string; pid: number }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('close', (code) => resolve({ code, out, pid: child.pid! }));
  });
}

describe('resource limits of local agent servers', () => {
  it.each([
    [{ memoryLimitMb: 256, memoryMb: 128, cpuLimit: 0.5 }, {}, { memoryMb: 256, cpu: 0.5 }],
    [{ memoryMb: 128, cpu: 1 }, {}, {}],
    [{ memoryMb: 128 }, { defaultMemoryLimitMb: 2048 }, { memoryMb: 2048 }],
    [null, { defaultMemoryLimitMb: 0 }, {}],
    [{ memoryLimitMb: 300 }, { defaultMemoryLimitMb: 2048 }, { memoryMb: 300 }],
  ])('resource_spec %j with %j limits to %j (requests never limit, as on Kubernetes)', (spec, opts, want) => {
    expect(requestedLimits(spec, opts)).toEqual(want);
  });

  it('says what is enforced and how, with and without a cgroup', () => {
    const bare = limitsPlan({ memoryMb: 256, cpu: 0.5 }, undefined);
    expect(bare.nodeArgs).toEqual(['--max-old-space-size=192']);
    expect(bare.describe).toMatch(/memory 256 MB \(no delegated cgroup v2: V8 heap 192 MB, RLIMIT_DATA 512 MB/);
    expect(bare.describe).toMatch(/cpu 0.5 not enforced/);
    const grouped = limitsPlan({ memoryMb: 256, cpu: 0.5 }, '/sys/fs/cgroup/x/agentplane-r1');
    expect(grouped.describe).toMatch(/cgroup v2 memory.max.*cpu 0.5 \(cgroup v2 cpu.max\)/);
    // By absolute path: a PATH among the deployment's variables must not choose the shell that runs the limits.
    expect(grouped.wrap('node', ['a']).command).toMatch(/^\/.*\/sh$/);
    expect(limitsPlan({ cpu: 2 }, '/sys/fs/cgroup/x/y', false).describe).toMatch(
      /cpu 2 not enforced .*no cpu controller/,
    );
    expect(limitsPlan({}, undefined)).toMatchObject({ nodeArgs: [], describe: 'resource limits: none' });
    expect(limitsPlan({}, undefined).wrap('node', ['a'])).toEqual({ command: 'node', args: ['a'] });
  });

  it('puts the process itself (same pid) under RLIMIT_DATA: 600 MB in one piece fails under a 256 MB limit', async () => {
    const script =
      "const limits = require('fs').readFileSync('/proc/self/limits', 'utf8');" +
      'console.log(process.pid, /Max data size\\s+(\\d+)/.exec(limits)[1]);' +
      "try { globalThis.b = Buffer.alloc(600 * 1024 * 1024, 1); console.log('held 600'); } catch (e) { console.log('refused', e.message); }";
    const { command, args } = limitsPlan({ memoryMb: 256 }, undefined).wrap(process.execPath, ['-e', script]);
    const { out, pid } = await run(command, args);
    const [reportedPid, dataLimit] = out.split('\n')[0]!.split(' ');
    expect(Number(reportedPid)).toBe(pid);
    expect(Number(dataLimit)).toBe(512 * 1024 * 1024);
    expect(out).toMatch(/refused .*allocation failed/i);
    expect(out).not.toContain('held 600');
  });

  it('the watchdog kills a process tree whose children hold more than the limit', async () => {
    // A shell whose child takes 120 MB and keeps it: the memory is below the process we watch, not in it.
    const hog =
      "globalThis.b = Buffer.alloc(120 * 1024 * 1024, 1); console.log('holding'); setInterval(() => {}, 1000);";
    const child = spawn('sh', ['-c', `"${process.execPath}" -e "${hog}"; echo after`], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    await new Promise<void>((r) => child.stdout.on('data', (d: Buffer) => d.toString().includes('holding') && r()));
    expect(await treeResidentBytes(child.pid!)).toBeGreaterThan(100 * 1024 * 1024);
    const exited = new Promise<string | null>((r) => child.once('exit', (_c, sig) => r(sig)));
    const seen: number[] = [];
    const stop = watchMemory(
      child.pid!,
      64,
      (mb) => {
        seen.push(mb);
        void killTree(child.pid!);
      },
      50,
    );
    expect(await exited).toBe('SIGKILL');
    stop();
    expect(seen).toHaveLength(1);
    expect(seen[0]).toBeGreaterThan(64);
  });

  it("writes a server cgroup's memory.max (no swap) and cpu.max", async () => {
    const parent = join(tmp, 'delegated');
    mkdirSync(parent);
    const made = await makeServerCgroup(parent, 'agentplane-r1-4000', { memoryMb: 256, cpu: 0.5 });
    expect(made).toEqual({ dir: join(parent, 'agentplane-r1-4000'), cpu: true });
    expect(readFileSync(join(made!.dir, 'memory.max'), 'utf8')).toBe(String(256 * 1024 * 1024));
    expect(readFileSync(join(made!.dir, 'memory.swap.max'), 'utf8')).toBe('0');
    expect(readFileSync(join(made!.dir, 'cpu.max'), 'utf8')).toBe('50000 100000');
    expect(await makeServerCgroup(undefined, 'x', { memoryMb: 256 })).toBeUndefined();
    expect(await makeServerCgroup(parent, 'none', {})).toBeUndefined();
  });

  it('trusts only a delegated cgroup v2 directory', async () => {
    const root = join(tmp, 'cgroupfs');
    const own = join(root, 'user.slice', 'dev.scope');
    mkdirSync(own, { recursive: true });
    const self = join(tmp, 'self-cgroup');
    writeFileSync(self, '0::/user.slice/dev.scope\n');
    expect((await detectCgroup(undefined, root, self)).dir).toBeUndefined(); // not unified: no cgroup.controllers
    writeFileSync(join(root, 'cgroup.controllers'), 'cpu memory pids\n');
    writeFileSync(join(own, 'cgroup.subtree_control'), 'pids\n');
    expect(await detectCgroup(undefined, root, self)).toEqual({
      reason: expect.stringMatching(/not delegated .*does not enable memory/),
    });
    writeFileSync(join(own, 'cgroup.subtree_control'), 'cpu memory\n');
    expect((await detectCgroup(undefined, root, self)).dir).toBe(own);
    // cgroup v1 only (this file has no "0::" line): nothing.
    writeFileSync(self, '4:memory:/x\n');
    expect((await detectCgroup(undefined, root, self)).dir).toBeUndefined();
    // A parent named by flag must be usable, or start-up stops naming the flag.
    await expect(detectCgroup(join(tmp, 'nowhere'), root, self)).rejects.toThrow(/--cgroup-parent .*not a cgroup v2/);
    expect((await detectCgroup(own, root, self)).dir).toBe(own);
  });
});
