// LangChain's `langgraph deploy` (from PyPI) against agentplane's control plane on the Kubernetes store, with the
// operator's Kubernetes runtime, on the API-server double. `--image-uri`: the CLI creates an external_docker deployment
// of a prebuilt image through /api-host, the operator rolls it out (the test plays the Deployment controller), and the
// CLI reports success. `--remote`: the CLI uploads the project (kept in a real Postgres), the build Job's fetch step
// (its real script, run here) downloads and checks it, the test ends the Job as the kubelet would report it, and the
// CLI reports success; a graph that does not load fails in that step, and the CLI shows the reason.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../../../src/lib/logger.ts';
import { parseControlPlaneConfig } from '../../../../src/control-plane/config.ts';
import { startControlPlane, type RunningControlPlane } from '../../../../src/control-plane/server.ts';
import { parseOperatorConfig } from '../../../../src/operator/config.ts';
import { startKubernetesOperator, type RunningOperator } from '../../../../src/operator/kubernetes.ts';
import { langgraphCli } from '../../../support/langgraph-cli.ts';
import { operatorTestFlags, startCluster, until, type TestCluster } from '../../../support/kubernetes/cluster.ts';
import { FakeCluster } from '../../../support/kubernetes/kubelet.ts';
import { fetchToken, runFetchStep, sourceBuildJob } from '../../../support/kubernetes/source-build.ts';
import { createTestDatabase, type TestDatabase } from '../../../support/postgres.ts';

const NS = 'agents';
const KEY = 'langgraph-cli-admin-key-3f9a7c1e';
const TENANT = 'team-a';
const IMAGE = `registry.example.com/agents/agent@sha256:${'e'.repeat(64)}`;
const logger = createLogger({ level: (process.env.TEST_LOG as 'warn') ?? 'silent', name: 'test' });

let cluster: TestCluster | undefined;
let cp: RunningControlPlane | undefined;
let op: RunningOperator | undefined;
let tmp = '';
let cli = '';
let db: TestDatabase | undefined;
const builtJobs: string[] = [];
const UPLOADS_KEY = Buffer.alloc(32, 5).toString('base64');
let skip: string | undefined;

beforeAll(async () => {
  const found = await langgraphCli();
  if ('skip' in found) {
    skip = found.skip;
    process.stderr.write(`skipped langgraph deploy --image-uri tests: ${skip}\n`);
    return;
  }
  cli = found.bin;
  tmp = mkdtempSync(join(tmpdir(), 'ap-lgcli-k8s-'));
  db = await createTestDatabase();
  cluster = await startCluster(NS, { rbac: true });
  cluster.installChartRbac();
  const config = parseControlPlaneConfig(
    [
      '--store',
      'kubernetes',
      '--kubeconfig',
      cluster.as('agentplane-control-plane').kubeconfigPath,
      '--namespace',
      NS,
      '--host',
      '127.0.0.1',
      '--port',
      '0',
    ],
    {
      AGENTPLANE_BOOTSTRAP_API_KEY: KEY,
      AGENTPLANE_BOOTSTRAP_TENANTS: '*',
      AGENTPLANE_SOURCE_UPLOADS_DATABASE_URL: db.url,
      AGENTPLANE_SOURCE_UPLOADS_KEY: UPLOADS_KEY,
      LOG_LEVEL: 'silent',
    },
    tmp,
  )!;
  cp = await startControlPlane(config, logger);
  op = startKubernetesOperator(
    parseOperatorConfig(
      [...operatorTestFlags(cluster, NS), '--source-fetch-url', cp.url, '--log-level', 'silent', '--health-port', '0'],
      { AGENTPLANE_SOURCE_UPLOADS_KEY: UPLOADS_KEY },
    )!,
    logger,
  );
}, 900_000);

beforeEach((ctx) => {
  if (skip) ctx.skip(skip);
});

