// The chart and the operator on a real Kubernetes control plane (test/support/kube-control-plane.ts: etcd,
// kube-apiserver with RBAC, PodSecurity and owner-reference enforcement, the controller manager, the scheduler and
// kwok nodes). The chart is installed with the real `helm install`; the control plane and the operator run as
// `agentplane` processes with the arguments and environment of the chart's Deployments, as read back from the API
// server, under tokens of the chart's ServiceAccounts: every right they use is one the chart grants. Then a cluster
// user's flows, asserted on the real API: the Deployment controller, the ReplicaSets, the scheduler placing pods on
// nodes and the garbage collector are Kubernetes' own, not the test's.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tenantNamespaceName } from '../../src/operator/runtimes/kubernetes/index.ts';
import { CHART_DIR, helm, helmAsync, kubectl } from '../support/helm/index.ts';
import {
  EXIT_CODE_ANNOTATION,
  startKubeControlPlane,
  TERMINATION_MESSAGE_ANNOTATION,
  type KubeControlPlane,
} from '../support/kube-control-plane.ts';
import { BINARIES_ENV } from './global-setup.ts';
import { clusterBed, helmInstall, restAs, restrictedNamespace, until, type Json } from './helpers.ts';

const binaries = process.env[BINARIES_ENV];
const root = join(import.meta.dirname, '../..');
const NS = 'agentplane';
const TENANT = 'team-a';
const ADMIN_KEY = 'kube-real-admin-key-5e0c2a9d41';
const IMAGE = 'ghcr.io/agentplane/example-agent';
/** Builds run in a namespace of their own (privileged Pod Security), away from the restricted agent namespace. */
const BUILDS = 'agentplane-builds';
const REGISTRY = 'registry.example.test/agents';
const BUILD_VALUES = { 'build.registry': REGISTRY, 'build.namespace': BUILDS };
/** What every tenant namespace gets besides Pod Security `restricted` (the default). */
const TENANT_QUOTA = { pods: '20', 'requests.memory': '64Gi' };
const TENANT_LIMITS = { defaultRequest: { memory: '128Mi' }, max: { memory: '16Gi' } };
const TENANT_POLICY_VALUES = { 'agents.tenantResourceQuota': TENANT_QUOTA, 'agents.tenantLimitRange': TENANT_LIMITS };

/** Values sets where the operator places children differently: [title, values, a namespace per tenant]. */
const SETS: [string, Record<string, unknown>, boolean][] = [
  ['defaults', { ...BUILD_VALUES }, false],
  ['a namespace per tenant', { ...BUILD_VALUES, 'agents.namespacePerTenant': true, ...TENANT_POLICY_VALUES }, true],
];

