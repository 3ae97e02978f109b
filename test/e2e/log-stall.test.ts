// `agentplane dev` as a real process, fed by a workspace whose build prints hundreds of 8 KiB lines of the
// characters URL redaction used to backtrack on (a scheme-like run with no "://" in it): the control plane keeps
// answering other requests while the build runs and while the log is read, and log reads are paged by bytes as
// well as lines (`limit_bytes`, with the same cursor).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { TERMINAL_REVISION_PHASES, type RevisionPhase } from '../../src/resources/agent-revision.ts';
import { makeExampleRepo, type ExampleRepo } from '../operator/helpers/example-repo.ts';
import { API_KEY, TENANT, api, startDev, stopDev, waitFor, type DevProcess } from '../dev/helpers.ts';

let tmp: string;
let repo: ExampleRepo;
let attempt = 0;

beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-dev-log-stall-'));
  repo = makeExampleRepo(join(tmp, 'allowed'));
});

afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** Generous: a request that has to wait behind one quadratic redaction of an 8 KiB line batch waits for minutes. */
const ANSWER_WITHIN_MS = 10_000;

/** How long a cheap request (the deployment list) takes to answer right now. */
async function answerTime(base: string): Promise<number> {
  const t = Date.now();
  const res = await fetch(`${base}/v2/deployments?limit=1`, {
    headers: { 'X-Api-Key': API_KEY, 'X-Tenant-Id': TENANT },
    signal: AbortSignal.timeout(ANSWER_WITHIN_MS),
  }).catch((err: Error) => {
    throw new Error(`the control plane did not answer within ${ANSWER_WITHIN_MS} ms (${err.message})`);
  });
  expect(res.status).toBe(200);
  await res.arrayBuffer();
  return Date.now() - t;
}

type Page = { logs: { id: string; message: string }[]; next_offset: string | null };

describe('long build output does not stall agentplane dev', () => {
  it('answers while a build prints long lines and while its log is read; pages the log by bytes', async () => {
    // Each attempt has its own data folder and stops its own process: a retry never meets the last one's.
    const dev: DevProcess = await startDev(join(tmp, `data-${++attempt}`), 0, [
      '--allow-local-repos',
      join(tmp, 'allowed'),
    ]);
    onTestFinished(async () => {
      await stopDev(dev, 'SIGKILL');
    });
    const base = dev.url;
    // 2000 lines of 8000 letters: more than the 5 MiB log cap, so the cap's truncation line shows up too.
    const print = `node -e "const l='a'.repeat(7999)+'b';for(let i=0;i<2000;i++)console.log(l)"`;
    const created = await api(base).post('/v2/deployments', {
      name: 'long-lines',
      source: 'github',
      source_config: { deployment_type: 'dev', repo_url: repo.path, install_command: print },
      source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
    });
    expect(created.status).toBe(201);
    const logs = `/v2/deployments/${String(created.body.id)}/revisions/${String(created.body.latest_revision_id)}/logs`;

    // While the build runs, the control plane keeps answering. The wait ends at a terminal phase only: CREATING and
    // AWAITING_BUILD come before the build, and a busy machine shows them to the first poll.
    let slowest = 0;
    await waitFor(
      'the build to finish',
      async () => {
        slowest = Math.max(slowest, await answerTime(base));
        const { body } = await api(base).get(logs.replace(/\/logs$/, ''));
        const s = String(body.status);
        return TERMINAL_REVISION_PHASES.has(s as RevisionPhase) ? s : undefined;
      },
      120_000,
    );
    expect(slowest).toBeLessThan(ANSWER_WITHIN_MS);

    // Whole-log reads (1000 lines of 8 KiB asked for) while a cheap request is in flight: it still answers.
    const reads = Array.from({ length: 4 }, () => api(base).get(`${logs}?type=build&limit=1000&limit_bytes=8388608`));
    const during = await Promise.all([answerTime(base), answerTime(base)]);
    const pages = await Promise.all(reads);
    expect(Math.max(...during)).toBeLessThan(ANSWER_WITHIN_MS);
    for (const p of pages) expect(p.status).toBe(200);
    const long = (pages[0]!.body as Page).logs.filter((l) => l.message.length === 8000);
    expect(long.length).toBeGreaterThan(500);

    // Paged by bytes: 64 KiB pages hold 7 or 8 long lines each, and following next_offset gives every line once.
    const all: Page['logs'] = [];
    let cursor: string | null = null;
    let pageCount = 0;
    do {
      const q = `type=build&limit=1000&limit_bytes=65536${cursor ? `&offset=${cursor}` : ''}`;
      const { status, body } = await api(base).get(`${logs}?${q}`);
      expect(status).toBe(200);
      const page = body as Page;
      expect(page.logs.length).toBeGreaterThan(0);
      expect(page.logs.reduce((n, l) => n + Buffer.byteLength(l.message), 0)).toBeLessThanOrEqual(65536);
      all.push(...page.logs);
      cursor = page.next_offset;
      pageCount++;
    } while (cursor);
    const unpaged = await api(base).get(`${logs}?type=build&limit=1000&limit_bytes=8388608`);
    expect(all.map((l) => l.id)).toEqual((unpaged.body as Page).logs.map((l) => l.id));
    expect(pageCount).toBeGreaterThan(long.length / 8);
    expect(all.at(-1)?.message).toMatch(/log truncated/);

    // The default page stops at 1 MiB; backwards paging obeys the same cap.
    const dflt = (await api(base).get(`${logs}?type=build&limit=1000`)).body as Page;
    expect(dflt.logs.reduce((n, l) => n + Buffer.byteLength(l.message), 0)).toBeLessThanOrEqual(1024 * 1024);
    expect(dflt.next_offset).toBe(dflt.logs.at(-1)!.id);
    const back = (await api(base).get(`${logs}?type=build&limit=1000&order=desc&limit_bytes=16384`)).body as Page;
    expect(back.logs.map((l) => l.message.length)).toEqual([expect.any(Number), 8000, 8000]); // truncation line first
    expect(Number(back.logs[2]!.id)).toBeLessThan(Number(back.logs[1]!.id));
    expect(back.next_offset).toBe(back.logs[2]!.id);

    // A byte limit outside its bounds is a 422 naming it.
    const bad = await api(base).get(`${logs}?type=build&limit_bytes=10`);
    expect(bad.status).toBe(422);
    expect(JSON.stringify(bad.body)).toContain('limit_bytes');
  }, 180_000);
});
