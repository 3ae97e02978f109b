// Log lines are JSON unless a person reads them: on a terminal (or with AGENTPLANE_LOG_FORMAT=pretty) one readable
// line each, as pino's tooling prints them. Real processes, since the choice is made from the process's stdout.
import { execFile } from 'node:child_process';
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

  it('writes one readable line with AGENTPLANE_LOG_FORMAT=pretty', async () => {
    const out = await logLine('pretty');
    expect(out.trim().split('\n')).toHaveLength(1);
    expect(out).toMatch(/^\[\d\d:\d\d:\d\d\] INFO \(dev\): traffic moved .*"component":"operator".*"revision":"r1"/);
    expect(() => JSON.parse(out)).toThrow();
  });
});
