// The console's status and detail behaviours in a real browser (Debian's Chromium driven by playwright-core) against
// a real control plane serving the console bundle built from this checkout. The test plays the operator: it writes
// revision statuses, the serving revision and log lines into the real store, so every state is reached at once.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createControlPlane } from '../../src/control-plane/app.ts';
import { openEmbeddedPlatformState } from '../../src/state/embedded/index.ts';
import type { PlatformState } from '../../src/state/types.ts';
import { silentLogger } from '../../src/lib/logger.ts';
import { deploymentName, revisionName } from '../../src/resources/index.ts';
import { githubBody } from '../control-plane/helpers/harness.ts';
import { serve, setRevision } from '../control-plane/helpers/operator-role.ts';
import { ensureConsoleBundle } from '../support/console-bundle.ts';
import { needsTool } from '../support/system-tools.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const CHROMIUM = process.env.AGENTPLANE_CHROMIUM ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = needsTool('chromium', 'test/console/status.test.ts');
const KEY = 'console-status-key-0123456789';
const TENANT = 'tenant-a';
/** A start failure as the runtime words it: two lines, the user's own file:line:column on the second. */
const CRASH = 'agent server exited with code 1 before becoming healthy:\nsrc/agent.ts:3:19: no model configured';
/** A name with a 90-character run and no break: it must wrap in the list and in the delete dialog. */
const LONG = `a-very-long-deployment-name-${'x'.repeat(90)}`;

let dir: string;
let store: PlatformState;
let app: FastifyInstance;
let url: string;
let browser: Browser;
/** One signed-in tab shared by the desktop-width tests (signing in per test costs seconds on a busy machine). */
let desk: Page;
const ids: Record<string, string> = {};

async function call(method: 'GET' | 'POST' | 'PATCH', path: string, body?: object) {
  const res = await app.inject({
    method,
    url: path,
    headers: { 'x-api-key': KEY, 'x-tenant-id': TENANT },
    ...(body ? { payload: body } : {}),
  });
  expect(res.statusCode, res.body).toBeLessThan(300);
  return res.json() as Record<string, any>;
}

const create = async (name: string) => (ids[name] = (await call('POST', '/v2/deployments', githubBody(name))).id);
const newRevision = (name: string, ref: string) =>
  call('PATCH', `/v2/deployments/${ids[name]}`, { source_revision_config: { repo_ref: ref } });

beforeAll(async () => {
  ensureConsoleBundle(ROOT);
  if (!HAVE_CHROMIUM) return;
  dir = mkdtempSync(join(tmpdir(), 'ap-console-status-'));
  store = openEmbeddedPlatformState({ dataDir: dir });
  app = await createControlPlane({
    store,
    logger: silentLogger(),
    bootstrapKeys: [{ key: KEY, tenants: ['*'] }],
    consoleDir: join(ROOT, 'dist/console'),
  });
  url = await app.listen({ host: '127.0.0.1', port: 0 });

  // serving: #1 serves. rolled: #1 then #2 DEPLOYED, #2 serves. building: #2 builds while #1 serves.
  // broken: #2 BUILD_FAILED while #1 serves. never: #1 DEPLOY_FAILED, nothing serves.
  for (const name of ['serving', 'rolled', 'building', 'broken']) {
    await create(name);
    await setRevision(store, ids[name]!, 1, 'DEPLOYED', 'Serving traffic.');
    await serve(store, ids[name]!, 1);
  }
  await newRevision('rolled', 'v2');
  await setRevision(store, ids.rolled!, 2, 'DEPLOYED', 'Serving traffic.');
  await serve(store, ids.rolled!, 2);
  await newRevision('building', 'next');
  await setRevision(store, ids.building!, 2, 'BUILDING', 'Building from next.');
  await newRevision('broken', 'broken');
  await setRevision(store, ids.broken!, 2, 'BUILD_FAILED', 'npm ci exited with code 1');
  await create(LONG);
  await create('never');
  await setRevision(store, ids.never!, 1, 'DEPLOY_FAILED', CRASH);
  // What the agent server printed as it died: pino's JSON line with the serialized error (type, message, stack).
  await store.appendLogs('default', revisionName(deploymentName(ids.never!), 1), 'deploy', [
    JSON.stringify({
      level: 60,
      time: Date.parse('2026-11-25T10:11:14.000Z'),
      msg: 'no graph could be loaded',
      err: {
        type: 'GraphConfigError',
        message: 'no model configured',
        stack:
          'GraphConfigError: no model configured\n    at file:///srv/app/src/agent.ts:3:19\n    at main (node:internal)',
      },
    }),
  ]);
  const r1 = revisionName(deploymentName(ids.serving!), 1);
  await store.appendLogs('default', r1, 'deploy', [
    JSON.stringify({
      level: 30,
      time: Date.parse('2026-11-25T10:11:12.345Z'),
      pid: 7,
      hostname: 'h',
      msg: 'server listening',
      port: 8123,
    }),
    JSON.stringify({
      level: 50,
      time: Date.parse('2026-11-25T10:11:13.000Z'),
      msg: 'graph failed to load',
      graph: 'agent',
    }),
    'plain text line',
  ]);

  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
  });
  desk = await signedIn();
}, 120_000);