describe.skipIf(!binaries).each(SETS)(
  'the chart (%s) and the operator on a real Kubernetes control plane',
  (_t, values, perTenant) => {
    /** Where the tenant's agents run: the release namespace, or the tenant's own (made by the operator). */
    let childNs = NS;
    let kube: KubeControlPlane;
    let base = '';

    const bed = clusterBed(
      () => kube,
      () => kube.dir,
    );
    const { processes, get, logOf, startAgentplane } = bed;
    const chartContainer = (component: string) => bed.chartContainer(NS, component);
    const call = restAs(() => base, ADMIN_KEY, TENANT);

    beforeAll(async () => {
      kube = await startKubeControlPlane({ binaries: binaries! });
      const admin = kube.admin.kubeconfigPath;
      await restrictedNamespace(admin, NS);
      // The build namespace as docs/kubernetes.md#builds has the admin create it: privileged (rootless BuildKit).
      await kubectl(['create', 'namespace', BUILDS], admin);
      await kubectl(['label', 'namespace', BUILDS, 'pod-security.kubernetes.io/enforce=privileged'], admin);
      // The real helm, CRDs included; --wait holds until the chart's own pods run (on kwok nodes).
      helmInstall(admin, NS, values);

      base = await bed.startControlPlane(NS, ADMIN_KEY);
      const op = await chartContainer('operator');
      if (perTenant) childNs = tenantNamespaceName(op.env.AGENTPLANE_TENANT_NAMESPACE_PREFIX!, TENANT);
      await startOperator('agentplane-operator-0');
    });

    /** Health (and metrics) port of each operator replica, by its pod name. */
    const healthPorts = new Map<string, number>();
    /** One counter of the operator's /metrics, summed over the series whose labels include `labels`. */
    const counter = async (pod: string, metric: string, labels: Record<string, string>) => {
      const text = await (await fetch(`http://127.0.0.1:${healthPorts.get(pod)}/metrics`)).text();
      let sum = 0;
      for (const line of text.split('\n')) {
        const m = /^(\w+)\{([^}]*)\} (\S+)$/.exec(line);
        if (!m || m[1] !== metric) continue;
        if (Object.entries(labels).every(([k, v]) => m[2]!.includes(`${k}="${v}"`))) sum += Number(m[3]);
      }
      return sum;
    };

    /** An operator replica as the chart's Deployment runs it (POD_NAME is its Lease identity); resolves once ready. */
    const startOperator = async (pod: string) => {
      healthPorts.set(pod, await bed.startOperator(NS, pod));
    };

    afterAll(async () => {
      if (kube) await bed.stopAll();
      await kube?.stop();
    });

    const rollout = (name: string) => bed.rollout(childNs, name);
    const runs = (name: string, image: string) => bed.runs(childNs, name, image);
    const revisionStatus = async (id: string, rev: string) =>
      (await call('GET', `/v2/deployments/${id}/revisions/${rev}`)).body.status as string;

    let id = '';
    let name = '';
    let r1 = '';

    it('create through REST with a prebuilt image: Deployment, ReplicaSet, pods Running on nodes, revision DEPLOYED', async () => {
      const created = await call('POST', '/v2/deployments', {
        name: 'kube-real-agent',
        source: 'external_docker',
        source_config: { deployment_type: 'dev' },
        source_revision_config: { image_uri: `${IMAGE}:0.1.0` },
        secrets: [{ name: 'TOKEN', value: 'kube-real-secret' }],
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      id = String(created.body.id);
      r1 = String(created.body.latest_revision_id);
      name = `ag-${id}`;
      const d = await until('the Deployment', () => get(`/apis/apps/v1/namespaces/${childNs}/deployments/${name}`));
      expect(d.spec.template.spec.containers[0].image).toBe(`${IMAGE}:0.1.0`);
      // The real controllers: a ReplicaSet owned by the Deployment, its pods placed by the scheduler and Running.
      await until('its pods Running on kwok nodes', () => runs(name, `${IMAGE}:0.1.0`));
      expect((await rollout(name)).sets).toHaveLength(1);
      await until('r1 DEPLOYED', async () => (await revisionStatus(id, r1)) === 'DEPLOYED', 90_000).catch((err) => {
        throw new Error(`${String(err)}\n${logOf('agentplane-operator-0')}`);
      });
      const served = (await call('GET', `/v2/deployments/${id}`)).body;
      expect(served.active_revision_id).toBe(r1);
      expect(served.url).toContain(`.${childNs}.svc`);
    });

    it.skipIf(perTenant)(
      "server-side apply: the children are agentplane-operator's; another manager's field survives a reconcile, which reads from its cache and writes nothing",
      async () => {
        expect(id, 'the create test ran').not.toBe('');
        const admin = kube.admin.kubeconfigPath;
        const path = `/apis/apps/v1/namespaces/${childNs}/deployments/${name}`;
        const managers = (o: Json) => (o.metadata.managedFields as Json[]).map((m) => `${m.manager}/${m.operation}`);
        expect(managers((await get(path))!)).toContain('agentplane-operator/Apply');
        expect(managers((await get(`/api/v1/namespaces/${childNs}/services/${name}`))!)).toContain(
          'agentplane-operator/Apply',
        );
        // Another team applies its own fields with its own field manager, as `kubectl apply --server-side` does.
        const theirs = join(kube.dir, 'platform-team.yaml');
        const manifest = (extra: Json = {}) =>
          stringify({
            apiVersion: 'apps/v1',
            kind: 'Deployment',
            metadata: { name, namespace: childNs, annotations: { 'example.com/owner': 'platform-team' } },
            ...extra,
          });
        writeFileSync(theirs, manifest());
        await kubectl(['apply', '--server-side', '--field-manager=platform-team', '-f', theirs], admin);
        // Without --force-conflicts it cannot take a field the operator owns (the image of the agent container).
        writeFileSync(
          theirs,
          manifest({
            spec: {
              template: { spec: { containers: [{ name: 'agent-server', image: 'registry.example.test/evil:1' }] } },
            },
          }),
        );
        await expect(
          kubectl(['apply', '--server-side', '--field-manager=platform-team', '-f', theirs], admin),
        ).rejects.toThrow(/conflict with "agentplane-operator".*image/);
        const before = (await get(path))!;
        const op = 'agentplane-operator-0';
        const reconciles = () => counter(op, 'agentplane_operator_reconciles_total', { controller: 'agentrevision' });
        const reads = () =>
          counter(op, 'agentplane_operator_api_requests_total', { verb: 'get', resource: 'deployments' });
        const writes = async () =>
          (await counter(op, 'agentplane_operator_api_requests_total', { verb: 'patch' })) +
          (await counter(op, 'agentplane_operator_api_requests_total', { verb: 'update', resource: 'deployments' }));
        const [reconciled0, reads0, writes0] = [await reconciles(), await reads(), await writes()];
        // A reconcile of the unchanged deployment: its revision touched, which the revision controller reconciles.
        await kubectl(['-n', NS, 'annotate', 'agentrevision', `${name}-r1`, 'example.com/touched=1'], admin);
        await until('a reconcile of the revision', async () => (await reconciles()) > reconciled0);
        // It looked at the Deployment in its watch-fed cache: no GET, no write.
        expect(await reads()).toBe(reads0);
        expect(await writes()).toBe(writes0);
        const after = (await get(path))!;
        expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
        expect(after.metadata.annotations['example.com/owner']).toBe('platform-team');
        expect(managers(after)).toEqual(expect.arrayContaining(['agentplane-operator/Apply', 'platform-team/Apply']));
      },
    );

    it.skipIf(!perTenant)(
      'the tenant namespace the operator made enforces Pod Security restricted and holds the quota and limits of the values',
      async () => {
        expect(id, 'the create test ran').not.toBe('');
        const ns = await get(`/api/v1/namespaces/${childNs}`);
        expect(ns!.metadata.labels).toMatchObject({
          'pod-security.kubernetes.io/enforce': 'restricted',
          'agentplane.dev/tenant': TENANT,
        });
        // What a tenant's agent with a stolen pod-create right (or a careless admin) would try: refused by the API server.
        const privileged = await kube.request('POST', `/api/v1/namespaces/${childNs}/pods`, {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: 'breakout' },
          spec: {
            hostPID: true,
            containers: [{ name: 'sh', image: 'busybox', securityContext: { privileged: true } }],
          },
        });
        expect(privileged.status, JSON.stringify(privileged.body)).toBe(403);
        expect(privileged.body.message).toMatch(/violates PodSecurity "restricted:latest".*privileged/);
        const quota = await get(`/api/v1/namespaces/${childNs}/resourcequotas/agentplane-tenant`);
        expect(quota!.spec.hard).toEqual(TENANT_QUOTA);
        // The real quota controller counts the agent's pods against it.
        await until('the quota counting the agent pods', async () => {
          const q = await get(`/api/v1/namespaces/${childNs}/resourcequotas/agentplane-tenant`);
          return Number(q?.status?.used?.pods ?? 0) >= 1;
        });
        const limits = await get(`/api/v1/namespaces/${childNs}/limitranges/agentplane-tenant`);
        expect(limits!.spec.limits).toEqual([expect.objectContaining({ type: 'Container', ...TENANT_LIMITS })]);
      },
    );

    it.skipIf(!perTenant)(
      'least privilege: the operator reads no Secret and writes nothing outside its namespaces, nor binds itself a way in',
      async () => {
        expect(id, 'the create test ran').not.toBe('');
        const admin = kube.admin.kubeconfigPath;
        // What a compromised operator pod would try, with its own token.
        const operator = (await kube.as(NS, 'agentplane-operator')).kubeconfigPath;
        await kubectl(['create', 'namespace', 'victim'], admin);
        await kubectl(['-n', 'victim', 'create', 'secret', 'generic', 'db', '--from-literal=password=hunter2'], admin);
        const refused = (args: string[]) => expect(kubectl(args, operator)).rejects.toThrow(/forbidden|denied/i);
        await refused(['-n', 'kube-system', 'get', 'secrets']);
        await refused(['-n', 'victim', 'get', 'secret', 'db']);
        await refused(['-n', 'victim', 'create', 'configmap', 'planted']);
        // RBAC lets it create RoleBindings of its tenant role anywhere (it must, in namespaces it creates): the
        // admission policy refuses one outside them, so it cannot bind itself the rights of a tenant namespace here.
        await expect(
          kubectl(
            [
              '-n',
              'victim',
              'create',
              'rolebinding',
              'way-in',
              '--clusterrole=agentplane-operator-tenant',
              `--serviceaccount=${NS}:agentplane-operator`,
            ],
            operator,
          ),
        ).rejects.toThrow(/agentplane-operator-namespaces.*writes only in its own namespaces/);
        // Nor a role it was not given `bind` on (no `escalate`): the API server's own escalation check.
        await expect(
          kubectl(
            [
              '-n',
              childNs,
              'create',
              'rolebinding',
              'take-over',
              // Not `admin`: an aggregated role, empty here (no clusterrole-aggregation controller runs).
              '--clusterrole=cluster-admin',
              `--serviceaccount=${NS}:agentplane-operator`,
            ],
            operator,
          ),
        ).rejects.toThrow(/forbidden: user .* is attempting to grant RBAC permissions not currently held/);
        await expect(kubectl(['create', 'namespace', 'not-a-tenant'], operator)).rejects.toThrow(
          /writes only in its own namespaces/,
        );
        expect((await get('/apis/rbac.authorization.k8s.io/v1/namespaces/victim/rolebindings'))!.items).toEqual([]);
        // In the tenant namespace it made, its rights come from the RoleBinding it made there, to its tenant role.
        const bound = await get(
          `/apis/rbac.authorization.k8s.io/v1/namespaces/${childNs}/rolebindings/agentplane-operator`,
        );
        expect(bound!.roleRef).toMatchObject({ kind: 'ClusterRole', name: 'agentplane-operator-tenant' });
        expect(await kubectl(['-n', childNs, 'get', 'deployment', name, '-o', 'name'], operator)).toContain(name);
      },
    );

    it('a second revision rolls out to new pods; the old pods go only once the new ones run', async () => {
      expect(id, 'the create test ran').not.toBe('');
      const patched = await call('PATCH', `/v2/deployments/${id}`, {
        source_revision_config: { image_uri: `${IMAGE}:0.2.0` },
      });
      expect(patched.status, JSON.stringify(patched.body)).toBe(200);
      const r2 = String(patched.body.latest_revision_id);
      expect(r2).not.toBe(r1);
      // The chart's strategy: no replica taken down before its replacement is Ready (the real Deployment controller
      // honours it; kwok makes new pods Ready at once).
      const { d } = await rollout(name);
      expect(d.spec.strategy.rollingUpdate.maxUnavailable).toBe(0);
      await until('the pods of r2 Running', () => runs(name, `${IMAGE}:0.2.0`));
      await until('r2 DEPLOYED', async () => (await revisionStatus(id, r2)) === 'DEPLOYED', 90_000);
      const after = await rollout(name);
      // Two ReplicaSets, the old one scaled to zero (kept for history, as Kubernetes does).
      expect(after.sets).toHaveLength(2);
      const old = after.sets.find((x) => after.image(x) === `${IMAGE}:0.1.0`)!;
      expect(old.spec.replicas).toBe(0);
      expect((await call('GET', `/v2/deployments/${id}`)).body.active_revision_id).toBe(r2);

      // Rolled back: the first revision redeployed, its pods run again.
      const back = await call('POST', `/v2/deployments/${id}/revisions/${r1}/redeploy`);
      expect(back.status, JSON.stringify(back.body)).toBe(200);
      await until('the pods of r1 Running again', () => runs(name, `${IMAGE}:0.1.0`));
      await until(
        'r1 serving again',
        async () => (await call('GET', `/v2/deployments/${id}`)).body.active_revision_id === r1,
        90_000,
      );
      expect(await revisionStatus(id, r1)).toBe('DEPLOYED');
    });

    it('a source build: Job and pod admitted in the build namespace; the digest the pod reports deploys; a failed build says why', async () => {
      const created = await call('POST', '/v2/deployments', {
        name: 'kube-real-built',
        source: 'github',
        source_config: { repo_url: 'https://git.example.test/acme/agent.git' },
        source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const bid = String(created.body.id);
      const b1 = String(created.body.latest_revision_id);
      const bname = `ag-${bid}`;
      const jobs = `/apis/batch/v1/namespaces/${BUILDS}/jobs?labelSelector=agentplane.dev/deployment%3D${bname}`;
      /** The build pod of Job `job`, once the scheduler placed it and kwok runs it. */
      const runningPod = (job: string) =>
        until(`the pod of ${job} Running on a node`, async () => {
          const pods = (await get(`/api/v1/namespaces/${BUILDS}/pods?labelSelector=job-name%3D${job}`))!
            .items as Json[];
          const p = pods[0];
          return p?.status.phase === 'Running' && /^kwok-node-/.test(p.spec.nodeName ?? '') ? p : undefined;
        });
      /** Plays the push container: it exits with `code` and writes `message` to its termination log. */
      const finish = (pod: Json, code: number, message: string) =>
        kube.request(
          'PATCH',
          `/api/v1/namespaces/${BUILDS}/pods/${pod.metadata.name}`,
          {
            metadata: {
              annotations: { [EXIT_CODE_ANNOTATION]: String(code), [TERMINATION_MESSAGE_ANNOTATION]: message },
            },
          },
          'application/merge-patch+json',
        );
      const revision = async (rev: string) => (await call('GET', `/v2/deployments/${bid}/revisions/${rev}`)).body;

      // The Job in the build namespace, under the operator's rights there; no owner reference can cross namespaces.
      const job = await until('the build Job', async () => ((await get(jobs))!.items as Json[])[0]);
      expect(job.metadata.ownerReferences ?? []).toEqual([]);
      // Its pod (an unconfined seccomp profile) admitted by Pod Security of the privileged namespace, and scheduled.
      const pod = await runningPod(job.metadata.name);
      expect((await revision(b1)).status).toBe('BUILDING');
      const commit = '0123456789abcdef0123456789abcdef01234567';
      const digest = `sha256:${'ab'.repeat(32)}`;
      expect((await finish(pod, 0, JSON.stringify({ commit, digest }))).status).toBe(200);
      // The real Job controller completes the Job; the operator deploys what the push step reported, by digest.
      await until(`${b1} DEPLOYED`, async () => (await revision(b1)).status === 'DEPLOYED', 90_000).catch((err) => {
        throw new Error(`${String(err)}\n${logOf('agentplane-operator-0')}`);
      });
      const done = await get(`/apis/batch/v1/namespaces/${BUILDS}/jobs/${job.metadata.name}`);
      expect(done!.status.conditions).toContainEqual(expect.objectContaining({ type: 'Complete', status: 'True' }));
      const d = await get(`/apis/apps/v1/namespaces/${childNs}/deployments/${bname}`);
      expect(d!.spec.template.spec.containers[0].image).toBe(`${REGISTRY}/${bname}@${digest}`);
      expect((await revision(b1)).repo_commit_sha).toBe(commit);

      // A second revision whose push fails: BUILD_FAILED with the container's own words; the first keeps serving.
      const patched = await call('PATCH', `/v2/deployments/${bid}`, { source_revision_config: { repo_ref: 'v2' } });
      expect(patched.status, JSON.stringify(patched.body)).toBe(200);
      const b2 = String(patched.body.latest_revision_id);
      const job2 = await until('the second build Job', async () =>
        ((await get(jobs))!.items as Json[]).find((j) => j.metadata.name !== job.metadata.name),
      );
      const pod2 = await runningPod(job2.metadata.name);
      await finish(pod2, 1, 'registry.example.test: 403 Forbidden');
      const failed = await until(`${b2} BUILD_FAILED`, async () => {
        const r = await revision(b2);
        return r.status === 'BUILD_FAILED' ? r : undefined;
      });
      expect(failed.status_message).toContain('push: exit 1: registry.example.test: 403 Forbidden');
      expect((await call('GET', `/v2/deployments/${bid}`)).body.active_revision_id).toBe(b1);

      // Deleted: the operator removes the Jobs (and with them their pods) from the build namespace.
      expect((await call('DELETE', `/v2/deployments/${bid}`)).status).toBe(204);
      await until('the build Jobs gone', async () => ((await get(jobs))!.items as Json[]).length === 0, 120_000);
    });

    it('switching to autoscaling keeps the running replicas (no drop to 1) and hands the count to the HPA', async () => {
      expect(id, 'the create test ran').not.toBe('');
      const scale = async (min: number, max: number) => {
        const res = await call('PATCH', `/v2/deployments/${id}`, {
          source_config: { resource_spec: { min_scale: min, max_scale: max } },
        });
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        const rev = String(res.body.latest_revision_id);
        await until(`${rev} DEPLOYED`, async () => (await revisionStatus(id, rev)) === 'DEPLOYED', 90_000);
      };
      await scale(3, 3);
      await until('three replicas running', async () => (await rollout(name)).d.spec.replicas === 3);
      // Autoscaled from 2 to 5: the operator leaves `replicas` to the HPA. A PUT without it would make the API
      // server default it to 1 (one pod left serving) until the HPA controller raised it to its minimum (2).
      await scale(2, 5);
      const hpaPath = `/apis/autoscaling/v2/namespaces/${childNs}/horizontalpodautoscalers/${name}`;
      // The real HPA controller has looked at it (no metrics server here: it keeps the count it found).
      const hpa = await until('the HPA observed by its controller', async () => {
        const h = await get(hpaPath);
        return h?.status?.currentReplicas !== undefined ? h : undefined;
      });
      expect(hpa.spec).toMatchObject({ minReplicas: 2, maxReplicas: 5 });
      expect(hpa.status.currentReplicas).toBe(3);
      const { d, pods } = await rollout(name);
      expect(d.spec.replicas).toBe(3);
      expect(pods.filter((p) => !p.metadata.deletionTimestamp)).toHaveLength(3);
      // Back to a fixed count: the HPA goes and the operator sets replicas again.
      await scale(1, 1);
      await until('the HPA removed', async () => !(await get(hpaPath)));
      await until('one replica', async () => (await rollout(name)).d.spec.replicas === 1);
    });

    it('delete through REST: the real garbage collector removes every child', async () => {
      expect(id, 'the create test ran').not.toBe('');
      const { d } = await rollout(name);
      expect((await call('DELETE', `/v2/deployments/${id}`)).status).toBe(204);
      await until('the AgentDeployment gone', async () => {
        const cr = await get(`/apis/agentplane.dev/v1alpha1/namespaces/${NS}/agentdeployments/${name}`);
        return !cr;
      });
      await until(
        'the Deployment, ReplicaSets, pods, Service and Postgres gone',
        async () => {
          const left = [
            await get(`/apis/apps/v1/namespaces/${childNs}/deployments/${name}`),
            await get(`/api/v1/namespaces/${childNs}/services/${name}`),
            await get(`/apis/apps/v1/namespaces/${childNs}/statefulsets/${name}-postgres`),
          ].filter(Boolean);
          const sets = ((await get(`/apis/apps/v1/namespaces/${childNs}/replicasets`))!.items as Json[]).filter((x) =>
            x.metadata.ownerReferences?.some((o: Json) => o.uid === d.metadata.uid),
          );
          const pods = ((await get(`/api/v1/namespaces/${childNs}/pods`))!.items as Json[]).filter((p) =>
            p.metadata.name.startsWith(`${name}-`),
          );
          return left.length === 0 && sets.length === 0 && pods.length === 0;
          // The garbage collector works dependents level by level (Deployment, ReplicaSets, pods): tens of seconds.
        },
        150_000,
      );
      // Its revisions go with it (owner references), collected as asynchronously.
      await until(
        'its AgentRevisions gone',
        async () =>
          ((await get(`/apis/agentplane.dev/v1alpha1/namespaces/${NS}/agentrevisions`))!.items as Json[]).every(
            (r) => !r.metadata.name.startsWith(`${name}-`),
          ),
        150_000,
      );
    });

    it.skipIf(perTenant)(
      'two operator replicas: one holds the Lease; killed, the other takes over and acts',
      async () => {
        const lease = () => get(`/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/agentplane-operator`);
        expect((await lease())?.spec.holderIdentity).toBe('agentplane-operator-0');
        await startOperator('agentplane-operator-1');
        expect((await lease())?.spec.holderIdentity).toBe('agentplane-operator-0');
        const first = processes.get('agentplane-operator-0')!;
        const exited = new Promise((r) => first.once('exit', r));
        first.kill('SIGKILL'); // no graceful release: the Lease must expire (the chart's 15 s)
        await exited;
        const taken = await until(
          'the Lease taken over',
          async () => {
            const l = await lease();
            return l?.spec.holderIdentity === 'agentplane-operator-1' ? l : undefined;
          },
          90_000,
        );
        expect(taken.spec.leaseTransitions).toBeGreaterThanOrEqual(1);
        // The tests below run with agentplane-operator-1 alone acting.
      },
    );

    it.skipIf(perTenant)(
      'kubectl apply of an AgentDeployment; kubectl wait --for=condition=Ready returns once the version runs',
      async () => {
        const admin = kube.admin.kubeconfigPath;
        await kubectl(['-n', NS, 'apply', '-f', join(root, 'examples/k8s/tenant-access.yaml')], admin);
        const manifest = parse(readFileSync(join(root, 'examples/k8s/agentdeployment.yaml'), 'utf8')) as Json;
        const file = join(kube.dir, 'agentdeployment.yaml');
        const applied = manifest.metadata.name as string;
        const image = manifest.spec.sourceRevisionConfig.imageUri as string;
        writeFileSync(file, stringify(manifest));
        await kubectl(['-n', NS, 'apply', '-f', file], admin);
        await kubectl(
          ['-n', NS, 'wait', '--for=condition=Ready', `agentdeployment/${applied}`, '--timeout=120s'],
          admin,
        );
        // Ready means served: every replica of the example's revision runs (its minScale: 2). Ready is read from the
        // Deployment's status, which the Deployment controller writes a moment before the pod list shows the same
        // (the ReplicaSet controller's own pass): the pods must agree within seconds, not only eventually.
        await until('every replica of the revision Running', () => runs(applied, image), 15_000);
        // The real server takes the operator's Events (events.k8s.io/v1, MicroTime and all) and shows them to
        // kubectl describe through core/v1; the printer columns say Ready's own words.
        const described = await until(
          'the TrafficMoved Event in kubectl describe',
          async () => {
            const out = await kubectl(['-n', NS, 'describe', 'agentdeployment', applied], admin);
            return out.includes('TrafficMoved') ? out : undefined;
          },
          60_000,
        );
        expect(described).toMatch(/Normal\s+Ready\s/);
        const table = await kubectl(['-n', NS, 'get', 'agentdeployment', applied], admin);
        expect(table).toMatch(/READY\s+REASON/);
        expect(table).toMatch(/True\s+Serving/);
        expect((await rollout(applied)).d.spec.replicas).toBe(manifest.spec.sourceConfig.resourceSpec.minScale);

        // A new version, as the example's comment says: a new image, revisionCounter and targetRevisionName together;
        // `kubectl wait` right after the apply must not return on the old version's Ready.
        const next = 'ghcr.io/agentplane/example-agent:0.2.0';
        manifest.spec.sourceRevisionConfig.imageUri = next;
        manifest.spec.revisionCounter = 2;
        manifest.spec.targetRevisionName = `${applied}-r2`;
        writeFileSync(file, stringify(manifest));
        await kubectl(['-n', NS, 'apply', '-f', file], admin);
        await kubectl(
          ['-n', NS, 'wait', '--for=condition=Ready', `agentdeployment/${applied}`, '--timeout=120s'],
          admin,
        );
        // As above: the old version's pods are gone within seconds of Ready (the ReplicaSet controller's pass).
        const settled = await until('only the new version Running', () => runs(applied, next), 15_000).catch(
          () => false,
        );
        const seen = await rollout(applied);
        const cr = await get(`/apis/agentplane.dev/v1alpha1/namespaces/${NS}/agentdeployments/${applied}`);
        expect(
          settled,
          JSON.stringify({
            generation: cr?.metadata.generation,
            status: cr?.status,
            replicas: seen.d.spec.replicas,
            image: seen.image(seen.d),
            pods: seen.pods.map((p) => [seen.image(p), p.status.phase, p.metadata.deletionTimestamp, p.spec.nodeName]),
          }),
        ).toBe(true);
      },
    );

    it.skipIf(perTenant)(
      'the documented upgrade: the CRDs applied server-side, then helm upgrade with a new value',
      async () => {
        const admin = kube.admin.kubeconfigPath;
        // docs/kubernetes.md#upgrading, command for command, over a release helm installed (helm owns the CRDs' fields),
        // with CRDs of a next version: the schema revision annotation raised, as a release that changes them does.
        const next = join(kube.dir, 'crds-next');
        mkdirSync(next);
        for (const f of readdirSync(join(root, 'charts/agentplane/crds'))) {
          const crd = parse(readFileSync(join(root, 'charts/agentplane/crds', f), 'utf8')) as Json;
          const revision = Number(crd.metadata.annotations['agentplane.dev/crd-revision']);
          crd.metadata.annotations['agentplane.dev/crd-revision'] = String(revision + 1);
          writeFileSync(join(next, f), stringify(crd));
        }
        // Without --force-conflicts (as the docs said before): refused, the fields are helm's.
        await expect(kubectl(['apply', '--server-side', '-f', next], admin)).rejects.toThrow(/conflict with "helm"/);
        await kubectl(['apply', '--server-side', '--force-conflicts', '-f', next], admin);
        const upgraded = helm([
          'upgrade',
          'agentplane',
          CHART_DIR,
          '-n',
          NS,
          '--kubeconfig',
          admin,
          '--reset-then-reuse-values',
          '--set',
          'image.tag=0.2.0',
          '--wait',
          '--timeout',
          '3m',
        ]);
        expect(upgraded.ok, upgraded.ok ? '' : upgraded.stderr).toBe(true);
        const op = await get(`/apis/apps/v1/namespaces/${NS}/deployments/agentplane-operator`);
        expect(op!.spec.template.spec.containers[0].image).toBe('ghcr.io/agentplane/agentplane:0.2.0');
        expect(op!.status.updatedReplicas).toBe(op!.spec.replicas);
        const crd = await get(
          '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/agentdeployments.agentplane.dev',
        );
        expect(crd!.status.conditions).toContainEqual(expect.objectContaining({ type: 'Established', status: 'True' }));
        expect(crd!.metadata.annotations['agentplane.dev/crd-revision']).not.toBe('1');
      },
    );

    it.skipIf(perTenant)(
      'helm uninstall: its pre-delete hook has the operator finalize every AgentDeployment; then the namespace goes',
      async () => {
        const admin = kube.admin.kubeconfigPath;
        // Left for the uninstall: the example applied above and one more through REST, each with the finalizer.
        const extra = await call('POST', '/v2/deployments', {
          name: 'kube-real-left',
          source: 'external_docker',
          source_config: { deployment_type: 'dev' },
          source_revision_config: { image_uri: `${IMAGE}:0.1.0` },
        });
        expect(extra.status, JSON.stringify(extra.body)).toBe(201);
        const agentDeployments = async () =>
          ((await get(`/apis/agentplane.dev/v1alpha1/namespaces/${NS}/agentdeployments`))!.items as Json[]).map(
            (d) => ({ name: d.metadata.name as string, finalizers: (d.metadata.finalizers ?? []) as string[] }),
          );
        await until('two AgentDeployments held by the finalizer', async () => {
          const held = (await agentDeployments()).filter((d) => d.finalizers.includes('agentplane.dev/runtime'));
          return held.length >= 2;
        });

        const uninstalling = helmAsync([
          'uninstall',
          'agentplane',
          '-n',
          NS,
          '--kubeconfig',
          admin,
          '--wait',
          '--timeout',
          '3m',
        ]);
        // The hook Job's pod: no container runs on kwok, so the test runs its command, as its ServiceAccount,
        // while the operator still runs, and reports the exit code as the kubelet would.
        const pod = await until('the pre-delete hook pod Running', async () => {
          const pods = (await get(`/api/v1/namespaces/${NS}/pods?labelSelector=job-name%3Dagentplane-uninstall`))!
            .items as Json[];
          return pods.find((p) => p.status.phase === 'Running');
        });
        const container = pod.spec.containers[0];
        const hook = startAgentplane(
          'agentplane-uninstall',
          [...container.args, '--kubeconfig', (await kube.as(NS, pod.spec.serviceAccountName)).kubeconfigPath],
          { LOG_LEVEL: 'info' },
        );
        const code = await new Promise<number>((r) => hook.once('exit', (c) => r(c ?? 1)));
        expect(code, logOf('agentplane-uninstall')).toBe(0);
        // Finalized by the operator (which removes its finalizer only after its cleanup), not stripped.
        expect(await agentDeployments()).toEqual([]);
        await kube.request(
          'PATCH',
          `/api/v1/namespaces/${NS}/pods/${pod.metadata.name}`,
          { metadata: { annotations: { [EXIT_CODE_ANNOTATION]: String(code) } } },
          'application/merge-patch+json',
        );
        const uninstalled = await uninstalling;
        // The chart's pods are gone with the release: so are the operator and control plane they stand for.
        for (const child of processes.values()) {
          if (child.exitCode !== null || child.signalCode !== null) continue;
          const exited = new Promise((r) => child.once('exit', r));
          child.kill('SIGTERM');
          await exited;
        }
        expect(uninstalled.ok, uninstalled.ok ? '' : uninstalled.stderr).toBe(true);
        expect(await get(`/apis/apps/v1/namespaces/${NS}/deployments/agentplane-operator`)).toBeUndefined();
        expect(await get(`/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/roles`)).toMatchObject({ items: [] });
        // Helm keeps CRDs (docs/kubernetes.md#install): the agents' resources outlive the release.
        expect(
          await get('/apis/apiextensions.k8s.io/v1/customresourcedefinitions/agentdeployments.agentplane.dev'),
        ).toBeTruthy();
        await kubectl(['delete', 'namespace', NS, '--wait=false'], admin);
        await until(
          'the namespace gone (no finalizer left without its operator)',
          async () => !(await get(`/api/v1/namespaces/${NS}`)),
          120_000,
        ).catch(async (err) => {
          const left = await get(`/apis/agentplane.dev/v1alpha1/namespaces/${NS}/agentdeployments`);
          const ns = await get(`/api/v1/namespaces/${NS}`);
          throw new Error(
            `${String(err)}\nnamespace status: ${JSON.stringify(ns?.status)}\nAgentDeployments: ${JSON.stringify(
              (left?.items as Json[] | undefined)?.map((x) => x.metadata),
            )}`,
          );
        });
      },
    );
  },
);
