// Source tarballs (`langgraph deploy`'s internal_source) built in a cluster, on the API-server double under the chart's
// RBAC: the control plane (kubernetes store, tarballs in a real Postgres) takes the upload, the operator makes a build
// Job whose first step downloads the tarball from the control plane with a fetch token of that revision only; the
// test runs that step's real script against the real control plane (as the pod would), ends the Job the way the
// kubelet would report it, plays the Deployment controller, and the revision serves. Then what a hostile build (or
// anyone holding a build's token) tries: another workspace's tarball, a tampered or expired token, none at all.
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { pack } from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseControlPlaneConfig } from '../../../../src/control-plane/config.ts';
import { startControlPlane, type RunningControlPlane } from '../../../../src/control-plane/server.ts';
import { createLogger } from '../../../../src/lib/logger.ts';
import { mintSourceFetchToken, sourceFetchKey } from '../../../../src/lib/source-fetch-token.ts';
import { parseOperatorConfig } from '../../../../src/operator/config.ts';
import { startKubernetesOperator, type RunningOperator } from '../../../../src/operator/kubernetes.ts';
import { FETCH_SCRIPT } from '../../../../src/operator/runtimes/kubernetes/build-scripts.ts';
import { createTestDatabase, type TestDatabase } from '../../../support/postgres.ts';
import { operatorTestFlags, startCluster, until, type TestCluster } from '../../../support/kubernetes/cluster.ts';
import { FakeCluster } from '../../../support/kubernetes/kubelet.ts';
import { fetchToken, runFetchStep, sourceBuildJob } from '../../../support/kubernetes/source-build.ts';

const NS = 'agents';
const ADMIN = 'source-build-admin-key-7c1e3f9a';
const UPLOADS_KEY = randomBytes(32);
const logger = createLogger({ level: (process.env.TEST_LOG as 'warn') ?? 'silent', name: 'test' });

let db: TestDatabase;
let cluster: TestCluster;
let cp: RunningControlPlane;
let op: RunningOperator;
let tmp = '';

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-k8s-tarball-'));
  db = await createTestDatabase();
  cluster = await startCluster(NS, { rbac: true });
  cluster.installChartRbac();
  const env = {
    AGENTPLANE_BOOTSTRAP_API_KEY: ADMIN,
    AGENTPLANE_SOURCE_UPLOADS_DATABASE_URL: db.url,
    AGENTPLANE_SOURCE_UPLOADS_KEY: UPLOADS_KEY.toString('base64'),
    LOG_LEVEL: 'silent',
  };
  const flags = ['--kubeconfig', cluster.as('agentplane-control-plane').kubeconfigPath, '--namespace', NS];
  cp = await startControlPlane(
    parseControlPlaneConfig([...flags, '--store', 'kubernetes', '--host', '127.0.0.1', '--port', '0'], env, tmp)!,
    logger,
  );
  op = startKubernetesOperator(
    parseOperatorConfig(
      [...operatorTestFlags(cluster, NS), '--source-fetch-url', cp.url, '--log-level', 'silent', '--health-port', '0'],
      { AGENTPLANE_SOURCE_UPLOADS_KEY: UPLOADS_KEY.toString('base64') },
    )!,
    logger,
  );
}, 120_000);

