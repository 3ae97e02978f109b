// LangChain's `langgraph deploy --image-uri` (from PyPI) against agentplane's control plane on the Kubernetes store,
// with the operator's Kubernetes runtime, on the API-server double: the CLI creates an external_docker deployment of
// a prebuilt image through /api-host, the operator rolls it out (the test plays the Deployment controller), and the
// CLI reports success. `--remote` source builds are refused there with the runtime's reason, which the CLI shows.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/lib/logger.ts';
import { parseControlPlaneConfig } from '../../src/control-plane/config.ts';
import { startControlPlane, type RunningControlPlane } from '../../src/control-plane/server.ts';
import { parseOperatorConfig } from '../../src/operator/config.ts';
import { startKubernetesOperator, type RunningOperator } from '../../src/operator/kubernetes.ts';
import { langgraphCli } from '../support/langgraph-cli.ts';
import { operatorTestFlags, startCluster, until, type TestCluster } from './helpers/cluster.ts';
import { FakeCluster } from './helpers/kubelet.ts';

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
    { AGENTPLANE_BOOTSTRAP_API_KEY: KEY, AGENTPLANE_BOOTSTRAP_TENANTS: '*', LOG_LEVEL: 'silent' },
    tmp,
  )!;
  cp = await startControlPlane(config, logger);
  op = startKubernetesOperator(
    parseOperatorConfig([...operatorTestFlags(cluster, NS), '--log-level', 'silent', '--health-port', '0'], {})!,
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
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

/** `langgraph deploy` in a project folder, as a user runs it; resolves with its exit code and output. */
function deploy(args: string[]): Promise<{ code: number; output: string }> {
  const dir = mkdtempSync(join(tmp, 'project-'));
  writeFileSync(join(dir, 'langgraph.json'), JSON.stringify({ node_version: '20', graphs: { agent: './a.ts:graph' } }));
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

  it('--remote: the source build is refused with the reason, shown by the CLI', async () => {
    const res = await deploy(['--remote', '--name', 'cli-source']);
    expect(res.code, res.output).toBe(1);
    expect(res.output).toMatch(/status 503: This control plane stores no source uploads/);
  }, 300_000);
});