afterAll(async () => {
  await op?.close();
  await cp?.close();
  await cluster?.close();
  await db?.drop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

/** `langgraph deploy` in a project folder, as a user runs it; resolves with its exit code and output. */
function deploy(args: string[], graph?: string): Promise<{ code: number; output: string }> {
  const dir = mkdtempSync(join(tmp, 'project-'));
  writeFileSync(join(dir, 'langgraph.json'), JSON.stringify({ node_version: '20', graphs: { agent: './a.ts:graph' } }));
  if (graph !== undefined) writeFileSync(join(dir, 'a.ts'), graph);
  return new Promise((done) => {
    execFile(
      cli,
      ['deploy', '--no-input', ...args],
      {
        cwd: dir,
        timeout: 300_000,
        env: {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          HOME: process.env.HOME ?? tmp,
          LANGSMITH_API_KEY: KEY,
          LANGSMITH_TENANT_ID: TENANT,
          LANGGRAPH_HOST_URL: `${cp!.url}/api-host`,
        },
      },
      (err, stdout, stderr) => {
        const code = err ? (err as { code?: unknown }).code : 0;
        done({ code: typeof code === 'number' ? code : 1, output: `${stdout}${stderr}` });
      },
    );
  });
}

describe('langgraph deploy on the Kubernetes runtime', () => {
  it('--image-uri: a prebuilt image is rolled out and the CLI reports success', async () => {
    const running = deploy(['--name', 'cli-image', '--image-uri', IMAGE]);
    const fake = new FakeCluster(cluster!.kubeConfig, NS);
    const id = await until(
      'the deployment the CLI creates',
      async () => {
        const res = await fetch(`${cp!.url}/v2/deployments?name_contains=cli-image`, {
          headers: { 'x-api-key': KEY, 'x-tenant-id': TENANT },
        });
        return ((await res.json()) as { resources: { id: string }[] }).resources[0]?.id;
      },
      120_000,
    );
    const name = `ag-${id}`;
    await until('its Deployment', () => cluster!.api.peek('apps', 'deployments', NS, name), 60_000);
    expect(cluster!.api.peek('apps', 'deployments', NS, name)!.spec.template.spec.containers[0].image).toBe(IMAGE);
    await fake.rollout(name, 'ready');
    const res = await running;
    expect(res.output).toContain('Deployment successful!');
    expect(res.code, res.output).toBe(0);
    // Under the chart's RBAC: nothing the control plane or operator asked for was refused.
    expect([...new Set(cluster!.api.denied)]).toEqual([]);
  }, 300_000);

  it('--remote: the uploaded source is fetched by the build Job and rolled out; the CLI reports success', async () => {
    const running = deploy(
      ['--remote', '--name', 'cli-source'],
      'export const graph = { invoke: async () => ({}) };\n',
    );
    const job = await sourceBuildJob(cluster!, NS);
    builtJobs.push(job.metadata!.name!);
    const step = await runFetchStep(tmp, job, await fetchToken(cluster!, NS, job));
    expect(step.status, `${step.stderr}\n${step.message}`).toBe(0);
    expect(step.stdout).toContain('graphs checked');
    const sha = job.spec!.template.spec!.initContainers![0]!.env!.find((e) => e.name === 'SOURCE_SHA256')!.value!;
    const fake = new FakeCluster(cluster!.kubeConfig, NS);
    await fake.finishJob(job.metadata!.name!, { ok: true, commit: sha, digest: `sha256:${'c'.repeat(64)}` });
    const name = job.metadata!.labels!['agentplane.dev/deployment']!;
    await until('its Deployment', () => cluster!.api.peek('apps', 'deployments', NS, name), 60_000);
    await fake.rollout(name, 'ready');
    const res = await running;
    expect(res.output).toContain('Deployment successful!');
    expect(res.code, res.output).toBe(0);
  }, 300_000);

  it('--remote: a graph that does not load fails the fetch step, and the CLI shows why', async () => {
    const running = deploy(['--remote', '--name', 'cli-broken'], 'export const graph = {\n');
    // The first test's Job is still there: this deployment's is the other one.
    const job = await sourceBuildJob(cluster!, NS, undefined, builtJobs);
    const step = await runFetchStep(tmp, job, await fetchToken(cluster!, NS, job));
    expect(step.status).not.toBe(0);
    expect(step.message).toMatch(/graph "agent": a\.ts:\d+:\d+/);
    const fake = new FakeCluster(cluster!.kubeConfig, NS);
    await fake.finishJob(job.metadata!.name!, { ok: false, container: 'clone', message: step.message });
    const res = await running;
    expect(res.code, res.output).toBe(1);
    expect(res.output).toContain('a.ts');
  }, 300_000);
});
