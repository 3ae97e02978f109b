// The operator's flows on the chart's own install, for each values set where the operator behaves differently
// (docs/kubernetes.md): the chart rendered by the real helm, its RBAC installed into a fresh strict API-server double
// (RBAC, Pod Security "restricted" on the namespaces the docs create, owner-reference enforcement), and the control
// plane, operator and listener started in-process from the rendered Deployments' own arguments and environment, as
// the chart's ServiceAccounts. Through the REST API: create a deployment, patch it (a new revision), roll back
// (redeploy the first revision) and delete it, the test playing the cluster's Deployment controller. Every request
// the chart's RBAC or admission refuses fails the set (but for the one a listener must retry, named below).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/lib/logger.ts';
import { parseControlPlaneConfig } from '../../src/control-plane/config.ts';
import { startControlPlane, type RunningControlPlane } from '../../src/control-plane/server.ts';
import { parseListenerConfig } from '../../src/listener/config.ts';
import { startKubernetesListener, type RunningListener } from '../../src/listener/command.ts';
import { parseOperatorConfig } from '../../src/operator/config.ts';
import { startKubernetesOperator, type RunningOperator } from '../../src/operator/kubernetes.ts';
import { tenantNamespaceName } from '../../src/operator/runtimes/kubernetes/index.ts';
import { gatewayApiCrds } from '../support/gateway-api.ts';
import { renderChart } from '../support/helm/index.ts';
import { startCluster, until, type TestCluster } from '../support/kubernetes/cluster.ts';
import { FakeCluster } from '../support/kubernetes/kubelet.ts';

type Json = Record<string, any>;

const RELEASE_NS = 'agentplane';
const TENANT = 'team-a';
const ADMIN_KEY = 'chart-flows-admin-key-4c1d9e2b7a';
const IMAGE = 'ghcr.io/agentplane/example-agent';
const logger = createLogger({ level: (process.env.TEST_LOG as 'warn') ?? 'silent', name: 'test' });
const RESTRICTED = { 'pod-security.kubernetes.io/enforce': 'restricted' };
const REGISTRY = 'registry.example.com/agents';

const DATA_PLANE: Json = {
  'controlPlane.enabled': false,
  // The agents in a namespace of their own, away from the release's (docs/kubernetes.md, data plane only).
  agentNamespace: 'agents',
  listener: {
    enabled: true,
    // Replaced by the in-process control plane's URL and the listener it registers.
    controlPlaneUrl: 'https://agents.example.com',
    tenant: TENANT,
    listenerId: '0b7c3a4e-5f6d-4e8f-9a0b-1c2d3e4f5a6b',
    apiKey: { existingSecret: 'listener-key' },
  },
};

/** Values sets where the operator acts differently: [title, release name, values]. */
const SETS: [string, string, Json][] = [
  ['defaults', 'agentplane', {}],
  [
    'the documented install (source builds, an Ingress per deployment)',
    'agentplane',
    {
      'image.repository': 'registry.example.com/agentplane',
      'image.tag': '0.1.0',
      'build.registry': REGISTRY,
      'build.pushSecret': 'registry-push',
      'controlPlane.bootstrapApiKey.existingSecret': 'agentplane-admin',
      'agents.ingress.className': 'nginx',
      'agents.ingress.baseDomain': 'agents.example.com',
    },
  ],
  // Helm's longest release name with a namespace per tenant: the longest names the chart and operator make. (The
  // same two apart, a long name alone or a namespace per tenant alone, prove nothing these two sets do not.)
  [
    "a release name of helm's 53 characters, a namespace per tenant",
    `ap-${'x'.repeat(50)}`,
    { 'agents.namespacePerTenant': true },
  ],
  ['cluster-wide RBAC', 'agentplane', { 'operator.clusterWideRbac': true }],
  ['a separate agent namespace', 'agentplane', { agentNamespace: 'agents' }],
  ['data plane only: a listener, its agents in their own namespace', 'agentplane', DATA_PLANE],
  ['data plane only, a namespace per tenant', 'agentplane', { ...DATA_PLANE, 'agents.namespacePerTenant': true }],
  [
    'source builds, a namespace per tenant',
    'agentplane',
    {
      'build.registry': REGISTRY,
      'build.pushSecret': 'registry-push',
      'agents.namespacePerTenant': true,
      // Served through Ingresses cert-manager issues a certificate for, one TLS Secret each in the tenant namespace.
      'agents.ingress': {
        className: 'nginx',
        baseDomain: 'agents.example.com',
        tlsSecretPerIngress: true,
        annotations: { 'cert-manager.io/cluster-issuer': 'letsencrypt' },
      },
    },
  ],
  [
    'a namespace per tenant, served through a Gateway (HTTPRoutes, no Ingress)',
    'agentplane',
    {
      'agents.namespacePerTenant': true,
      'agents.ingress.baseDomain': 'agents.example.com',
      'agents.gateway': {
        enabled: true,
        parentRefs: [{ name: 'agents', namespace: 'gateways', sectionName: 'https' }],
        annotations: { 'example.com/team': 'platform' },
      },
    },
  ],
];

