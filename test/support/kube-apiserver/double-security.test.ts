// Admission plugins of a real API server, as the double runs them: Pod Security admission from the namespace's
// labels (refusing Pods, warning for workloads, so a Job's pod is refused when its controller creates it) and
// OwnerReferencesPermissionEnforcement (blockOwnerDeletion needs update on the owner's finalizers).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeCluster } from '../kubernetes/kubelet.ts';
import { startCluster, type TestCluster } from '../kubernetes/cluster.ts';
import { rawApi } from '../kubernetes/raw-api.ts';

let cluster: TestCluster;
let api: ReturnType<typeof rawApi>;

beforeAll(async () => {
  cluster = await startCluster('agents', { rbac: true, ownerReferencesPermissionEnforcement: true });
  api = rawApi(cluster.api);
  for (const [name, level] of [
    ['strict', 'restricted'],
    ['base', 'baseline'],
  ] as const) {
    const made = await api('POST', '/api/v1/namespaces', {
      metadata: { name, labels: { 'pod-security.kubernetes.io/enforce': level } },
    });
    expect(made.status).toBe(201);
  }
});
afterAll(async () => {
  await cluster?.close();
});

const plain = { containers: [{ name: 'app', image: 'img:1' }] };
const hardened = {
  securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
  containers: [
    {
      name: 'app',
      image: 'img:1',
      securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
    },
  ],
};

describe('Pod Security admission', () => {
  it('refuses a Pod that violates the namespace level with 403 and the violations, admits a compliant one', async () => {
    const refused = await api('POST', '/api/v1/namespaces/strict/pods', { metadata: { name: 'p1' }, spec: plain });
    expect(refused.status).toBe(403);
    expect(refused.body.reason).toBe('Forbidden');
    expect(refused.body.message).toBe(
      'pods "p1" is forbidden: violates PodSecurity "restricted:latest": ' +
        'allowPrivilegeEscalation != false (container "app" must set securityContext.allowPrivilegeEscalation=false), ' +
        'unrestricted capabilities (container "app" must set securityContext.capabilities.drop=["ALL"]), ' +
        'runAsNonRoot != true (pod or container "app" must set securityContext.runAsNonRoot=true), ' +
        'seccompProfile (pod or container "app" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")',
    );
    expect(
      (await api('POST', '/api/v1/namespaces/strict/pods', { metadata: { name: 'p2' }, spec: hardened })).status,
    ).toBe(201);
    expect((await api('POST', '/api/v1/namespaces/base/pods', { metadata: { name: 'p3' }, spec: plain })).status).toBe(
      201,
    );
    const privileged = await api('POST', '/api/v1/namespaces/base/pods', {
      metadata: { name: 'p4' },
      spec: {
        hostNetwork: true,
        containers: [{ name: 'app', image: 'img:1', securityContext: { privileged: true } }],
        volumes: [{ name: 'root', hostPath: { path: '/' } }],
      },
    });
    expect(privileged.status).toBe(403);
    expect(privileged.body.message).toContain(
      'violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true), privileged (container "app" must not set securityContext.privileged=true), hostPath volumes (volume "root")',
    );
    // An unconfined AppArmor profile, as a field or as the older annotation, is refused by baseline.
    for (const [name, annotations, securityContext] of [
      ['p5', {}, { appArmorProfile: { type: 'Unconfined' } }],
      ['p6', { 'container.apparmor.security.beta.kubernetes.io/app': 'unconfined' }, {}],
    ] as const) {
      const unconfined = await api('POST', '/api/v1/namespaces/base/pods', {
        metadata: { name, annotations },
        spec: { containers: [{ name: 'app', image: 'img:1', securityContext }] },
      });
      expect(unconfined.status, name).toBe(403);
      expect(unconfined.body.message, name).toMatch(
        /violates PodSecurity "baseline:latest": forbidden AppArmor profile/,
      );
    }
    const runtimeDefault = await api('POST', '/api/v1/namespaces/base/pods', {
      metadata: {
        name: 'p7',
        annotations: { 'container.apparmor.security.beta.kubernetes.io/app': 'runtime/default' },
      },
      spec: {
        containers: [{ name: 'app', image: 'img:1', securityContext: { appArmorProfile: { type: 'RuntimeDefault' } } }],
      },
    });
    expect(runtimeDefault.status).toBe(201);
  });

  it('admits a workload whose template violates the level with a Warning; its controller cannot create the pod', async () => {
    const job = await api('POST', '/apis/batch/v1/namespaces/strict/jobs', {
      metadata: { name: 'build' },
      spec: { template: { spec: { ...plain, restartPolicy: 'Never' } } },
    });
    expect(job.status).toBe(201);
    expect(job.warnings).toHaveLength(1);
    expect(job.warnings[0]).toMatch(
      /^would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false/,
    );
    const deploy = await api('POST', '/apis/apps/v1/namespaces/strict/deployments', {
      metadata: { name: 'web' },
      spec: {
        selector: { matchLabels: { app: 'web' } },
        template: { metadata: { labels: { app: 'web' } }, spec: hardened },
      },
    });
    expect(deploy.status).toBe(201);
    expect(deploy.warnings).toEqual([]);
    // The Job controller, played by the test, is refused the pod as a real one would be.
    const jobs = new FakeCluster(cluster.kubeConfig, 'strict');
    await expect(jobs.finishJob('build', { ok: true, commit: 'c', digest: 'sha256:x' })).rejects.toMatchObject({
      code: 403,
    });
  });
});

