// Tenant isolation in the pure parts: what a hostile resource_spec, secret_references or custom_url may not get,
// the NetworkPolicies, and the data-plane key mount.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { V1Ingress, V1Secret, V1ServiceAccount } from '@kubernetes/client-node';
import { kubernetesRuntimeConfigSchema } from '../../../../src/operator/runtimes/kubernetes/config.ts';
import { tenantKeysSecretName } from '../../../../src/operator/runtimes/kubernetes/labels.ts';
import {
  makeKeysWriterBinding,
  tenantNamespaceName,
} from '../../../../src/operator/runtimes/kubernetes/tenant-namespace.ts';
import {
  makeAgentNetworkPolicy,
  makeBuildNetworkPolicy,
  makePostgresNetworkPolicy,
} from '../../../../src/operator/runtimes/kubernetes/network-policy.ts';
import { makeBuildJob } from '../../../../src/operator/runtimes/kubernetes/build-job.ts';
import {
  boundsViolation,
  hostOwner,
  secretReferenceViolation,
  verifyServiceAccount,
} from '../../../../src/operator/runtimes/kubernetes/policy.ts';
import { makeDeployment } from '../../../../src/operator/runtimes/kubernetes/server.ts';
import { customHostViolation, ingressHost } from '../../../../src/operator/runtimes/kubernetes/routing.ts';
import { makePostgresStatefulSet } from '../../../../src/operator/runtimes/kubernetes/postgres.ts';
import { validateK8s } from '../../../support/kubernetes/k8s-schema.ts';
import { deploymentTarget } from '../../../support/kubernetes/target.ts';

const config = kubernetesRuntimeConfigSchema.parse({
  gitImage: 'agentplane:test',
  baseImage: 'agentplane:test',
  pushSecretName: 'registry-push',
  gitCredentialsSecretPrefix: 'git-',
  imagePullSecrets: ['regcred'],
  ingress: { baseDomain: 'agents.example.com', allowedCustomDomains: ['bots.acme.io'] },
});
const id = '3c1d7e2a-9b8f-4a6e-8d5c-1f2e3a4b5c6d';
const target = deploymentTarget(id, 'agents', 'tenant-a', 'uid-a');
const rev = `ag-${id}-r1`;
const base = { revision: rev, image: 'img@sha256:' + 'c'.repeat(64), envNames: [] as string[] };

const sa = (
  name: string,
  labels: Record<string, string> = {},
  annotations: Record<string, string> = {},
): V1ServiceAccount => ({
  apiVersion: 'v1',
  kind: 'ServiceAccount',
  metadata: { name, namespace: 'agents', labels, annotations },
});
const secret = (name: string, labels: Record<string, string> = {}, extra: Partial<V1Secret> = {}): V1Secret => ({
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { name, namespace: 'agents', labels },
  data: { key: 'dmFsdWU=' },
  ...extra,
});

