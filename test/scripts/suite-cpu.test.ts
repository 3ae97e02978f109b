// scripts/suite-cpu.ts (`npm run test:cpu`): which test file each process's CPU is charged to, and a real run of it
// on one file of the suite.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { attribute, processKind, readSpans, type Attribution } from '../../scripts/suite-cpu.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

describe('suite-cpu', () => {
  it('names processes by what they run', () => {
    expect(processKind('/usr/bin/node /w/main/bin/agentplane.mjs agent-server --port 0')).toBe(
      'agentplane agent-server',
    );
    expect(processKind('/usr/bin/node /usr/lib/node_modules/agentplane/bin/agentplane dev --port 0')).toBe(
      'agentplane dev',
    );
    expect(
      processKind('/usr/bin/node --require /w/node_modules/vitest/suppress-warnings.cjs --conditions node x.js'),
    ).toBe('vitest worker');
    expect(processKind('postgres: postgres t_123 127.0.0.1(5050) idle')).toBe('postgres backend');
    expect(processKind('node /usr/bin/npm ci --prefer-offline')).toBe('node npm');
    expect(processKind('/usr/bin/bwrap --args 12 -- node')).toBe('bwrap');
    expect(processKind('')).toBe('?');
  });

  it("reads the workers' spans and charges CPU to the file each process's worker ran at the time", () => {
    const spans = readSpans(
      [
        `S 100 1000 ${ROOT}/test/a.test.ts`,
        `S 101 1000 ${ROOT}/test/c.test.ts`,
        `E 100 5000 ${ROOT}/test/a.test.ts`,
        `S 100 5100 ${ROOT}/test/b.test.ts`,
        'a line of something else',
        `E 100 9000 ${ROOT}/test/b.test.ts`,
      ].join('\n'),
      ROOT,
    );
    expect(spans).toEqual([
      { pid: 100, file: 'test/a.test.ts', start: 1000, end: 5000 },
      { pid: 101, file: 'test/c.test.ts', start: 1000, end: Infinity },
      { pid: 100, file: 'test/b.test.ts', start: 5100, end: 9000 },
    ]);
    const procs = [
      { key: '100:1', pid: 100, ppid: 50, cmd: 'node --require /v/vitest/suppress-warnings.cjs w.js' },
      { key: '101:1', pid: 101, ppid: 50, cmd: 'node --require /v/vitest/suppress-warnings.cjs w.js' },
      // an agent server started by worker 100's test, and the sandboxed process it runs
      { key: '200:7', pid: 200, ppid: 100, cmd: 'node /m/bin/agentplane.mjs agent-server' },
      { key: '201:8', pid: 201, ppid: 200, cmd: 'bwrap --args 3' },
      // a PostgreSQL backend: outside every worker's tree
      { key: '300:9', pid: 300, ppid: 1, cmd: 'postgres: postgres db' },
    ];
    const result: Attribution = attribute(
      procs,
      [
        { key: '200:7', at: 2000, cpu: 1.5 }, // a's
        { key: '201:8', at: 4000, cpu: 0.5 }, // a's, through its parent
        { key: '200:7', at: 6000, cpu: 1 }, // b's: the same server, still running when b started
        { key: '100:1', at: 6500, cpu: 0.25 }, // b's
        { key: '100:1', at: 12000, cpu: 0.1 }, // after b, beyond its teardown grace
        { key: '101:1', at: 3000, cpu: 2 }, // c's, still open
        { key: '300:9', at: 3000, cpu: 0.75 },
        { key: 'unknown:0', at: 3000, cpu: 9 }, // never seen: not counted
      ],
      spans,
    );
    expect(result.totalCpu).toBeCloseTo(6.1);
    const byFile = Object.fromEntries(result.files.map((f) => [f.file, f]));
    expect(byFile['test/a.test.ts']).toEqual({
      file: 'test/a.test.ts',
      cpu: 2,
      wall: 4,
      agentServers: 1,
      kinds: { 'agentplane agent-server': 1.5, bwrap: 0.5 },
    });
    expect(byFile['test/b.test.ts']).toMatchObject({ cpu: 1.25, wall: 3.9, agentServers: 1 });
    expect(byFile['test/c.test.ts']).toMatchObject({ cpu: 2, wall: 0, agentServers: 0 });
    expect(byFile['(outside the workers)']).toMatchObject({ cpu: 0.75, kinds: { 'postgres backend': 0.75 } });
    expect(byFile['(a worker between files)']).toMatchObject({ cpu: 0.1 });
    expect(result.files[0]!.cpu).toBe(2);
    expect(result.kinds).toEqual([
      { kind: 'agentplane agent-server', cpu: 2.5, processes: 1 },
      { kind: 'vitest worker', cpu: 2.35, processes: 2 },
      { kind: 'postgres backend', cpu: 0.75, processes: 1 },
      { kind: 'bwrap', cpu: 0.5, processes: 1 },
    ]);
  });

  it('runs vitest on a file and charges the processes that file started to it', async ({ onTestFinished }) => {
    const dir = mkdtempSync(path.join(tmpdir(), 'suite-cpu-test-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const out = path.join(dir, 'cpu.json');
    // test/lib/http.test.ts starts two Node processes of ~1 s of CPU each (fastify apps).
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', 'scripts/suite-cpu.ts', '--out', out, 'test/lib/http.test.ts'],
      { cwd: ROOT, env: { ...process.env, CI: '' }, maxBuffer: 16 * 1024 * 1024 },
    );
    expect(stdout).toMatch(/suite CPU \(scripts\/suite-cpu\.ts\): \d+ CPU-seconds/);
    const result = JSON.parse(readFileSync(out, 'utf8')) as Attribution & { wall: number };
    const file = result.files.find((f) => f.file === 'test/lib/http.test.ts');
    expect(file, JSON.stringify(result.files)).toBeDefined();
    expect(file!.wall).toBeGreaterThan(0);
    expect(file!.kinds.node).toBeGreaterThan(0.3);
    expect(result.kinds.map((k) => k.kind)).toContain('vitest worker');
  });
});
