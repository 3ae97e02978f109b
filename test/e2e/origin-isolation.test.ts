// Issue 23, items 1 and 2, tried as an attacker with a workspace on a shared `agentplane dev` would: an agent whose
// custom route serves a page that reads the console's signed-in session and registers a service worker over the
// console's origin (real Chromium), cookies aimed at the platform's paths, and agent code (custom auth, a graph)
// that harvests every header, its environment and its run config for the platform's keys.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findTool, needsTool } from '../support/system-tools.ts';
import {
  API_KEY,
  LINKED_INSTALL,
  TENANT,
  api,
  startDev,
  stopDev,
  waitFor,
  workspaceKey,
  type DevProcess,
} from '../dev/helpers.ts';

const FIXTURES = resolve(import.meta.dirname, '../dev/fixtures');
const CHROMIUM = process.env.AGENTPLANE_CHROMIUM ?? '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'];

let tmp: string;
let repo: string;
let dev: DevProcess;
let browser: Browser | undefined;
/** Keys tenant code must never see: the bootstrap key, an admin ('*') key, another workspace's key. */
const foreign: Record<string, string> = { bootstrap: API_KEY };
let ownKey: string;

function git(...args: string[]): void {
  execFileSync('git', args, {
    cwd: repo,
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: 't',
      GIT_AUTHOR_EMAIL: 't@e',
      GIT_COMMITTER_NAME: 't',
      GIT_COMMITTER_EMAIL: 't@e',
    },
  });
}

async function adminKey(tenants: string[]): Promise<string> {
  const res = await api(dev.url).post('/v2/api-keys', { name: 'k', tenants });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return String(res.body.key);
}

async function deploy(name: string, config: string): Promise<string> {
  const cp = api(dev.url);
  const created = await cp.post('/v2/deployments', {
    name,
    source: 'github',
    source_config: { repo_url: repo, install_command: LINKED_INSTALL },
    source_revision_config: { repo_ref: 'main', graph_config_path: config },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const depId = String(created.body.id);
  const revId = String(created.body.latest_revision_id);
  const rev = await waitFor(`${name} deployed`, async () => {
    const { body } = await cp.get(`/v2/deployments/${depId}/revisions/${revId}`);
    return body.status === 'DEPLOYED' || String(body.status).includes('FAILED') ? body : undefined;
  });
  expect(`${rev.status} ${rev.status_message ?? ''}`).toMatch(/^DEPLOYED/);
  return depId;
}

const urlOf = async (depId: string) => String((await api(dev.url).get(`/v2/deployments/${depId}`)).body.url);

async function status(url: string, headers: Record<string, string>): Promise<number> {
  const res = await fetch(`${url}/threads/search`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: '{}',
  });
  await res.arrayBuffer();
  return res.status;
}

let probeId: string;
let plainId: string;

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-origin-'));
  repo = join(tmp, 'repo');
  cpSync(join(FIXTURES, 'tenant-probe'), repo, { recursive: true });
  for (const f of ['package.json', 'package-lock.json']) cpSync(join(FIXTURES, 'platform-app', f), join(repo, f));
  git('init', '--quiet', '-b', 'main');
  git('add', '-A');
  git('commit', '--quiet', '-m', 'tenant probe');
  dev = await startDev(join(tmp, 'data'), 0, ['--agent-ports', 'auto']);
  ownKey = await workspaceKey(dev.url);
  foreign.admin = await adminKey(['*']);
  foreign.otherWorkspace = await workspaceKey(dev.url, 'other-team');
  foreign.twoWorkspaces = await adminKey([TENANT, 'other-team']);
  // custom auth + a custom route (every header reaches tenant code), and the platform's key check alone
  [probeId, plainId] = await Promise.all([deploy('probe', 'probe.json'), deploy('plain', 'plain.json')]);
  if (findTool('chromium')) browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
}, 300_000);

