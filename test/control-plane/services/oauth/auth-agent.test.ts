// A deployed agent uses the auth service with the credential the platform gives it: `agentplane dev` (a real
// process) builds a repository whose graph is the documented node (authenticate, interrupt with the URL when the user
// must grant first); the user grants at a real oidc-provider; the resumed run gets the token. The agent's token works
// on its own workspace's auth service only.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import Provider from 'oidc-provider';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeExampleRepo } from '../../../operator/helpers/example-repo.ts';
import {
  LINKED_INSTALL,
  TENANT,
  api,
  startDev,
  stopDev,
  waitFor,
  workspaceKey,
  type DevProcess,
} from '../../../dev/helpers.ts';
import { listen, walkGrant } from '../../helpers/oidc.ts';

/** The graph of docs/auth-service.md, reporting also what the deployment token may do elsewhere. */
const GRAPH = `
import { Annotation, END, START, StateGraph, interrupt } from '@langchain/langgraph';

const State = Annotation.Root({
  user: Annotation<string>(),
  token: Annotation<string>(),
  elsewhere: Annotation<number[]>(),
});

async function getToken(state: { user: string }) {
  const cp = process.env.AGENTPLANE_CONTROL_PLANE_URL!;
  const headers = { 'content-type': 'application/json', 'x-api-key': process.env.AGENTPLANE_DEPLOYMENT_TOKEN! };
  const res = await fetch(cp + '/v2/auth/authenticate', {
    method: 'POST',
    headers,
    body: JSON.stringify({ provider: 'idp', scopes: ['profile'], user_id: state.user }),
  });
  const auth = await res.json();
  if (auth.status === 'completed') {
    const elsewhere = [
      (await fetch(cp + '/v2/deployments', { headers })).status,
      (await fetch(cp + '/v2/auth/providers', { headers: { ...headers, 'x-tenant-id': 'someone-else' } })).status,
    ];
    return { token: auth.token, elsewhere };
  }
  interrupt({ message: 'Please grant access', url: auth.url });
  throw new Error('access was not granted');
}

export const graph = new StateGraph(State)
  .addNode('get_token', getToken)
  .addEdge(START, 'get_token')
  .addEdge('get_token', END)
  .compile();
`;

let tmp: string;
let repoPath: string;
let dev: DevProcess;
let idp: Awaited<ReturnType<typeof listen>>;
const issued: string[] = [];

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-auth-agent-'));
  const repo = makeExampleRepo(tmp);
  repoPath = repo.path;
  writeFileSync(join(repo.path, 'src', 'auth-graph.ts'), GRAPH);
  const config = JSON.parse(readFileSync(join(repo.path, 'langgraph.json'), 'utf8')) as { graphs: object };
  config.graphs = { ...config.graphs, auth: './src/auth-graph.ts:graph' };
  writeFileSync(join(repo.path, 'langgraph.json'), JSON.stringify(config, null, 2));
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], { cwd: repo.path });
  git('checkout', '--quiet', 'main');
  git('add', '-A');
  git('commit', '--quiet', '-m', 'auth graph');

  dev = await startDev(join(tmp, 'data'));
  idp = await listen();
  const provider = new Provider(idp.url, {
    clients: [
      {
        client_id: 'agent-client',
        client_secret: 'agent-client-secret-3f9e1c',
        redirect_uris: [`${dev.url}/v2/auth/callback/idp`],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
      },
    ],
    scopes: ['openid', 'offline_access', 'profile'],
    claims: { openid: ['sub'], profile: ['name'] },
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
  });
  provider.on('grant.success', (ctx) => {
    const body = ctx.body as Record<string, string>;
    if (body.access_token) issued.push(body.access_token);
  });
  idp.handle(provider.callback());
}, 120_000);

afterAll(async () => {
  if (dev) await stopDev(dev, 'SIGKILL');
  idp?.server.closeAllConnections();
  await new Promise((r) => idp?.server.close(r));
  rmSync(tmp, { recursive: true, force: true });
});

describe('an agent deployed by agentplane dev calls the auth service', () => {
  it('interrupts with the URL, the user grants, the resumed run has the token; its token is good nowhere else', async () => {
    const cp = api(dev.url);
    const created = await cp.post('/v2/auth/providers', {
      provider_id: 'idp',
      issuer_url: idp.url,
      client_id: 'agent-client',
      client_secret: 'agent-client-secret-3f9e1c',
      scopes: ['openid', 'offline_access'],
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);

    const agentKey = await workspaceKey(dev.url); // agents refuse the bootstrap key
    const dep = await cp.post('/v2/deployments', {
      name: 'auth-agent',
      source: 'github',
      // Not about the install: node_modules links to agentplane's packages (no npm ci).
      source_config: { repo_url: repoPath, install_command: LINKED_INSTALL },
      source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
    });
    expect(dep.status, JSON.stringify(dep.body)).toBe(201);
    const depId = String(dep.body.id);
    const revId = String(dep.body.latest_revision_id);
    const rev = await waitFor(`revision ${revId}`, async () => {
      const r = await cp.get(`/v2/deployments/${depId}/revisions/${revId}`);
      const s = String(r.body.status);
      return s === 'DEPLOYED' || s.includes('FAILED') ? r.body : undefined;
    });
    expect(`${rev.status} ${rev.status_message ?? ''}`).toMatch(/^DEPLOYED/);

    const url = String((await cp.get(`/v2/deployments/${depId}`)).body.url);
    const client = new Client({ apiUrl: url, apiKey: agentKey, defaultHeaders: { 'x-tenant-id': TENANT } });
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, 'auth', { input: { user: 'user-7' } });
    const paused = await client.threads.getState(thread.thread_id);
    const value = paused.tasks.flatMap((t) => t.interrupts ?? [])[0]?.value as { url: string } | undefined;
    expect(value?.url, JSON.stringify(paused)).toMatch(new RegExp(`^${dev.url}/v2/auth/start\\?state=`));

    const back = await walkGrant(value!.url, dev.url);
    expect(back.authorizeUrl).toMatch(new RegExp(`^${idp.url}/auth\\?`));
    const page = await fetch(back.url, { headers: { cookie: back.cookie } });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('You can close this page');

    const done = (await client.runs.wait(thread.thread_id, 'auth', { command: { resume: 'done' } })) as {
      token?: string;
      elsewhere?: number[];
    };
    expect(issued).toContain(done.token);
    expect(done.elsewhere).toEqual([401, 403]);
    const tokens = await cp.get('/v2/auth/tokens');
    expect(tokens.body.resources).toMatchObject([{ provider_id: 'idp', user_id: 'user-7' }]);
  });
});