describe('service accounts', () => {
  it.each([
    [
      'a missing account',
      'agentplane-control-plane',
      undefined,
      /no ServiceAccount labelled agentplane.dev\/tenant=tenant-a has this name/,
    ],
    [
      'an existing but unlabelled account',
      'agentplane-operator',
      sa('agentplane-operator'),
      /no ServiceAccount labelled agentplane.dev\/tenant=tenant-a/,
    ],
    [
      'an account labelled for another tenant',
      'b-bot',
      sa('b-bot', { 'agentplane.dev/tenant': 'tenant-b' }),
      /no ServiceAccount labelled agentplane.dev\/tenant=tenant-a/,
    ],
  ])('refuses %s', (_what, name, account, message) => {
    const r = verifyServiceAccount(name, account, 'tenant-a');
    expect(r.ok).toBe(false);
    expect(!r.ok && r.message).toMatch(message);
    expect(!r.ok && r.message).toContain(`"${name}"`);
  });

  it('accepts an account labelled for the tenant; its token only when annotated', () => {
    expect(verifyServiceAccount('a-bot', sa('a-bot', { 'agentplane.dev/tenant': 'tenant-a' }), 'tenant-a')).toEqual({
      ok: true,
      serviceAccount: { name: 'a-bot', automountToken: false },
    });
    const withToken = sa(
      'a-bot',
      { 'agentplane.dev/tenant': 'tenant-a' },
      { 'agentplane.dev/automount-token': 'true' },
    );
    expect(verifyServiceAccount('a-bot', withToken, 'tenant-a')).toEqual({
      ok: true,
      serviceAccount: { name: 'a-bot', automountToken: true },
    });
    // The opt-in is an annotation: a label does not count.
    const labelled = sa('a-bot', { 'agentplane.dev/tenant': 'tenant-a', 'agentplane.dev/automount-token': 'true' });
    expect(verifyServiceAccount('a-bot', labelled, 'tenant-a')).toEqual({
      ok: true,
      serviceAccount: { name: 'a-bot', automountToken: false },
    });
  });

  it('agent pods mount no API token by default, and the builder refuses an unverified account', () => {
    const d = makeDeployment(target, base, config);
    validateK8s(d);
    expect(d.spec!.template.spec!.automountServiceAccountToken).toBe(false);
    expect(d.spec!.template.spec!.serviceAccountName).toBeUndefined();
    expect(() =>
      makeDeployment(target, { ...base, resourceSpec: { serviceAccountName: 'agentplane-control-plane' } }, config),
    ).toThrow(/"agentplane-control-plane" was not verified/);
    expect(() =>
      makeDeployment(
        target,
        { ...base, resourceSpec: { serviceAccountName: 'x' }, serviceAccount: { name: 'y', automountToken: true } },
        config,
      ),
    ).toThrow(/not verified/);
    const ok = makeDeployment(
      target,
      {
        ...base,
        resourceSpec: { serviceAccountName: 'a-bot' },
        serviceAccount: { name: 'a-bot', automountToken: true },
      },
      config,
    );
    expect(ok.spec!.template.spec).toMatchObject({ serviceAccountName: 'a-bot', automountServiceAccountToken: true });
  });

  it('tenant labels and annotations cannot claim agentplane keys', () => {
    const d = makeDeployment(
      target,
      {
        ...base,
        resourceSpec: {
          labels: { 'agentplane.dev/tenant': 'tenant-b', team: 'x' },
          annotations: { 'agentplane.dev/automount-token': 'true' },
        },
      },
      config,
    );
    expect(d.spec!.template.metadata!.labels!['agentplane.dev/tenant']).toBe('tenant-a');
    expect(d.spec!.template.metadata!.labels!.team).toBe('x');
    expect(d.spec!.template.metadata!.annotations!['agentplane.dev/automount-token']).toBeUndefined();
  });
});

describe('secret_references', () => {
  const ref = (secretName: string, secretKey = 'key') => ({ name: 'TOKEN', secretName, secretKey });
  const mine = { 'agentplane.dev/tenant': 'tenant-a' };

  it.each([
    ['a missing Secret', ref('nope'), undefined, /does not exist or is not labelled agentplane.dev\/tenant=tenant-a/],
    [
      'an unlabelled Secret (the admin key)',
      ref('admin-key'),
      secret('admin-key'),
      /does not exist or is not labelled agentplane.dev\/tenant=tenant-a/,
    ],
    ["another tenant's Secret", ref('b-env'), secret('b-env', { 'agentplane.dev/tenant': 'tenant-b' }), /not labelled/],
    ['the push secret, even labelled', ref('registry-push'), secret('registry-push', mine), /managed by agentplane/],
    [
      "another deployment's revision env, same tenant",
      ref('ag-x-r1-env'),
      secret('ag-x-r1-env', { ...mine, 'app.kubernetes.io/managed-by': 'agentplane-operator' }),
      /managed by agentplane/,
    ],
    [
      'a control-plane secret set',
      ref('team-set'),
      secret('team-set', { ...mine, 'agentplane.dev/deployment': 'ag-x' }),
      /managed by agentplane/,
    ],
    [
      'the tenant keys Secret',
      ref(tenantKeysSecretName('tenant-a')),
      secret(tenantKeysSecretName('tenant-a'), mine),
      /managed by agentplane/,
    ],
    [
      'a token Secret',
      ref('sa-token'),
      secret('sa-token', mine, { type: 'kubernetes.io/service-account-token' }),
      /managed by agentplane/,
    ],
    [
      "the tenant's own git credentials (build-only)",
      ref('git-tenant-a', 'password'),
      secret('git-tenant-a', mine),
      /managed by agentplane/,
    ],
    ['an image pull secret, even labelled', ref('regcred'), secret('regcred', mine), /managed by agentplane/],
    [
      'a pull secret copy in a tenant namespace',
      ref('other'),
      secret('other', {
        ...mine,
        'app.kubernetes.io/managed-by': 'agentplane-operator',
        'agentplane.dev/pull-secret-copy': 'true',
      }),
      /managed by agentplane/,
    ],
    ['a key the Secret lacks', ref('a-env', 'missing'), secret('a-env', mine), /no key "missing"/],
  ])('refuses %s', (_what, r, s, message) => {
    const problem = secretReferenceViolation(r, s, 'tenant-a', config);
    expect(problem).toMatch(message);
    expect(problem).toContain(`"${r.secretName}"`);
  });

  it("accepts the tenant's own labelled Secret", () => {
    expect(secretReferenceViolation(ref('a-env'), secret('a-env', mine), 'tenant-a', config)).toBeUndefined();
  });
});

