// An agent's log is the workspace's text: a hostile agent prints terminal escape sequences (clear the screen, set
// the window title, write the clipboard through OSC 52, a one-byte C1 CSI, a carriage return that overwrites the
// line, a newline that forges a line of its own, a right-to-left override) and its status message quotes one.
// Whoever reads that log with the CLI (`revisions logs`, plain, --raw and --json) sees the characters as escapes;
// none reaches the terminal.
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatLogLine } from '../../src/client/log-lines.ts';
import { fakeControlPlane, type FakeControlPlane } from './helpers/fake-control-plane.ts';

const BIN = resolve(import.meta.dirname, '../../bin/agentplane.mjs');

const HOSTILE = [
  'plain \x1b[2J\x1b[H screen cleared',
  '\x1b]0;window title\x07 title set',
  '\x1b]52;c;cm0gLXJmIH4=\x07 clipboard written',
  '\x9b31m one-byte CSI',
  'progress 10%\rDEPLOYED: all good',
  'first line\nagentplane: revision 1 DEPLOYED (forged)',
  'invoice \u202egnp.exe',
  JSON.stringify({ level: 30, time: 0, msg: 'pino \x1b[31mred\x1b[0m', user: '\x1b]8;;http://evil\x07link' }),
];

/** A terminal acts on these (tab aside); none may reach it. */
// eslint-disable-next-line no-control-regex -- looking for control characters is the point
const ACTS = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

let api: FakeControlPlane;

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((res) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { env: { ...process.env, AGENTPLANE_URL: api.url, AGENTPLANE_API_KEY: 'k', AGENTPLANE_TENANT: 't' } },
      (err, stdout, stderr) => res({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

beforeAll(async () => {
  const dep = { id: 'd1', name: 'hostile', latest_revision_id: 'r1', active_revision_id: 'r1' };
  const rev = {
    id: 'r1',
    revision_number: 1,
    status: 'DEPLOY_FAILED',
    status_message: 'agent server exited: \x1b]0;owned\x07 \x9b2J',
    source_revision_config: { repo_ref: 'main' },
    created_at: '2026-01-01T00:00:00Z',
  };
  api = await fakeControlPlane({
    'GET /v2/deployments': { resources: [dep], offset: 1 },
    'GET /v2/deployments/d1/revisions/r1': rev,
    'GET /v2/deployments/d1/revisions': { resources: [rev], offset: 1 },
    'GET /v2/deployments/d1/revisions/r1/logs': {
      logs: HOSTILE.map((message, i) => ({ id: String(i + 1), message, timestamp: '2026-01-01T00:00:00Z' })),
      next_offset: null,
    },
  });
});
afterAll(async () => {
  await api.close();
});

describe('log lines and status messages a workspace wrote, printed by the CLI', () => {
  it.each([[[]], [['--raw']]])('revisions logs %j prints no character a terminal acts on', async (flags) => {
    const r = await cli(['revisions', 'logs', 'hostile', '--type', 'deploy', ...flags]);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.split('\n').filter(Boolean);
    // One line per log entry: no entry made a line of its own appear.
    expect(lines).toHaveLength(HOSTILE.length);
    for (const line of lines) expect(line).not.toMatch(ACTS);
    expect(r.stdout).toContain('\\x1b');
  });

  it('revisions logs --json keeps every character, escaped the JSON way', async () => {
    const r = await cli(['revisions', 'logs', 'hostile', '--type', 'deploy', '--json']);
    expect(r.code, r.stderr).toBe(0);
    // The layout's newlines aside.
    expect(r.stdout.replace(/\n/g, '')).not.toMatch(ACTS);
    expect((JSON.parse(r.stdout) as { message: string }[]).map((l) => l.message)).toEqual(HOSTILE);
  });

  it('revisions list shows the status message escaped', async () => {
    const r = await cli(['revisions', 'list', 'hostile']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.replace(/\n/g, '')).not.toMatch(ACTS);
    expect(r.stdout).toContain('\\x1b]0;owned\\x07');
  });

  it('formats every hostile line to printable text that still says what it said', () => {
    for (const line of HOSTILE) expect(formatLogLine(line)).not.toMatch(ACTS);
    expect(formatLogLine('progress 10%\rDEPLOYED')).toBe('progress 10%\\x0dDEPLOYED');
    expect(formatLogLine('a\u202eb')).toBe('a\\u202eb');
    expect(formatLogLine('tab\tstays')).toBe('tab\tstays');
    expect(formatLogLine(HOSTILE.at(-1)!)).toMatch(/^00:00:00 INFO {2}pino \\x1b\[31mred\\x1b\[0m user=/);
  });
});
