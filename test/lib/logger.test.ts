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
const logLine = async (format?: string) => {
  const env = { ...process.env, AGENTPLANE_LOG_FORMAT: format ?? '' };
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', '--input-type=module', '-e', script],
    { cwd: ROOT, env },
  );
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

  it('writes one readable line with AGENTPLANE_LOG_FORMAT=pretty', async () => {
    const out = await logLine('pretty');
    expect(out.trim().split('\n')).toHaveLength(1);
    expect(out).toMatch(/^\[\d\d:\d\d:\d\d\] INFO \(dev\): traffic moved .*"component":"operator".*"revision":"r1"/);
    expect(() => JSON.parse(out)).toThrow();
  });
});
