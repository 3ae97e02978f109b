// Pod Security Standards: agent and Postgres pods pass `restricted` (a namespace enforcing it accepts them), and a
// build Job survives a node drain (a disrupted pod is replaced, not counted as the build failing).
import { describe, expect, it } from 'vitest';
import { kubernetesRuntimeConfigSchema } from '../../../../src/operator/runtimes/kubernetes/config.ts';
import { makeBuildJob } from '../../../../src/operator/runtimes/kubernetes/build-job.ts';
import { makeDeployment } from '../../../../src/operator/runtimes/kubernetes/server.ts';
import { makePostgresStatefulSet } from '../../../../src/operator/runtimes/kubernetes/postgres.ts';
import type { Target } from '../../../../src/operator/runtimes/kubernetes/labels.ts';
import { violations } from '../../../support/kube-apiserver/psa.ts';
import { validateK8s } from '../../../support/kubernetes/k8s-schema.ts';

const config = kubernetesRuntimeConfigSchema.parse({
  registry: 'registry.example.com/agents',
  gitImage: 'ghcr.io/agentplane/agentplane:0.1.0',
  baseImage: 'ghcr.io/agentplane/agentplane:0.1.0',
});
const id = '0b6c8f1e-5d0a-4f7b-9d7e-2a7c1f0e9b11';
const target: Target = { namespace: 'agents', name: `ag-${id}`, deploymentId: id, tenantId: 'team-a' };
const rev = `ag-${id}-r1`;

describe('Pod Security', () => {
  it('agent pods (with the wait-for-Postgres init container) pass restricted', () => {
    const d = makeDeployment(target, { revision: rev, image: 'ghcr.io/x/a:1', envNames: ['A'] }, config);
    validateK8s(d);
    const tpl = d.spec!.template;
    expect(tpl.spec!.initContainers?.length).toBe(1);
    expect(violations(tpl.spec!, 'restricted', tpl.metadata?.annotations)).toEqual([]);
    // The images' `node` user, by uid (runAsNonRoot cannot check a user name).
    expect(tpl.spec!.securityContext!.runAsUser).toBe(1000);
  });

  it('public agent pods (no key volume) pass restricted', () => {
    const d = makeDeployment(target, { revision: rev, image: 'ghcr.io/x/a:1', envNames: [], public: true }, config);
    expect(violations(d.spec!.template.spec!, 'restricted', d.spec!.template.metadata?.annotations)).toEqual([]);
  });

  it('Postgres pods pass restricted and run as the postgres user', () => {
    const sts = makePostgresStatefulSet(target, config);
    validateK8s(sts);
    const spec = sts.spec!.template.spec!;
    expect(violations(spec, 'restricted', sts.spec!.template.metadata?.annotations)).toEqual([]);
    expect(spec.securityContext).toMatchObject({ runAsUser: 70, fsGroup: 70 });
  });

  it('a build pod lost to a disruption (node drain) does not fail the build', () => {
    const job = makeBuildJob(
      target,
      {
        revision: rev,
        repoUrl: 'https://github.com/acme/agent.git',
        repoRef: 'main',
        graphConfigPath: 'langgraph.json',
      },
      config,
    );
    validateK8s(job);
    expect(job.spec!.backoffLimit).toBe(0);
    expect(job.spec!.podFailurePolicy!.rules).toContainEqual({
      action: 'Ignore',
      onPodConditions: [{ type: 'DisruptionTarget', status: 'True' }],
    });
  });
});
