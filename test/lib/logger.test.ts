// Log lines are JSON unless a person reads them: on a terminal (or with AGENTPLANE_LOG_FORMAT=pretty) one readable
// line each, as pino's tooling prints them. Real processes, since the choice is made from the process's stdout.
import { execFile, spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const script = `
  const { createLogger } = await import(${JSON.stringify(path.join(ROOT, 'src/lib/logger.ts'))});
  createLogger({ name: 'dev' }).child({ component: 'operator' }).info({ revision: 'r1' }, 'traffic moved');
`;
const logLine = async (format?: string, code = script) => {
  const env = { ...process.env, AGENTPLANE_LOG_FORMAT: format ?? '' };
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', '--input-type=module', '-e', code],
    { cwd: ROOT, env },
  ).catch((err: { stdout?: string; signal?: string }) => {
    if (err.signal !== 'SIGKILL') throw err;
    return { stdout: err.stdout ?? '' };
  });
  return stdout;
};

describe('createLogger', () => {
  it('writes JSON to a pipe, and with AGENTPLANE_LOG_FORMAT=json', async () => {
    for (const format of [undefined, 'json']) {
      const line = JSON.parse(await logLine(format)) as Record<string, unknown>;
      expect(line).toMatchObject({
        level: 'info',
        name: 'dev',
        component: 'operator',
        revision: 'r1',
        msg: 'traffic moved',
      });
    }
  });

  // A process killed right after it logged (an out-of-memory kill, kill -9) must not take its last lines with it:
  // the line that says why is usually the last one. Lines are written as they are logged, not queued for later.
  it('a line is on stdout once it is logged: a kill -9 right after loses none', async () => {
    const killed = `
      const { createLogger } = await import(${JSON.stringify(path.join(ROOT, 'src/lib/logger.ts'))});
      const log = createLogger({ name: 'dev' });
      for (let i = 1; i <= 3; i++) log.info({ i }, 'before the kill');
      process.kill(process.pid, 'SIGKILL');
    `;
    const lines = (await logLine(undefined, killed)).trim().split('\n');
    expect(lines.map((l) => (JSON.parse(l) as { i: number }).i)).toEqual([1, 2, 3]);
  });

  // ...and a reader that is slow to take them (a full pipe) does not stop the process: what the pipe cannot take yet
  // waits in memory, and all of it arrives in order once the reader reads again.
  it('a full stdout pipe does not stop the process; every line arrives in order', async () => {
    const lines = 300; // ~600 KB: many times what a pipe holds
    const code = `
      const { createLogger } = await import(${JSON.stringify(path.join(ROOT, 'src/lib/logger.ts'))});
      const log = createLogger({ name: 'dev' });
      for (let i = 1; i <= ${lines}; i++) log.info({ i, pad: 'x'.repeat(2000) }, 'line');
      process.stderr.write('logged all\\n');
    `;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], {
      cwd: ROOT,
      env: { ...process.env, AGENTPLANE_LOG_FORMAT: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
    // Nobody reads stdout until the child says it logged everything.
    let err = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the child stopped while its stdout was full:\n${err}`)), 30_000);
      child.stderr.on('data', (d: Buffer) => {
        err += d.toString();
        if (err.includes('logged all')) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    let out = '';
    const closed = new Promise((r) => child.stdout.once('close', r));
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    expect(await exited).toBe(0);
    await closed;
    const got = out
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { i: number }).i);
    expect(got).toEqual(Array.from({ length: lines }, (_, k) => k + 1));
  });

  it('writes one readable line with AGENTPLANE_LOG_FORMAT=pretty', async () => {
    const out = await logLine('pretty');
    expect(out.trim().split('\n')).toHaveLength(1);
    expect(out).toMatch(/^\[\d\d:\d\d:\d\d\] INFO \(dev\): traffic moved .*"component":"operator".*"revision":"r1"/);
    expect(() => JSON.parse(out)).toThrow();
  });
});