describe('custom_url', () => {
  it.each([
    ['https://evil.example.net', /outside the allowed domains \(bots.acme.io\)/],
    ['https://bots.acme.io', /outside the allowed domains/], // the suffix itself is not a subdomain of it
    ['https://xbots.acme.io', /outside the allowed domains/],
    [`https://ag-${id}.bots.acme.io`, /reserved/],
  ])('refuses %s', (url, message) => {
    expect(() => ingressHost(target, url, config)).toThrow(message);
  });

  it('allows subdomains of an allowed suffix, and nothing when none is configured', () => {
    expect(ingressHost(target, 'https://support.bots.acme.io/x', config)).toBe('support.bots.acme.io');
    expect(customHostViolation('support.bots.acme.io', [])).toMatch(/not allowed/);
    expect(ingressHost(target, null, { ...config, ingress: { ...config.ingress, allowedCustomDomains: [] } })).toBe(
      `${target.name}.agents.example.com`,
    );
  });

  it('finds the deployment already serving a host', () => {
    const ing = (ns: string, name: string, host: string): V1Ingress => ({
      metadata: { name, namespace: ns },
      spec: { rules: [{ host }] },
    });
    const list = [ing('agents', 'ag-other', 'support.bots.acme.io'), ing('agents', target.name, 'mine.bots.acme.io')];
    expect(hostOwner('support.bots.acme.io', list, target)).toBe('agents/ag-other');
    expect(hostOwner('mine.bots.acme.io', list, target)).toBeUndefined();
    expect(hostOwner('free.bots.acme.io', list, target)).toBeUndefined();
  });
});

describe('bounds', () => {
  const limits = config.limits;
  it.each([
    [{ maxScale: 11 }, /max_scale \(11\) is above the maximum scale of 10/],
    [{ minScale: 12, maxScale: 12 }, /min_scale \(12\)/],
    [{ cpu: 4.5 }, /cpu \(4.5\) is above the maximum of 4 CPU/],
    [{ cpuLimit: 8 }, /cpu_limit \(8\)/],
    [{ memoryMb: 8193 }, /memory_mb \(8193\) is above the maximum of 8192 MB/],
    [{ memoryLimitMb: 16384 }, /memory_limit_mb/],
  ])('refuses %j', (spec, message) => {
    expect(boundsViolation(spec, limits)).toMatch(message);
    expect(() => makeDeployment(target, { ...base, resourceSpec: spec }, config)).toThrow(message);
  });

  it('accepts the bounds themselves', () => {
    expect(
      boundsViolation({ minScale: 10, maxScale: 10, cpu: 4, cpuLimit: 4, memoryMb: 8192, memoryLimitMb: 8192 }, limits),
    ).toBeUndefined();
    expect(boundsViolation(undefined, limits)).toBeUndefined();
  });
});