type Spec = { args: string[]; env: Record<string, string>; serviceAccount: string };

/** A rendered Deployment's container: its arguments after the subcommand, its plain env values, its identity. */
function container(docs: Json[], component: string): Spec | undefined {
  const d = docs.find(
    (x) => x.kind === 'Deployment' && x.metadata.labels?.['app.kubernetes.io/component'] === component,
  );
  if (!d) return undefined;
  const c = d.spec.template.spec.containers[0];
  const env: Record<string, string> = {};
  // Values from Secrets or the downward API are set by each test, as the kubelet would.
  for (const e of c.env ?? []) if (typeof e.value === 'string') env[e.name] = e.value;
  return { args: (c.args as string[]).slice(1), env, serviceAccount: d.spec.template.spec.serviceAccountName };
}

describe.each(SETS)('the chart with %s: the operator flows under its RBAC', (_title, release, values) => {
  const docs = renderChart({ release, namespace: RELEASE_NS, values });
  const cpSpec = container(docs, 'control-plane');
  const opSpec = container(docs, 'operator')!;
  const listenerSpec = container(docs, 'listener');
  const agentNs = opSpec.env.AGENTPLANE_NAMESPACE!;
  const perTenant = values['agents.namespacePerTenant'] === true;
  const builds = Boolean(values['build.registry']);
  const ingressValues: Json = { className: values['agents.ingress.className'], ...values['agents.ingress'] };
  const baseDomain = (values['agents.ingress.baseDomain'] ?? ingressValues.baseDomain) as string | undefined;
  const childNs = perTenant ? tenantNamespaceName(opSpec.env.AGENTPLANE_TENANT_NAMESPACE_PREFIX!, TENANT) : agentNs;
  const gateway = values['agents.gateway'] as Json | undefined;
  // Served through a Gateway: the double validates each HTTPRoute with the official CRD (fetched with Go).
  const gatewayCrds = gateway ? gatewayApiCrds() : undefined;
  const skip = Boolean(gateway && !gatewayCrds);

  let cluster: TestCluster;
  let cp: RunningControlPlane | undefined;
  let op: RunningOperator | undefined;
  let listener: RunningListener | undefined;
  let tmp: string;
  let base = '';
  let listenerId: string | undefined;
  /** Starts the operator as the chart renders it with `v` (a helm upgrade); set once the cluster is up. */
  let startOperator: (v: Json) => RunningOperator = () => {
    throw new Error('no cluster');
  };

  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: {
        'x-api-key': ADMIN_KEY,
        'x-tenant-id': TENANT,
        ...(body ? { 'content-type': 'application/json' } : {}),
      },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Json) : {} };
  };

  beforeAll(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'ap-chart-flows-'));
    if (skip) return;
    cluster = await startCluster(RELEASE_NS, {
      rbac: true,
      ownerReferencesPermissionEnforcement: true,
      gatewayApiCrds: gatewayCrds,
    });
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    // helm install --create-namespace, and the agent namespace the docs ask to create: both enforce "restricted".
    const releaseNs = await core.readNamespace({ name: RELEASE_NS });
    releaseNs.metadata!.labels = { ...releaseNs.metadata!.labels, ...RESTRICTED };
    await core.replaceNamespace({ name: RELEASE_NS, body: releaseNs });
    if (agentNs !== RELEASE_NS)
      await core.createNamespace({ body: { metadata: { name: agentNs, labels: RESTRICTED } } });
    // Build pods cannot meet "restricted": docs/kubernetes.md#pod-security has the namespace where they run (the
    // operator's, also with a namespace per tenant) enforce "privileged" and warn at "restricted".
    if (builds) {
      const ns = await core.readNamespace({ name: agentNs });
      ns.metadata!.labels = {
        ...ns.metadata!.labels,
        'pod-security.kubernetes.io/enforce': 'privileged',
        'pod-security.kubernetes.io/warn': 'restricted',
      };
      await core.replaceNamespace({ name: agentNs, body: ns });
    }
    cluster.installChartRbac(values, release);

    const leaseEnv = { POD_NAME: `${opSpec.serviceAccount}-0`, POD_NAMESPACE: RELEASE_NS };
    if (cpSpec) {
      // The control plane in this cluster, as its chart Deployment runs it (listening here, not on 8080).
      const config = parseControlPlaneConfig(
        [
          ...cpSpec.args,
          '--kubeconfig',
          cluster.as(cpSpec.serviceAccount).kubeconfigPath,
          '--host',
          '127.0.0.1',
          '--port',
          '0',
        ],
        {
          ...cpSpec.env,
          AGENTPLANE_BOOTSTRAP_API_KEY: ADMIN_KEY,
          AGENTPLANE_BOOTSTRAP_TENANTS: '*',
          LOG_LEVEL: 'silent',
        },
        tmp,
      )!;
      cp = await startControlPlane(config, logger);
    } else {
      // Data plane only: the control plane is elsewhere (its own embedded store), reached by the listener.
      const config = parseControlPlaneConfig(
        ['--store', 'embedded', '--data-dir', join(tmp, 'cp'), '--host', '127.0.0.1', '--port', '0'],
        { AGENTPLANE_BOOTSTRAP_API_KEY: ADMIN_KEY, AGENTPLANE_BOOTSTRAP_TENANTS: '*', LOG_LEVEL: 'silent' },
        tmp,
      )!;
      cp = await startControlPlane(config, logger);
    }
    base = cp.url;

    let listenerEnv: Record<string, string> = {};
    if (listenerSpec) {
      const created = await call('POST', '/v2/listeners', {
        compute_type: 'k8s',
        compute_id: 'cluster',
        compute_config: { k8s_namespaces: [agentNs] },
        // No base domain in these values: the cluster serves deployments at <name>.<namespace>.svc.
        base_url: `http://${childNs}.svc`,
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      listenerId = String(created.body.id);
      const key = String((await call('POST', `/v2/listeners/${listenerId}/keys`, {})).body.key);
      listenerEnv = {
        AGENTPLANE_LISTENER_CONTROL_PLANE_URL: base,
        AGENTPLANE_LISTENER_ID: listenerId,
        AGENTPLANE_LISTENER_API_KEY: key,
      };
      const config = parseListenerConfig(
        [
          ...listenerSpec.args,
          '--kubeconfig',
          cluster.as(listenerSpec.serviceAccount).kubeconfigPath,
          '--poll-timeout',
          '1',
        ],
        {
          ...listenerSpec.env,
          AGENTPLANE_CONTROL_PLANE_URL: base,
          AGENTPLANE_LISTENER_ID: listenerId,
          AGENTPLANE_LISTENER_API_KEY: key,
          LOG_LEVEL: 'silent',
        },
      )!;
      listener = await startKubernetesListener(config, logger);
    }

    startOperator = (v) => {
      const spec = container(renderChart({ release, namespace: RELEASE_NS, values: v }), 'operator')!;
      const config = parseOperatorConfig(
        [...spec.args, '--kubeconfig', cluster.as(spec.serviceAccount).kubeconfigPath, '--health-port', '0'],
        { ...spec.env, ...leaseEnv, ...listenerEnv, LOG_LEVEL: 'silent' },
      )!;
      return startKubernetesOperator(config, logger);
    };
    op = startOperator(values);
  });

  afterAll(async () => {
    await listener?.close();
    await op?.close();
    // The listener ran in this process, on its shared HTTP client: one of its connections to the control plane stays
    // open after it stopped (a separate process's would go with it), and Fastify would wait out its 72 s keep-alive.
    cp?.app.server.closeAllConnections();
    await cp?.close();
    await cluster?.close();
    rmSync(tmp, { recursive: true, force: true });
  });

  it.skipIf(skip)('create, patch, roll back and delete a deployment; nothing refused', async () => {
    const peek = (group: string, plural: string, ns: string, name: string): Json | undefined =>
      cluster.api.peek(group, plural, ns, name);
    const fake = new FakeCluster(cluster.kubeConfig, childNs);
    const image = (name: string) => peek('apps', 'deployments', childNs, name)?.spec.template.spec.containers[0].image;
    const revisionStatus = async (id: string, rev: string) =>
      (await call('GET', `/v2/deployments/${id}/revisions/${rev}`)).body.status as string;
    // A prebuilt image per revision, or (with a registry) revision n built from a git ref and pushed there.
    const revisionSource = (n: number) =>
      builds ? { repo_ref: `v${n}`, graph_config_path: 'langgraph.json' } : { image_uri: `${IMAGE}:0.${n}.0` };
    const digest = (n: number) => `sha256:${String(n).repeat(64)}`;
    const imageOf = (n: number) => (builds ? `${REGISTRY}/${name}@${digest(n)}` : `${IMAGE}:0.${n}.0`);
    // The Job controller and kubelet finishing a build: in the operator's namespace, also with a namespace per tenant.
    const jobs = new FakeCluster(cluster.kubeConfig, agentNs);
    const built = async (n: number) => {
      if (!builds) return;
      const job = `${name}-r${n}-build`;
      await until(`the build Job ${job}`, () => peek('batch', 'jobs', agentNs, job), 30_000);
      await jobs.finishJob(job, { ok: true, commit: `c0ffee0${n}`.repeat(2), digest: digest(n) });
    };

    const created = await call('POST', '/v2/deployments', {
      name: 'chart-flows-agent',
      source: builds ? 'github' : 'external_docker',
      source_config: {
        deployment_type: 'dev',
        ...(builds ? { repo_url: 'https://github.com/agentplane/example-agent.git' } : {}),
        ...(listenerId ? { listener_id: listenerId, listener_config: { k8s_namespace: agentNs } } : {}),
      },
      source_revision_config: revisionSource(1),
      secrets: [{ name: 'TOKEN', value: 'chart-flows-secret' }],
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = String(created.body.id);
    const r1 = String(created.body.latest_revision_id);
    const name = `ag-${id}`;
    await built(1);

    // Created: the AgentDeployment in the agent namespace, its Deployment where the tenant's agents run.
    const cr = await until('the AgentDeployment', () => peek('agentplane.dev', 'agentdeployments', agentNs, name));
    expect(cr.spec.tenantId).toBe(TENANT);
    await until('the Deployment', () => image(name) === imageOf(1), 30_000);
    const d = peek('apps', 'deployments', childNs, name)!;
    if (perTenant) {
      expect(d.metadata.ownerReferences ?? []).toEqual([]); // owner references cannot cross namespaces
      expect(peek('', 'namespaces', '', childNs)?.metadata.labels?.['agentplane.dev/tenant']).toBe(TENANT);
      expect(peek('apps', 'deployments', agentNs, name)).toBeUndefined();
    } else {
      expect(d.metadata.ownerReferences).toEqual([
        expect.objectContaining({ kind: 'AgentDeployment', uid: cr.metadata.uid, controller: true }),
      ]);
    }
    await until('its Service and Postgres', () =>
      Boolean(peek('', 'services', childNs, name) && peek('apps', 'statefulsets', childNs, `${name}-postgres`)),
    );
    // Every Secret the pods read is where they run (a Secret in another namespace would leave them never starting).
    const pod = d.spec.template.spec;
    const secrets = new Set<string>([
      ...(pod.volumes ?? []).flatMap((v: Json) => (v.secret ? [v.secret.secretName] : [])),
      ...[...(pod.initContainers ?? []), ...pod.containers].flatMap((c: Json) => [
        ...(c.env ?? []).flatMap((e: Json) => (e.valueFrom?.secretKeyRef ? [e.valueFrom.secretKeyRef.name] : [])),
        ...(c.envFrom ?? []).flatMap((e: Json) => (e.secretRef ? [e.secretRef.name] : [])),
      ]),
    ]);
    expect(secrets.size).toBeGreaterThan(0);
    for (const secret of secrets)
      await until(`Secret ${secret} in ${childNs}`, () => peek('', 'secrets', childNs, secret));
    await fake.rollout(name, 'ready');
    await until('r1 DEPLOYED', async () => (await revisionStatus(id, r1)) === 'DEPLOYED', 30_000);
    const served = (await call('GET', `/v2/deployments/${id}`)).body;
    expect(served.url).toBeTruthy();
    expect(served.url).toBe(peek('agentplane.dev', 'agentdeployments', agentNs, name)!.status.url);
    if (gateway) {
      // Served through its HTTPRoute on the configured Gateway, under the base domain; no Ingress beside it.
      const host = new URL(served.url as string).hostname;
      expect(host).toBe(`${name}.${baseDomain}`);
      expect(served.url).toMatch(/^https:/);
      const route = peek('gateway.networking.k8s.io', 'httproutes', childNs, name)!;
      expect(route.spec.parentRefs).toEqual([
        { group: 'gateway.networking.k8s.io', kind: 'Gateway', ...gateway.parentRefs[0] },
      ]);
      expect(route.spec.hostnames).toEqual([host]);
      expect(route.spec.rules[0].backendRefs).toEqual([expect.objectContaining({ name, port: 80 })]);
      expect(route.metadata.annotations).toMatchObject(gateway.annotations);
      expect(peek('networking.k8s.io', 'ingresses', childNs, name)).toBeUndefined();
    } else if (baseDomain) {
      // Served through its Ingress, under the base domain.
      expect(new URL(served.url as string).hostname.endsWith(`.${baseDomain}`)).toBe(true);
      const ingress = peek('networking.k8s.io', 'ingresses', childNs, name)!;
      expect(ingress.spec.ingressClassName).toBe(ingressValues.className);
      expect(ingress.spec.rules[0].host).toBe(new URL(served.url as string).hostname);
      expect(ingress.metadata.annotations ?? {}).toMatchObject(ingressValues.annotations ?? {});
      if (ingressValues.tlsSecretPerIngress) {
        // Its own Secret, in its own (tenant) namespace, for cert-manager's ingress-shim to fill.
        expect(ingress.spec.tls).toEqual([{ hosts: [ingress.spec.rules[0].host], secretName: `${name}-tls` }]);
        expect(served.url).toMatch(/^https:/);
      }
    } else expect(served.url).toContain(`.${childNs}.svc`);

    // Patched: a second revision, rolled out.
    const patched = await call('PATCH', `/v2/deployments/${id}`, {
      source_revision_config: revisionSource(2),
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    const r2 = String(patched.body.latest_revision_id);
    expect(r2).not.toBe(r1);
    await built(2);
    await until('the rollout to r2', () => image(name) === imageOf(2), 30_000);
    await fake.rollout(name, 'ready');
    await until('r2 DEPLOYED', async () => (await revisionStatus(id, r2)) === 'DEPLOYED', 30_000);

    // Rolled back: the first revision redeployed.
    const back = await call('POST', `/v2/deployments/${id}/revisions/${r1}/redeploy`);
    expect(back.status, JSON.stringify(back.body)).toBe(200);
    await until('the rollout back to r1', () => image(name) === imageOf(1), 30_000);
    await fake.rollout(name, 'ready');
    await until(
      'r1 serving again',
      async () => (await call('GET', `/v2/deployments/${id}`)).body.active_revision_id === r1,
      30_000,
    );
    expect(await revisionStatus(id, r1)).toBe('DEPLOYED');

    if (gateway) {
      // agents.gateway switched off (a helm upgrade): the operator, left only get and delete on HTTPRoutes, removes
      // the route it made and serves the host through an Ingress again; nothing is left for an admin to clean up.
      const off = { ...values, 'agents.gateway': { ...gateway, enabled: false } };
      cluster.installChartRbac(off, release);
      await op?.close();
      op = startOperator(off);
      await until(
        'the HTTPRoute replaced by an Ingress',
        () =>
          !peek('gateway.networking.k8s.io', 'httproutes', childNs, name) &&
          peek('networking.k8s.io', 'ingresses', childNs, name),
        30_000,
      );
    }

    // Deleted: the resource and every child go.
    expect((await call('DELETE', `/v2/deployments/${id}`)).status).toBe(204);
    await until('the AgentDeployment gone', () => !peek('agentplane.dev', 'agentdeployments', agentNs, name), 30_000);
    await until(
      'the children gone',
      () =>
        !peek('apps', 'deployments', childNs, name) &&
        !peek('networking.k8s.io', 'ingresses', childNs, name) &&
        !peek('gateway.networking.k8s.io', 'httproutes', childNs, name) &&
        !peek('', 'services', childNs, name) &&
        !peek('apps', 'statefulsets', childNs, `${name}-postgres`),
      30_000,
    );
    // The one refusal a namespace per tenant brings to a listener: its first write of the tenant's key hashes, before
    // the operator has created the tenant's namespace and bound the listener there (it writes them again then).
    const keysBefore = `User "system:serviceaccount:${RELEASE_NS}:${listenerSpec?.serviceAccount}" cannot create resource "secrets" in API group "" in the namespace "${childNs}"`;
    const refused = [...new Set(cluster.api.denied)].filter(
      (d) => !(listenerSpec && perTenant && d.endsWith(keysBefore)),
    );
    expect(refused).toEqual([]);
  });
});