describe('OwnerReferencesPermissionEnforcement', () => {
  it('needs update on the owner finalizers to set blockOwnerDeletion, and delete on the object to change owners', async () => {
    const owner = await api('POST', '/api/v1/namespaces/agents/configmaps', { metadata: { name: 'owner' } });
    const ref = { apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: owner.body.metadata.uid };
    const rbac = '/apis/rbac.authorization.k8s.io/v1/namespaces/agents';
    const grant = async (name: string, rules: unknown[]) => {
      expect((await api('POST', `${rbac}/roles`, { metadata: { name }, rules })).status).toBe(201);
      const binding = {
        metadata: { name },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
        subjects: [{ kind: 'ServiceAccount', name: 'writer', namespace: 'agents' }],
      };
      expect((await api('POST', `${rbac}/rolebindings`, binding)).status).toBe(201);
    };
    await grant('write', [{ apiGroups: [''], resources: ['configmaps'], verbs: ['create', 'get', 'update'] }]);
    const writer = rawApi(cluster.api, cluster.api.serviceAccountToken('agents', 'writer'));
    const dependent = (name: string, block: boolean) => ({
      metadata: { name, ownerReferences: [{ ...ref, blockOwnerDeletion: block }] },
    });
    const refused = await writer('POST', '/api/v1/namespaces/agents/configmaps', dependent('d1', true));
    expect(refused.status).toBe(403);
    expect(refused.body.message).toBe(
      `configmaps "d1" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: , <nil>`,
    );
    expect((await writer('POST', '/api/v1/namespaces/agents/configmaps', dependent('d2', false))).status).toBe(201);
    const d2 = (await writer('GET', '/api/v1/namespaces/agents/configmaps/d2')).body;
    const moved = await writer('PUT', '/api/v1/namespaces/agents/configmaps/d2', {
      ...d2,
      metadata: { ...d2.metadata, ownerReferences: [] },
    });
    expect(moved.status).toBe(403);
    expect(moved.body.message).toContain("cannot set an ownerRef on a resource you can't delete");
    await grant('finalize', [{ apiGroups: [''], resources: ['configmaps/finalizers'], verbs: ['update'] }]);
    expect((await writer('POST', '/api/v1/namespaces/agents/configmaps', dependent('d3', true))).status).toBe(201);
  });
});