afterAll(async () => {
  await op?.close();
  await cp?.close();
  await cluster?.close();
  await db?.drop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

const as = (tenant: string) => ({ 'x-api-key': ADMIN, 'x-tenant-id': tenant, 'content-type': 'application/json' });

async function api(tenant: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${cp.url}${path}`, {
    method,
    headers: as(tenant),
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : {}) as Record<string, any>, text };
}

/** A project as `langgraph deploy` packs it: langgraph.json and a graph that loads. */
async function project(marker: string): Promise<Buffer> {
  const p = pack();
  const chunks: Buffer[] = [];
  p.on('data', (c: unknown) => chunks.push(c as Buffer));
  const ended = new Promise<void>((r) => p.on('end', () => r()));
  const files: Record<string, string> = {
    'langgraph.json': JSON.stringify({ node_version: '20', graphs: { agent: './agent.mjs:graph' } }),
    'agent.mjs': `export const graph = { marker: ${JSON.stringify(marker)}, invoke: async () => ({}) };\n`,
  };
  for (const [name, body] of Object.entries(files)) p.entry({ name, mode: 0o644 }, body);
  p.finalize();
  await ended;
  return gzipSync(Buffer.concat(chunks));
}

/** upload-url, the bare PUT, the PATCH naming the object path: what the CLI does; the stored bytes' hash. */
async function deploySource(tenant: string, id: string, bytes: Buffer): Promise<string> {
  const url = await api(tenant, 'POST', `/v2/deployments/${id}/upload-url`, {});
  expect(url.status, url.text).toBe(200);
  const put = await fetch(url.body.upload_url as string, {
    method: 'PUT',
    headers: { 'content-type': 'application/gzip' },
    body: bytes,
  });
  expect(put.status, await put.clone().text()).toBe(201);
  const patched = await api(tenant, 'PATCH', `/v2/deployments/${id}`, {
    source_revision_config: { source_tarball_path: url.body.object_path },
  });
  expect(patched.status, patched.text).toBe(200);
  return createHash('sha256').update(bytes).digest('hex');
}

async function createDeployment(tenant: string, name: string): Promise<string> {
  const res = await api(tenant, 'POST', '/v2/deployments', {
    name,
    source: 'internal_source',
    source_config: { deployment_type: 'dev_zero' },
    source_revision_config: {},
  });
  expect(res.status, res.text).toBe(201);
  return res.body.id as string;
}

const revisionsOf = async (tenant: string, id: string) =>
  (await api(tenant, 'GET', `/v2/deployments/${id}/revisions`)).body.resources as {
    id: string;
    status: string;
    source_revision_config: { source_tarball_sha256: string | null };
  }[];

describe('source tarball builds on the Kubernetes runtime', () => {
  let id = '';
  let firstSha = '';
  let firstToken = '';
  let fake: FakeCluster;

  it('upload → revision → a build Job that fetches exactly those bytes → rollout; a redeploy goes back to them', async () => {
    fake = new FakeCluster(cluster.kubeConfig, NS);
    id = await createDeployment('team-a', 'tarball-a');
    const bytes = await project('first');
    firstSha = await deploySource('team-a', id, bytes);

    const job = await sourceBuildJob(cluster, NS, firstSha);
    const step = job.spec!.template.spec!.initContainers![0]!;
    expect(step.command).toEqual(['sh', '-c', FETCH_SCRIPT]);
    const env = Object.fromEntries((step.env ?? []).map((e) => [e.name, e.value]));
    expect(env.SOURCE_URL).toBe(`${cp.url}/v2/source-archives/${firstSha}`);
    expect(env.REPO_URL).toBeUndefined();
    // Only the fetch step mounts the token; the build step running the project's code never sees it.
    const mounts = (c: { volumeMounts?: { name: string }[] }) => (c.volumeMounts ?? []).map((m) => m.name);
    expect(mounts(step)).toContain('source-token');
    expect(mounts(job.spec!.template.spec!.initContainers![1]!)).not.toContain('source-token');
    firstToken = await fetchToken(cluster, NS, job);

    const fetched = await runFetchStep(tmp, job, firstToken);
    expect(fetched.status, `${fetched.stderr}\n${fetched.message}`).toBe(0);
    expect(fetched.stdout).toContain(`extracted source tarball sha256:${firstSha}`);
    expect(fetched.stdout).toContain('graphs checked');
    expect(readFileSync(join(fetched.workspace, 'src', 'agent.mjs'), 'utf8')).toContain('"first"');
    expect(readFileSync(join(fetched.workspace, 'commit'), 'utf8')).toBe(firstSha);
    expect(readFileSync(join(fetched.workspace, 'Dockerfile'), 'utf8')).toMatch(/^FROM agentplane:test/m);

    const digest = `sha256:${'a'.repeat(64)}`;
    await fake.finishJob(job.metadata!.name!, { ok: true, commit: firstSha, digest });
    const name = `ag-${id}`;
    await until('the agent Deployment', () => cluster.api.peek('apps', 'deployments', NS, name), 60_000);
    await fake.rollout(name, 'ready');
    await until(
      'the first revision deployed',
      async () => (await revisionsOf('team-a', id)).find((r) => r.status === 'DEPLOYED'),
      60_000,
    );
    const [first] = await revisionsOf('team-a', id);
    expect(first!.source_revision_config.source_tarball_sha256).toBe(firstSha);

    // A second upload makes a second revision from other bytes; the first one's tarball stays stored (a rebuild of
    // it fetches the same bytes), and a redeploy of it goes back to its image.
    const secondSha = await deploySource('team-a', id, await project('second'));
    expect(secondSha).not.toBe(firstSha);
    const second = await sourceBuildJob(cluster, NS, secondSha);
    const secondRun = await runFetchStep(tmp, second, await fetchToken(cluster, NS, second));
    expect(secondRun.status, secondRun.stderr).toBe(0);
    expect(readFileSync(join(secondRun.workspace, 'src', 'agent.mjs'), 'utf8')).toContain('"second"');
    await fake.finishJob(second.metadata!.name!, { ok: true, commit: secondSha, digest: `sha256:${'b'.repeat(64)}` });
    await until(
      'the second image rolled out',
      () =>
        cluster.api
          .peek('apps', 'deployments', NS, name)
          ?.spec.template.spec.containers[0].image.endsWith('b'.repeat(64)),
      60_000,
    );
    await fake.rollout(name, 'ready');
    const again = await runFetchStep(tmp, job, firstToken);
    expect(again.status, again.stderr).toBe(0);
    expect(readFileSync(join(again.workspace, 'commit'), 'utf8')).toBe(firstSha);

    const firstId = (await revisionsOf('team-a', id)).find(
      (r) => r.source_revision_config.source_tarball_sha256 === firstSha,
    )!.id;
    const redeployed = await api('team-a', 'POST', `/v2/deployments/${id}/revisions/${firstId}/redeploy`);
    expect(redeployed.status, redeployed.text).toBe(200);
    await until(
      'the first image rolled out again',
      () =>
        cluster.api
          .peek('apps', 'deployments', NS, name)
          ?.spec.template.spec.containers[0].image.endsWith('a'.repeat(64)),
      60_000,
    );
    expect([...new Set(cluster.api.denied)]).toEqual([]);
  }, 180_000);

  it("a build's token opens its own tarball only: not another workspace's, not tampered, not expired", async () => {
    expect(firstToken, 'the first test ran').not.toBe('');
    const other = await createDeployment('team-b', 'tarball-b');
    const otherSha = await deploySource('team-b', other, await project('team-b secret'));
    const get = (sha: string, authorization?: string) =>
      fetch(`${cp.url}/v2/source-archives/${sha}`, { headers: authorization ? { authorization } : {} });

    const own = await get(firstSha, `Bearer ${firstToken}`);
    expect(own.status).toBe(200);
    expect(
      createHash('sha256')
        .update(Buffer.from(await own.arrayBuffer()))
        .digest('hex'),
    ).toBe(firstSha);
    // Also under /api-host, where the CLI's users reach the API.
    expect(
      (
        await fetch(`${cp.url}/api-host/v2/source-archives/${firstSha}`, {
          headers: { authorization: `Bearer ${firstToken}` },
        })
      ).status,
    ).toBe(200);

    // Team A's build token asking for team B's tarball.
    const theirs = await get(otherSha, `Bearer ${firstToken}`);
    expect(theirs.status).toBe(403);
    expect(await theirs.text()).not.toContain('team-b secret');

    // The token's claims rewritten to name team B's tarball (and workspace): the signature no longer matches.
    const [payload, sig] = firstToken.slice('apf_'.length).split('.');
    const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString('utf8'));
    const forged = Buffer.from(JSON.stringify({ ...claims, t: 'team-b', s: otherSha })).toString('base64url');
    expect((await get(otherSha, `Bearer apf_${forged}.${sig}`)).status).toBe(401);

    // A token correctly signed for team A but naming team B's hash (as if team A learnt it): looked up in team A's
    // workspace only, where there is no such tarball.
    const key = sourceFetchKey(UPLOADS_KEY);
    const later = Math.floor(Date.now() / 1000) + 600;
    const wrongWorkspace = mintSourceFetchToken(key, { ...claimsOf(claims), sha256: otherSha, expires: later });
    expect((await get(otherSha, `Bearer ${wrongWorkspace}`)).status).toBe(404);

    const expired = mintSourceFetchToken(key, { ...claimsOf(claims), expires: Math.floor(Date.now() / 1000) - 1 });
    const refused = await get(firstSha, `Bearer ${expired}`);
    expect(refused.status).toBe(403);
    expect(await refused.text()).toMatch(/expired/);

    // A key of another installation, and no token at all.
    const foreign = mintSourceFetchToken(randomBytes(32), { ...claimsOf(claims), expires: later });
    expect((await get(firstSha, `Bearer ${foreign}`)).status).toBe(401);
    expect((await get(firstSha)).status).toBe(401);
  }, 60_000);
});

function claimsOf(c: { t: string; d: string; r: string; s: string; e: number }) {
  return { tenant: c.t, deploymentId: c.d, revision: c.r, sha256: c.s, expires: c.e };
}