afterAll(async () => {
  await desk?.close();
  await browser?.close();
  await app?.close();
  await store?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function signedIn(width = 1280, height = 860): Promise<Page> {
  const page = await browser.newPage({ viewport: { width, height } });
  page.setDefaultTimeout(20_000);
  await page.goto(`${url}/`);
  await page.getByLabel('Workspace id').fill(TENANT);
  await page.getByLabel('API key').fill(KEY);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Deployments' }).waitFor();
  return page;
}

/** The element fields the checks read (this file is compiled without the DOM library). */
type Box = { scrollWidth: number; clientWidth: number };

const row = (page: Page, name: string) => page.locator(`tr[data-deployment="${name}"]`);
const badge = (page: Page, name: string) => row(page, name).locator('td.state .badge').first();
const shownNames = async (page: Page) =>
  (
    await page
      .locator('tr[data-deployment]')
      .evaluateAll((rs: { dataset: Record<string, string | undefined> }[]) => rs.map((r) => r.dataset.deployment))
  ).sort();

describe('console: a truthful deployment status', () => {
  it('list badges say serving / building / failed and why, never AWAITING_DATABASE; the filter finds each', async () => {
    const page = desk;
    await page.goto(`${url}/#/`);
    await expect.poll(() => page.locator('tr[data-deployment]').count()).toBe(6);
    expect(await badge(page, 'serving').textContent()).toBe('Serving #1');
    expect(await badge(page, 'rolled').textContent()).toBe('Serving #2');
    expect(await badge(page, 'building').textContent()).toBe('Building #2');
    expect(await row(page, 'building').locator('td.state').textContent()).toContain('serving #1');
    expect(await badge(page, 'broken').textContent()).toBe('Failed: BUILD_FAILED');
    expect(await row(page, 'broken').locator('.state-why').textContent()).toBe('npm ci exited with code 1');
    expect(await badge(page, 'never').textContent()).toBe('Failed: DEPLOY_FAILED');
    expect(await badge(page, 'never').getAttribute('class')).toContain('bad');
    expect(await page.locator('table').textContent()).not.toContain('AWAITING_DATABASE');

    const filter = page.locator('.filters select');
    await filter.selectOption('failed');
    await expect.poll(() => shownNames(page)).toEqual(['broken', 'never']);
    await filter.selectOption('building');
    await expect.poll(() => shownNames(page)).toEqual([LONG, 'building']);
    await filter.selectOption('serving');
    await expect.poll(() => shownNames(page)).toEqual(['rolled', 'serving']);
  });

  it('an old revision no longer reads "Serving traffic"; Redeploy only on DEPLOYED revisions', async () => {
    const page = desk;
    await page.goto(`${url}/#/`);
    await page.goto(`${url}/#/deployments/${ids.rolled}`);
    await expect
      .poll(() => page.locator('li[data-revision="1"] .rev-msg').textContent())
      .toBe('Not serving: traffic goes to #2.');
    expect(await page.locator('li[data-revision="2"] .rev-msg').textContent()).toBe('Serving traffic.');
    expect(await page.locator('h1 .badge').first().textContent()).toBe('Serving #2');
    expect(await page.locator('li[data-revision="1"]').getByRole('button', { name: 'Roll back to #1' }).count()).toBe(
      1,
    );

    await page.goto(`${url}/#/deployments/${ids.never}`);
    await expect.poll(() => page.locator('li[data-revision="1"] .badge').first().textContent()).toBe('DEPLOY_FAILED');
    expect(await page.locator('li[data-revision="1"] button').count()).toBe(0);
    // It failed to start: it opens on the deploy log, not on the build's "build complete".
    expect(await page.getByRole('tab', { name: 'deploy' }).getAttribute('aria-selected')).toBe('true');
    expect(await page.getByRole('tab', { name: 'build' }).getAttribute('aria-selected')).toBe('false');
  });

  it('a failed start reads as text: the reason keeps its lines, the logged error is no JSON blob', async () => {
    const page = desk;
    await page.goto(`${url}/#/`);
    await page.goto(`${url}/#/deployments/${ids.never}`);
    // innerText is what a person sees: a line break the page collapsed would read as a space.
    const state = page.getByTestId('state-message');
    await expect.poll(() => state.innerText()).toBe(CRASH);
    expect(await page.locator('li[data-revision="1"] .rev-msg').innerText()).toBe(CRASH);
    const line = page.locator('.log-box .log-line');
    await expect.poll(() => line.count()).toBe(1);
    expect(await line.locator('.msg').textContent()).toBe('no graph could be loaded');
    const shown = await line.innerText();
    expect(shown).not.toMatch(/[{}"]|stack/);
    expect(await line.locator('.error-text').innerText()).toBe(
      'GraphConfigError: no model configured\n    at file:///srv/app/src/agent.ts:3:19\n    at main (node:internal)',
    );
    // The build ended fine: the build tab of the same revision is still a click away.
    await page.getByRole('tab', { name: 'build' }).click();
    await expect.poll(() => page.locator('.logs').getAttribute('data-log-type')).toBe('build');
  });

  it('Follow is off on a finished revision and on for one still building', async () => {
    const page = desk;
    await page.goto(`${url}/#/`);
    await page.goto(`${url}/#/deployments/${ids.building}`);
    const follow = page.locator('.log-tools input[type="checkbox"]');
    await expect.poll(() => page.locator('.logs').count()).toBe(1);
    expect(await follow.isChecked()).toBe(true); // revision #2, BUILDING, selected first
    await page.locator('li[data-revision="1"] .rev-head a').click();
    await expect.poll(() => page.locator('.card.grow h2').textContent()).toContain('revision #1');
    expect(await follow.isChecked()).toBe(false);
  });

  it('JSON log lines read as level, time and message; the raw line is a click away', async () => {
    const page = desk;
    await page.goto(`${url}/#/`);
    await page.goto(`${url}/#/deployments/${ids.serving}`);
    await page.getByRole('tab', { name: 'deploy' }).click();
    const lines = page.locator('.log-box .log-line');
    await expect.poll(() => lines.count()).toBe(3);
    const first = lines.nth(0);
    expect(await first.locator('.lvl').textContent()).toBe('INFO');
    expect(await first.locator('.msg').textContent()).toBe('server listening');
    expect(await first.locator('.extra').textContent()).toBe(' port=8123');
    expect(await first.textContent()).not.toContain('"msg"');
    expect(await lines.nth(1).getAttribute('data-level')).toBe('error');
    expect(await lines.nth(2).textContent()).toContain('plain text line');
    await first.getByRole('button', { name: 'raw' }).click();
    expect(await first.locator('.raw').textContent()).toContain('"msg":"server listening"');
  });
});

describe('console details', () => {
  it('the create form says "required", not the validator\'s words', async () => {
    const page = desk;
    await page.goto(`${url}/#/`);
    await page.getByRole('link', { name: 'New deployment' }).first().click();
    await page.getByRole('button', { name: 'Create deployment' }).click();
    const nameError = page.locator('[data-field="name"]');
    await expect.poll(() => nameError.textContent()).toBe('required');
    expect(await page.locator('[data-field="source_config.repo_url"]').textContent()).toBe('required');
    expect(await page.locator('form').textContent()).not.toMatch(/Too small|expected string|>=1/);
  });

  it('the settings confirmation shows beside Save, in view', async () => {
    const page = desk;
    await page.setViewportSize({ width: 1280, height: 700 });
    await page.goto(`${url}/#/deployments/${ids.serving}`);
    const settings = page.locator('form[aria-labelledby="settings-title"]');
    await settings.getByLabel('Install command').fill('npm ci --omit=dev');
    await settings.getByRole('button', { name: 'Save' }).click();
    const saved = page.getByTestId('settings-saved');
    await expect.poll(() => saved.textContent()).toBe('Saved: the next revision uses these settings.');
    const rect = await saved.boundingBox();
    const inView = rect !== null && rect.y >= 0 && rect.y + rect.height <= 700;
    expect(inView).toBe(true);
    await page.setViewportSize({ width: 1280, height: 860 });
  });

  it('the delete dialog keeps a long name inside its width', async () => {
    const page = desk;
    await page.goto(`${url}/#/`);
    await page.goto(`${url}/#/deployments/${ids[LONG]}`);
    await page.getByRole('button', { name: 'Delete deployment…' }).click();
    const dialog = page.getByRole('dialog');
    await expect.poll(() => dialog.count()).toBe(1);
    const fits = await dialog.evaluate((d: Box) => d.scrollWidth <= d.clientWidth);
    expect(fits).toBe(true);
    const input = await dialog.locator('input').boundingBox();
    const box = await dialog.boundingBox();
    expect(input!.x + input!.width).toBeLessThanOrEqual(box!.x + box!.width);
    await page.keyboard.press('Escape');
  });

  it('at phone width the list shows each URL under its name and does not scroll sideways', async () => {
    const page = await signedIn(390, 800);
    await expect.poll(() => row(page, 'serving').count()).toBe(1);
    const under = row(page, 'serving').locator('.url-under');
    expect(await under.isVisible()).toBe(true);
    expect(await under.textContent()).toContain(ids.serving);
    expect(await row(page, 'serving').locator('td.col-url').isVisible()).toBe(false);
    expect(await page.locator('.table-wrap').evaluate((w: Box) => w.scrollWidth <= w.clientWidth + 1)).toBe(true);
    await page.close();
  });

  it('playground checkpoints carry one number (their step), not a list number too', async () => {
    const page = desk;
    await page.goto(`${url}/#/`);
    await page.goto(`${url}/#/deployments/${ids.serving}/playground`);
    await expect.poll(() => page.locator('ol.history').count()).toBe(1);
    expect(await page.evaluate("getComputedStyle(document.querySelector('ol.history')).listStyleType")).toBe('none');
  });
});
