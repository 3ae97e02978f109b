// The web console in a real browser (Debian's Chromium driven by playwright-core) against a real `agentplane dev`
// process and a real git repository of the example agent: sign in, create, watch the build log live, chat in the
// playground, break the build, roll back, delete. Screenshots of the main pages are taken on the way: into a temporary
// folder, or into docs/images/ with AGENTPLANE_UPDATE_SCREENSHOTS=1 (`npm run screenshots`), so a test run leaves the
// committed ones alone.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeExampleRepo, type ExampleRepo } from '../operator/helpers/example-repo.ts';
import { API_KEY, TENANT, api, startDev, stopDev, waitFor, type DevProcess } from '../dev/helpers.ts';
import { ensureConsoleBundle } from '../support/console-bundle.ts';
import { needsTool } from '../support/system-tools.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const UPDATE_SCREENSHOTS = process.env.AGENTPLANE_UPDATE_SCREENSHOTS === '1';
const IMAGES = UPDATE_SCREENSHOTS ? join(ROOT, 'docs/images') : mkdtempSync(join(tmpdir(), 'ap-console-shots-'));
const CHROMIUM = process.env.AGENTPLANE_CHROMIUM ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = needsTool('chromium', 'test/e2e/console.test.ts');
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

let tmp: string;
let repo: ExampleRepo;
let dev: DevProcess | undefined;
let browser: Browser | undefined;
/** Everything the pages printed to their console: checked for secrets at the end. */
const browserLog: string[] = [];

beforeAll(async () => {
  if (!HAVE_CHROMIUM) return;
  // The bundle the control plane serves, from the sources of this checkout.
  ensureConsoleBundle(ROOT);
  tmp = mkdtempSync(join(tmpdir(), 'ap-console-'));
  repo = makeExampleRepo(tmp);
  addApprovalGraph(repo.path);
  dev = await startDev(join(tmp, 'data'));
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
  mkdirSync(IMAGES, { recursive: true });
});

afterAll(async () => {
  await browser?.close();
  if (dev) await stopDev(dev, 'SIGKILL');
  if (tmp) rmSync(tmp, { recursive: true, force: true });
  // The screenshots of a plain run only prove they can be taken; docs/images keeps them when updating.
  if (!UPDATE_SCREENSHOTS) rmSync(IMAGES, { recursive: true, force: true });
});

/** A second graph on main whose state has no `messages` and which asks a human (interrupt) before it finishes. */
function addApprovalGraph(dir: string): void {
  writeFileSync(
    join(dir, 'src/approve.ts'),
    [
      "import { Annotation, END, START, StateGraph, interrupt } from '@langchain/langgraph';",
      'const State = Annotation.Root({ request: Annotation<string>, decision: Annotation<string> });',
      'export const graph = new StateGraph(State)',
      "  .addNode('ask', (s: typeof State.State) => ({ decision: String(interrupt({ question: `Approve ${s.request}?` })) }))",
      "  .addEdge(START, 'ask')",
      "  .addEdge('ask', END)",
      '  .compile();',
      '',
    ].join('\n'),
  );
  const config = JSON.parse(readFileSync(join(dir, 'langgraph.json'), 'utf8')) as { graphs: Record<string, string> };
  config.graphs.approve = './src/approve.ts:graph';
  writeFileSync(join(dir, 'langgraph.json'), JSON.stringify(config, null, 2));
  const env = {
    ...process.env,
    GIT_AUTHOR_NAME: 't',
    GIT_AUTHOR_EMAIL: 't@example.com',
    GIT_COMMITTER_NAME: 't',
    GIT_COMMITTER_EMAIL: 't@example.com',
  };
  execFileSync('git', ['add', '-A'], { cwd: dir, env });
  execFileSync('git', ['commit', '--quiet', '-m', 'approval graph'], { cwd: dir, env });
}

async function newPage(width = 1280, height = 860): Promise<Page> {
  const page = await browser!.newPage({ viewport: { width, height } });
  page.setDefaultTimeout(30_000);
  page.on('console', (m) => browserLog.push(m.text()));
  page.on('pageerror', (e) => browserLog.push(`pageerror: ${e.message}`));
  return page;
}