afterAll(async () => {
  await browser?.close();
  if (dev) await stopDev(dev, 'SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
});

describe('tenant pages never run in the console origin', () => {
  needsTool('chromium', 'test/e2e/origin-isolation.test.ts (its Chromium tests)');
  it("a page served by an agent reads no session and puts no service worker over the console's origin", async () => {
    const probeUrl = await urlOf(probeId);
    expect(new URL(probeUrl).origin).not.toBe(new URL(dev.url).origin);
    expect(new URL(probeUrl).origin).not.toBe(new URL(await urlOf(plainId)).origin);

    const page = await browser!.newPage();
    // Signed in to the console in this tab, as the victim is; then a link takes the same tab to the agent's page.
    await page.goto(`${dev.url}/`);
    await page.getByLabel('Workspace id').fill(TENANT);
    await page.getByLabel('API key').fill(API_KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('heading', { name: 'Deployments' }).count()).toBe(1);

    // The old address on the console's origin serves nothing of the tenant's.
    const old = await page.goto(`${dev.url}/deployments/${probeId}/app/steal`);
    expect(old!.status()).toBe(404);
    expect(await page.content()).not.toContain('sessionStorage');

    const res = await page.goto(`${probeUrl}/app/steal`);
    expect(res!.status()).toBe(200);
    const headers = await res!.allHeaders();
    expect(headers['content-security-policy']).toMatch(/(^|,|\s)sandbox allow-scripts/);
    expect(headers['content-security-policy']).not.toContain('allow-same-origin');
    expect(headers['service-worker-allowed']).toBeUndefined();
    const cookies = (await res!.headerValues('set-cookie')).join('\n');
    expect(cookies).toContain('own=kept');
    expect(cookies).not.toContain('platform=stolen');
    expect(cookies).not.toContain('everywhere=stolen');

    await expect.poll(() => page.locator('#out').textContent()).not.toBe('running');
    const seen = JSON.parse((await page.locator('#out').textContent())!) as Record<string, string | null>;
    expect(seen.session ?? '').not.toContain(API_KEY);
    expect(String(seen.worker)).toMatch(/^blocked/);

    // Back on the console: still no worker, no cookie the agent set, and the session is intact.
    await page.goto(`${dev.url}/`);
    // (Expressions as strings: this file is type-checked without the DOM library.)
    expect(await page.evaluate('navigator.serviceWorker.getRegistrations().then((r) => r.length)')).toBe(0);
    expect((await page.context().cookies(dev.url)).map((c) => c.name)).toEqual([]);
    expect(await page.evaluate("sessionStorage.getItem('agentplane.session')")).toContain(API_KEY);
    await page.close();
  });
});

describe('platform keys never reach tenant code', () => {
  it("an agent refuses the bootstrap key, admin keys and other workspaces' keys; its own workspace's key works", async () => {
    const url = await urlOf(plainId);
    expect(await status(url, { 'x-api-key': ownKey })).toBe(200);
    for (const [name, key] of Object.entries(foreign)) {
      expect([name, await status(url, { 'x-api-key': key })]).toEqual([name, 403]);
      expect([name, await status(url, { authorization: `Bearer ${key}` })]).toEqual([name, 403]);
    }
    expect(await status(url, {})).toBe(401);
  });

  it('custom auth and custom routes never see a platform key: the request stops before tenant code', async () => {
    const url = await urlOf(probeId);
    for (const key of Object.values(foreign)) {
      expect(await status(url, { 'x-api-key': key })).toBe(403);
      expect(await status(url, { authorization: `Bearer ${key}` })).toBe(403);
      expect((await fetch(`${url}/app/seen`, { headers: { 'x-api-key': key } })).status).toBe(403);
    }
    // Custom auth lets anyone in (it is the tenant's choice), and it did run: it recorded this request's headers.
    expect(await status(url, { 'x-marker': 'probe-ran' })).toBe(200);
    const harvested = JSON.stringify(await (await fetch(`${url}/app/seen`)).json());
    expect(harvested).toContain('probe-ran');
    for (const key of Object.values(foreign)) expect(harvested).not.toContain(key);
  });

  it('the environment and run config of graph code hold no key or token of the platform or another workspace', async () => {
    for (const depId of [plainId, probeId]) {
      const url = await urlOf(depId);
      // The graphs copy every header into their config (configurable_headers: ["*"]): a run sent with an admin key
      // beside the workspace key must not run at all.
      for (const key of Object.values(foreign)) {
        const leaky = new Client({
          apiUrl: url,
          apiKey: ownKey,
          defaultHeaders: { authorization: `Bearer ${key}` },
          callerOptions: { maxRetries: 0 },
        });
        await expect(leaky.runs.wait(null, 'dump', { input: {} })).rejects.toMatchObject({ status: 403 });
      }
      const client = new Client({ apiUrl: url, apiKey: ownKey, callerOptions: { maxRetries: 0 } });
      const out = (await client.runs.wait(null, 'dump', { input: {} })) as { harvest: string };
      const dump = JSON.parse(out.harvest) as { env: Record<string, string>; configurable: Record<string, unknown> };
      expect(Object.keys(dump.env).length).toBeGreaterThan(3);
      for (const key of Object.values(foreign)) expect(out.harvest).not.toContain(key);
      // Its own deployment's token (for the auth service), and nothing of another deployment's.
      expect(dump.env.AGENTPLANE_DEPLOYMENT_TOKEN).toContain(`.${depId}.`);
      const other = depId === plainId ? probeId : plainId;
      expect(out.harvest).not.toContain(`.${other}.`);
      expect(Object.keys(dump.env).filter((k) => /BOOTSTRAP|SECRET_KEY|TOKEN_KEY/.test(k))).toEqual([]);
    }
  });

  it('the access token the playground uses works on its deployment only, and only for a while', async () => {
    const cp = api(dev.url);
    const issued = await cp.post(`/v2/deployments/${plainId}/access-tokens`);
    expect(issued.status, JSON.stringify(issued.body)).toBe(200);
    const token = String(issued.body.token);
    expect(token).toMatch(/^apa_/);
    const ttl = Date.parse(String(issued.body.expires_at)) - Date.now();
    expect(ttl).toBeGreaterThan(60_000);
    expect(ttl).toBeLessThanOrEqual(15 * 60_000);
    expect(await status(await urlOf(plainId), { 'x-api-key': token })).toBe(200);
    // The probe's token does not open the plain deployment; a forged expiry breaks the signature.
    const probeToken = String((await cp.post(`/v2/deployments/${probeId}/access-tokens`)).body.token);
    expect(await status(await urlOf(plainId), { 'x-api-key': probeToken })).toBe(401);
    const [head, , sig] = token.split('.');
    expect(await status(await urlOf(plainId), { 'x-api-key': `${head}.99999999999.${sig}` })).toBe(401);
    // Not a credential of the control plane, and another workspace cannot get one.
    const asToken = await fetch(`${dev.url}/v2/deployments`, {
      headers: { 'x-api-key': token, 'x-tenant-id': TENANT },
    });
    expect(asToken.status).toBe(401);
    const stranger = await fetch(`${dev.url}/v2/deployments/${plainId}/access-tokens`, {
      method: 'POST',
      headers: { 'x-api-key': foreign.otherWorkspace!, 'x-tenant-id': 'other-team' },
    });
    expect(stranger.status).toBe(404);
  });
});