describe('NetworkPolicies', () => {
  const agent = makeAgentNetworkPolicy(target, config);
  const db = makePostgresNetworkPolicy(target);
  const wire = (o: unknown) => JSON.parse(JSON.stringify(o).replaceAll('"_from"', '"from"'));

  it('are schema-valid and owned by the deployment', () => {
    for (const p of [agent, db]) {
      validateK8s(p);
      expect(p.metadata!.ownerReferences).toEqual([target.owner]);
      expect(p.metadata!.namespace).toBe('agents');
    }
  });

  it('deny by default and select exactly the pods of the deployment', () => {
    const server = makeDeployment(target, base, config);
    const pg = makePostgresStatefulSet(target, config);
    expect(agent.spec!.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(agent.spec!.podSelector!.matchLabels).toEqual(server.spec!.selector.matchLabels);
    expect(db.spec!.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(db.spec!.podSelector!.matchLabels).toEqual(pg.spec!.selector.matchLabels);
    expect(db.spec!.egress).toBeUndefined(); // Egress with no rule: no connection out
    expect(pg.spec!.template.spec!.automountServiceAccountToken).toBe(false);
  });

  it('let agents be called only from the ingress namespace and their own pods, on the server port', () => {
    expect(wire(agent.spec!.ingress)).toEqual([
      {
        from: [
          { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } },
          {
            podSelector: {
              matchLabels: { 'app.kubernetes.io/instance': target.name, 'app.kubernetes.io/component': 'server' },
            },
          },
        ],
        ports: [{ protocol: 'TCP', port: 8000 }],
      },
    ]);
  });

  it('let agents reach their Postgres, cluster DNS and the internet outside private ranges only', () => {
    expect(wire(agent.spec!.egress)).toEqual([
      {
        to: [
          {
            podSelector: {
              matchLabels: { 'app.kubernetes.io/instance': target.name, 'app.kubernetes.io/component': 'database' },
            },
          },
        ],
        ports: [{ protocol: 'TCP', port: 5432 }],
      },
      {
        // DNS only: to cluster DNS and the link-local resolvers (network-policy-dns.test.ts asks what that lets through).
        to: [
          { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } } },
          { ipBlock: { cidr: '169.254.20.10/32' } },
          { ipBlock: { cidr: '169.254.169.254/32' } },
        ],
        ports: [
          { protocol: 'UDP', port: 53 },
          { protocol: 'TCP', port: 53 },
        ],
      },
      {
        to: [
          {
            ipBlock: { cidr: '0.0.0.0/0', except: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16'] },
          },
        ],
      },
    ]);
    const open = makeAgentNetworkPolicy(target, {
      ...config,
      networkPolicy: {
        ...config.networkPolicy,
        agentEgressExceptCidrs: [],
        ingressNamespaceSelector: { ingress: 'yes' },
      },
    });
    validateK8s(open);
    expect(wire(open.spec!.egress)[2]).toEqual({ to: [{ ipBlock: { cidr: '0.0.0.0/0' } }] });
    expect(wire(open.spec!.ingress)[0].from[0]).toEqual({ namespaceSelector: { matchLabels: { ingress: 'yes' } } });
  });

  it("keep build pods (the repository's RUN steps) off cloud metadata and closed to connections", () => {
    const build = makeBuildNetworkPolicy(target, config);
    validateK8s(build);
    expect(build.metadata!.ownerReferences).toEqual([target.owner]);
    const job = makeBuildJob(
      target,
      { revision: rev, repoUrl: 'https://x/y.git', repoRef: 'main', graphConfigPath: 'langgraph.json' },
      config,
    );
    expect(job.spec!.template.metadata!.labels).toMatchObject(build.spec!.podSelector!.matchLabels!);
    expect(build.spec!.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(build.spec!.ingress).toBeUndefined();
    expect(wire(build.spec!.egress)[1]).toEqual({
      to: [{ ipBlock: { cidr: '0.0.0.0/0', except: ['169.254.0.0/16'] } }],
    });
    // Agent pods are not selected by it (nor build pods by theirs).
    expect(build.spec!.podSelector!.matchLabels!['app.kubernetes.io/component']).toBe('build');
  });

  it("let only the deployment's agents reach its Postgres", () => {
    expect(wire(db.spec!.ingress)).toEqual([
      {
        from: [
          {
            podSelector: {
              matchLabels: { 'app.kubernetes.io/instance': target.name, 'app.kubernetes.io/component': 'server' },
            },
          },
        ],
        ports: [{ protocol: 'TCP', port: 5432 }],
      },
    ]);
  });
});

describe('data-plane API keys', () => {
  it('names the tenant keys Secret from a hash of the tenant id', () => {
    const name = tenantKeysSecretName('tenant-a');
    expect(name).toBe(`agentplane-keys-${createHash('sha256').update('tenant-a').digest('hex').slice(0, 16)}`);
    expect(name).toMatch(/^agentplane-keys-[0-9a-f]{16}$/);
    expect(tenantKeysSecretName('Tenant With Spaces/é')).toMatch(/^agentplane-keys-[0-9a-f]{16}$/);
  });

  it('mounts the whole Secret read-only (no subPath, so updates arrive) and passes --auth-keys-file', () => {
    const d = makeDeployment(target, base, config);
    validateK8s(d);
    const pod = d.spec!.template.spec!;
    const c = pod.containers[0]!;
    expect(c.args).toEqual(['agent-server', '--auth-keys-file', '/var/run/agentplane/keys/keys.json']);
    // Beside the agent's /tmp (its only writable folder: the root filesystem is read-only).
    expect(c.volumeMounts).toEqual([
      { name: 'tmp', mountPath: '/tmp' },
      { name: 'api-keys', mountPath: '/var/run/agentplane/keys', readOnly: true },
    ]);
    expect(c.volumeMounts!.some((m) => m.subPath)).toBe(false);
    expect(pod.volumes!.slice(1)).toEqual([
      { name: 'api-keys', secret: { secretName: tenantKeysSecretName('tenant-a'), optional: true } },
    ]);
  });

  it('leaves a public deployment without keys', () => {
    const d = makeDeployment(target, { ...base, public: true }, config);
    expect(d.spec!.template.spec!.containers[0]!.args).toBeUndefined();
    expect(d.spec!.template.spec!.volumes!.map((v) => v.name)).toEqual(['tmp']);
  });
});

describe('tenant namespaces', () => {
  it('are <prefix><tenant> for ids that are already names, else sanitised with a hash, within 63 characters', () => {
    expect(tenantNamespaceName('agentplane-t-', 'team-a')).toBe('agentplane-t-team-a');
    const odd = tenantNamespaceName('agentplane-t-', 'Team_A');
    expect(odd).toMatch(/^agentplane-t-team-a-[0-9a-f]{8}$/);
    expect(odd).not.toBe(tenantNamespaceName('agentplane-t-', 'team_a')); // sanitising never merges two tenants
    const long = tenantNamespaceName('agentplane-t-', 'x'.repeat(80));
    expect(long.length).toBeLessThanOrEqual(63);
    expect(long).toMatch(/^agentplane-t-x+-[0-9a-f]{8}$/);
    expect(tenantNamespaceName('agentplane-t-', '___')).toMatch(/^agentplane-t-[0-9a-f]{8}$/);
    for (const n of [odd, long]) expect(n).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
  });

  it('let the control plane keep the keys Secret there through a RoleBinding to a Secrets-only ClusterRole', () => {
    const rb = makeKeysWriterBinding(
      'agentplane-t-tenant-a',
      { namespace: 'agentplane', name: 'agentplane-control-plane' },
      'agentplane-tenant-keys',
    );
    validateK8s(rb);
    expect(rb.metadata!.namespace).toBe('agentplane-t-tenant-a');
    expect(rb.roleRef).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: 'agentplane-tenant-keys',
    });
    expect(rb.subjects).toEqual([
      { kind: 'ServiceAccount', name: 'agentplane-control-plane', namespace: 'agentplane' },
    ]);
  });

  it('children there carry no owner reference (it could not cross namespaces)', () => {
    const { owner: _o, ...rest } = target;
    const d = makeDeployment({ ...rest, namespace: 'agentplane-t-tenant-a' }, base, config);
    validateK8s(d);
    expect(d.metadata!.ownerReferences).toBeUndefined();
    expect(d.metadata!.namespace).toBe('agentplane-t-tenant-a');
    expect(d.metadata!.labels!['agentplane.dev/deployment']).toBe(target.name);
  });
});