async function signIn(page: Page, key: string, tenant = TENANT): Promise<void> {
  await page.goto(`${dev!.url}/`);
  await page.getByLabel('Workspace id').fill(tenant);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

const shot = (page: Page, name: string) => page.screenshot({ path: join(IMAGES, `console-${name}.png`) });

/** Status badge text of revision n in the timeline. */
const revisionStatus = (page: Page, n: number) =>
  page.locator(`li[data-revision="${n}"] .rev-head .badge`).first().textContent();

describe('web console in Chromium', () => {
  it('refuses a wrong key with a message, and serves the same page under /api-host/', async () => {
    const page = await newPage();
    await signIn(page, 'not-a-real-key-0123456789');
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('Sign-in failed');
    await shot(page, 'sign-in');
    await page.goto(`${dev!.url}/api-host`);
    expect(new URL(page.url()).pathname).toBe('/api-host/');
    await expect.poll(() => page.getByRole('heading', { name: 'agentplane console' }).count()).toBe(1);
    await page.close();
  });

  it('creates, follows the build live, chats with a tool call, breaks, rolls back and deletes', async () => {
    const cp = api(dev!.url);
    const page = await newPage();
    await signIn(page, API_KEY);
    await expect.poll(() => page.getByRole('heading', { name: 'Deployments' }).count()).toBe(1);

    // The API's 422 lands next to the field it names.
    await page.getByRole('link', { name: 'New deployment' }).first().click();
    await page.getByLabel('Name', { exact: true }).fill('hello-console');
    await page.getByRole('button', { name: 'Create deployment' }).click();
    await expect.poll(() => page.locator('[data-field="source_config.repo_url"]').textContent()).toContain('required');

    await page.getByLabel('Repository URL').fill(repo.path);
    await page.getByLabel('Git ref').fill('main');
    await page.getByLabel('langgraph.json path').fill('langgraph.json');
    await page.getByRole('button', { name: 'Add secret' }).click();
    await page.locator('.secret-row input').nth(0).fill('CONSOLE_SECRET');
    await page.locator('.secret-row input').nth(1).fill('never-shown-4711');
    await page.getByRole('button', { name: 'Create deployment' }).click();
    await page.waitForURL(/#\/deployments\/[0-9a-f-]+$/);
    const depId = decodeURIComponent(page.url().split('/').pop()!);

    // Log lines show up while the revision is still building (sampled from the page, not from the API).
    const samples: { status: string; lines: number }[] = [];
    await waitFor(
      'revision 1 to be DEPLOYED in the page',
      async () => {
        const status = (await revisionStatus(page, 1)) ?? '';
        const lines = await page.locator('.log-box .log-line').count();
        samples.push({ status, lines });
        if (status.includes('FAILED'))
          throw new Error(`revision 1 ${status}: ${await page.locator('.log-box').textContent()}`);
        return status === 'DEPLOYED' ? true : undefined;
      },
      240_000,
    );
    const whileBuilding = samples.filter((s) => s.status === 'BUILDING' && s.lines > 0).map((s) => s.lines);
    expect(whileBuilding.length, JSON.stringify(samples.slice(-5))).toBeGreaterThan(0);
    // More lines arrived after the first ones were shown, without reloading the page.
    expect(await page.locator('.log-box .log-line').count()).toBeGreaterThan(Math.min(...whileBuilding));
    // The agent lives on an origin of its own, not the console's.
    const agentUrl = String((await cp.get(`/v2/deployments/${depId}`)).body.url);
    expect(new URL(agentUrl).origin).not.toBe(new URL(dev!.url).origin);
    await expect.poll(() => page.getByTestId('deployment-url').textContent()).toBe(agentUrl);
    // Its MCP and A2A addresses, with copy-paste snippets.
    expect(await page.getByTestId('mcp-url').textContent()).toBe(`${agentUrl}/mcp`);
    expect(await page.getByTestId('a2a-url').textContent()).toBe(`${agentUrl}/a2a/agent`);
    // Search narrows the log.
    await page.getByLabel('Search the log').fill('npm');
    await expect.poll(() => page.locator('.log-tools').textContent()).toMatch(/\d+ of \d+ lines/);
    await page.getByLabel('Search the log').fill('');
    // Secret names are listed, values never.
    await expect
      .poll(() => page.locator('form[aria-labelledby="settings-title"]').textContent())
      .toContain('CONSOLE_SECRET');
    expect(await page.content()).not.toContain('never-shown-4711');
    await shot(page, 'deployment');

    // Playground: the SDK in the page streams a run; the tool call and its result are shown. Every call to the agent
    // carries a short-lived access token for this deployment, never the key the person signed in with.
    const agentKeys: string[] = [];
    page.on('request', (r) => {
      if (r.url().startsWith(agentUrl) && r.method() !== 'OPTIONS') agentKeys.push(r.headers()['x-api-key'] ?? '');
    });
    await page.getByRole('link', { name: 'Open playground' }).click();
    await expect.poll(() => page.getByTestId('agent-origin').textContent()).toContain(agentUrl);
    await expect.poll(() => page.locator('select[aria-label="Assistant"] option').count(), { timeout: 30_000 }).toBe(2);
    await page.getByLabel('Assistant').selectOption({ label: 'agent' });
    const streamed = page.waitForResponse((r) => r.url().includes('/runs/stream') && r.status() === 200);
    await page.getByLabel('Message').fill('Ada');
    await page.getByLabel('Message').press('Enter');
    await streamed;
    await expect
      .poll(() => page.locator('.tool-call').first().textContent(), { timeout: 60_000 })
      .toContain('lookup_greeting');
    await expect.poll(() => page.locator('.tool-result').first().textContent()).toContain('Hello, Ada!');
    await expect.poll(() => page.locator('.msg.ai').last().textContent()).toBe('The greeting tool says: Hello, Ada!');
    // The thread appears in the list, its state and checkpoints are shown.
    await expect.poll(() => page.locator('.threads li button').count()).toBeGreaterThan(0);
    await expect.poll(() => page.locator('.history li').count()).toBeGreaterThan(1);
    await shot(page, 'playground');
    expect(agentKeys.length).toBeGreaterThan(0);
    for (const key of agentKeys) {
      expect(key).toMatch(/^apa_/);
      expect(key).not.toContain(API_KEY);
    }

    // A graph without `messages`: JSON in, streamed values out; its interrupt is answered from the page.
    await page.getByLabel('Assistant').selectOption({ label: 'approve' });
    await page.getByLabel('JSON input').fill('{"request": "the release"}');
    await page.getByRole('button', { name: 'Send' }).click();
    await expect
      .poll(() => page.locator('.interrupt').textContent(), { timeout: 60_000 })
      .toContain('Approve the release?');
    await page.getByLabel(/Resume with/).fill('"yes"');
    await page.getByRole('button', { name: 'Resume' }).click();
    await expect.poll(() => page.locator('.interrupt').count(), { timeout: 60_000 }).toBe(0);
    await expect.poll(() => page.locator('.state').textContent()).toContain('"yes"');
    await expect.poll(() => page.locator('.values').textContent()).toContain('decision');

    // A broken ref: the page says a revision will be built, then shows BUILD_FAILED and the failing log line.
    await page.goto(`${dev!.url}/#/deployments/${depId}`);
    await page.getByLabel('Git ref').fill('broken-install');
    await expect.poll(() => page.locator('.will-build').textContent()).toContain('creates revision #2');
    await page.getByRole('button', { name: 'Save and build #2' }).click();
    await expect.poll(() => page.locator('li[data-revision="2"]').count()).toBe(1);
    await page.locator('li[data-revision="2"] .rev-head a').click();
    await expect.poll(() => revisionStatus(page, 2), { timeout: 180_000, interval: 500 }).toBe('BUILD_FAILED');
    const failed = (await cp.get(`/v2/deployments/${depId}/revisions?limit=1`)).body.resources[0] as {
      status_message: string;
    };
    await expect.poll(() => page.locator('li[data-revision="2"] .rev-msg').textContent()).toBe(failed.status_message);
    await expect.poll(() => page.locator('.log-box').textContent()).toMatch(/npm (error|ERR!)/);
    await expect.poll(() => page.locator('.log-box').textContent()).toContain('build failed');
    await shot(page, 'build-failed');

    // Roll back to #1 through the confirmation dialog.
    await page.locator('li[data-revision="1"]').getByRole('button', { name: 'Roll back to #1' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Deploy #1' }).click();
    await expect.poll(() => page.locator('.notice').textContent()).toContain('Traffic goes to revision #1');
    const dep = (await cp.get(`/v2/deployments/${depId}`)).body;
    const r1 = (await cp.get(`/v2/deployments/${depId}/revisions?limit=100`)).body.resources.find(
      (r: { revision_number: number }) => r.revision_number === 1,
    );
    expect(dep.active_revision_id).toBe(r1.id);

    // The list with filters.
    await page.goto(`${dev!.url}/#/`);
    await expect.poll(() => page.locator('tr[data-deployment="hello-console"]').count()).toBe(1);
    await expect.poll(() => page.locator('tr[data-deployment="hello-console"] td').nth(2).textContent()).toBe('#1');
    await shot(page, 'deployments');
    await page.getByLabel('Name contains').fill('no-such-name');
    await expect.poll(() => page.locator('tr[data-deployment]').count()).toBe(0);

    // Delete: the button stays disabled until the name is typed.
    await page.goto(`${dev!.url}/#/deployments/${depId}`);
    await page.getByRole('button', { name: 'Delete deployment…' }).click();
    const confirm = page.getByRole('dialog').getByRole('button', { name: 'Delete' });
    expect(await confirm.isDisabled()).toBe(true);
    await page.getByLabel(/Type .* to confirm/).fill('hello-console');
    await confirm.click();
    await page.waitForURL(/#\/$/);
    await waitFor('the deployment to be gone', async () =>
      (await cp.get(`/v2/deployments/${depId}`)).status === 404 ? true : undefined,
    );

    // Phone width: the deployment list still fits (no horizontal scroll of the page).
    const phone = await newPage(390, 800);
    await signIn(phone, API_KEY);
    await expect.poll(() => phone.getByRole('heading', { name: 'Deployments' }).count()).toBe(1);
    expect(await phone.evaluate('document.documentElement.scrollWidth <= window.innerWidth + 1')).toBe(true);

    // No secret value or key ever reached a page's console.
    for (const secret of ['never-shown-4711', API_KEY]) expect(browserLog.join('\n')).not.toContain(secret);
    await page.close();
    await phone.close();
  }, 420_000);
});
