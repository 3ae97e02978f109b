// AgentDeployments applied with kubectl name their own objects. The CRD refuses the names that cannot give valid
// children (a dot or a leading digit: no Service; over 52 characters: revision names no longer valid label values),
// and every name it accepts gives children the real API server takes: a Service name is a DNS-1035 label, a
// StatefulSet's name leaves room for its pods' `controller-revision-hash` label (`<name>-<10 chars>`, at most 63), a
// Job's name is a valid label value (its pods' `job-name`).
import { CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../../src/lib/logger.ts';
import { parseOperatorConfig } from '../../../../src/operator/config.ts';
import { startKubernetesOperator, type RunningOperator } from '../../../../src/operator/kubernetes.ts';
import { buildJobName } from '../../../../src/operator/runtimes/kubernetes/build-job.ts';
import { postgresName } from '../../../../src/operator/runtimes/kubernetes/postgres.ts';
import { operatorTestFlags, startCluster, until, type TestCluster } from '../../../support/kubernetes/cluster.ts';
import { FakeCluster } from '../../../support/kubernetes/kubelet.ts';

const NS = 'agents';
const logger = createLogger({ level: 'silent', name: 'test' });
type Json = Record<string, any>;

const DNS_1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const DNS_1123 = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

let cluster: TestCluster;
let custom: CustomObjectsApi;
let op: RunningOperator;

function manifest(name: string, spec: Json): Json {
  return {
    apiVersion: 'agentplane.dev/v1alpha1',
    kind: 'AgentDeployment',
    metadata: { name, labels: { 'agentplane.dev/tenant': 'team-a' } },
    spec: {
      deploymentId: crypto.randomUUID(),
      tenantId: 'team-a',
      displayName: 'named-by-hand',
      sourceConfig: { deploymentType: 'dev' },
      ...spec,
    },
  };
}

async function create(body: Json): Promise<{ code: number; body: string }> {
  try {
    await custom.createNamespacedCustomObject({
      group: 'agentplane.dev',
      version: 'v1alpha1',
      namespace: NS,
      plural: 'agentdeployments',
      body,
    });
    return { code: 201, body: '' };
  } catch (err) {
    const e = err as { code?: number; body?: unknown };
    return { code: e.code ?? 0, body: String(e.body) };
  }
}

beforeAll(async () => {
  cluster = await startCluster(NS, { rbac: true });
  cluster.installChartRbac();
  custom = cluster.kubeConfig.makeApiClient(CustomObjectsApi);
  const config = parseOperatorConfig(
    [...operatorTestFlags(cluster, NS), '--log-level', 'silent', '--health-port', 'off'],
    {},
  )!;
  op = startKubernetesOperator(config, logger);
}, 60_000);
afterAll(async () => {
  await op?.close();
  await cluster?.close();
});

describe('AgentDeployment names and the names of their children', () => {
  it('the CRD refuses names that cannot give valid children, naming metadata.name', async () => {
    const image = { source: 'external_docker', sourceRevisionConfig: { imageUri: 'ghcr.io/x/a:1' } };
    for (const name of ['support.bot', '1bot', `a${'b'.repeat(52)}`]) {
      const res = await create(manifest(name, image));
      expect(res.code, name).toBe(422);
      expect(res.body, name).toContain('metadata.name');
    }
  });

  it('a 52-character name gets a valid Service, Deployment, Postgres StatefulSet and build Job', async () => {
    const name = `a${'b'.repeat(50)}c`;
    expect(name).toHaveLength(52);
    // Internal Postgres (no DATABASE_URI), built from source so a Job is made, and a high revision number.
    const counter = 1_234_567;
    const res = await create(
      manifest(name, {
        source: 'github',
        sourceConfig: { deploymentType: 'dev', repoUrl: 'https://github.com/agentplane/example-agent.git' },
        sourceRevisionConfig: { repoRef: 'main' },
        revisionCounter: counter,
        targetRevisionName: `${name}-r${counter}`,
      }),
    );
    expect(res.code, res.body).toBe(201);
    const revision = `${name}-r${counter}`;
    const job = await until(
      'the build Job',
      () => cluster.api.peek('batch', 'jobs', NS, buildJobName(revision)) as Json | undefined,
      30_000,
    );
    const jobName = job.metadata.name as string;
    expect(jobName.length).toBeLessThanOrEqual(63);
    expect(jobName).toMatch(DNS_1123);
    await new FakeCluster(cluster.kubeConfig, NS).finishJob(jobName, {
      ok: true,
      commit: 'a1b2c3d4e5f6a7b8',
      digest: `sha256:${'d'.repeat(64)}`,
    });
    const sts = await until(
      'the Postgres StatefulSet',
      () => cluster.api.peek('apps', 'statefulsets', NS, postgresName({ name } as never)) as Json | undefined,
      30_000,
    );
    // `<sts>-<revision hash, 10 characters>` is a label on its pods.
    expect(`${sts.metadata.name as string}-0123456789`.length).toBeLessThanOrEqual(63);
    expect(sts.metadata.name).toMatch(DNS_1035);
    const svc = cluster.api.peek('', 'services', NS, sts.spec.serviceName) as Json | undefined;
    expect(svc, 'the headless Postgres Service').toBeTruthy();
    expect((svc!.metadata.name as string).length).toBeLessThanOrEqual(63);
    // Names that were valid keep their children's names (existing deployments are not renamed).
    expect(postgresName({ name: 'ag-6f1c2a9e-3b4d-4c5e-8f70-1a2b3c4d5e6f' } as never)).toBe(
      'ag-6f1c2a9e-3b4d-4c5e-8f70-1a2b3c4d5e6f-postgres',
    );
    expect(buildJobName('ag-6f1c2a9e-3b4d-4c5e-8f70-1a2b3c4d5e6f-r12')).toBe(
      'ag-6f1c2a9e-3b4d-4c5e-8f70-1a2b3c4d5e6f-r12-build',
    );
    expect([...new Set(cluster.api.denied)]).toEqual([]);
  }, 60_000);
});
