import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/lib/cli-args.ts';
import { parseOperatorConfig } from '../../src/operator/config.ts';
import { operatorCommand } from '../../src/operator/flags.ts';

describe('agentplane operator configuration', () => {
  it('reads the variables the Helm chart sets', () => {
    const c = parseOperatorConfig([], {
      AGENTPLANE_NAMESPACE: 'agents',
      POD_NAMESPACE: 'agentplane',
      POD_NAME: 'agentplane-operator-abc',
      AGENTPLANE_REGISTRY: 'registry.example.com/agents',
      AGENTPLANE_PUSH_SECRET: 'push',
      AGENTPLANE_BASE_IMAGE: 'registry.example.com/agentplane:1',
      AGENTPLANE_LEADER_ELECT: 'true',
      AGENTPLANE_LEASE_DURATION: '20',
      AGENTPLANE_BASE_DOMAIN: 'agents.example.com',
      AGENTPLANE_INGRESS_CLASS: '',
      AGENTPLANE_DEFAULT_CPU: '0.25',
      AGENTPLANE_POSTGRES_MODE: 'external',
      AGENTPLANE_BUILD_JOB_TTL: '600',
    })!;
    expect(c).toMatchObject({
      namespace: 'agents',
      leaseNamespace: 'agentplane',
      identity: 'agentplane-operator-abc',
      leaderElect: true,
      leaseDurationMs: 20_000,
    });
    expect(c.runtime).toMatchObject({
      registry: 'registry.example.com/agents',
      pushSecretName: 'push',
      baseImage: 'registry.example.com/agentplane:1',
      gitImage: 'registry.example.com/agentplane:1',
      ingress: { baseDomain: 'agents.example.com' },
      defaults: { cpu: 0.25, memoryMb: 512 },
      postgres: { mode: 'external', image: 'postgres:16-alpine', storageSize: '1Gi' },
      buildJobTtlSeconds: 600,
    });
    expect(c.runtime.ingress.className).toBeUndefined(); // empty values from the chart mean "unset"
  });

  it('reads the isolation settings (bounds and custom domains under the names the control plane reads too)', () => {
    const c = parseOperatorConfig([], {
      AGENTPLANE_ALLOWED_CUSTOM_DOMAINS: 'bots.example.com, *.agents.acme.io',
      AGENTPLANE_MAX_SCALE: '4',
      AGENTPLANE_MAX_CPU: '2.5',
      AGENTPLANE_MAX_MEMORY_MB: '4096',
      AGENTPLANE_NETWORK_POLICY: 'false',
      AGENTPLANE_INGRESS_NAMESPACE_SELECTOR: 'kubernetes.io/metadata.name=traefik,tier=edge',
      AGENTPLANE_AGENT_EGRESS_EXCEPT_CIDRS: 'none',
      AGENTPLANE_BUILD_PULL_SECRET: 'pull',
      AGENTPLANE_BUILD_MEMORY_LIMIT: '8Gi',
      AGENTPLANE_BUILD_WORKSPACE_SIZE: '6Gi',
      AGENTPLANE_NAMESPACE_PER_TENANT: 'true',
      AGENTPLANE_TENANT_NAMESPACE_PREFIX: 'tn-',
      AGENTPLANE_TENANT_KEYS_WRITER: 'agentplane/agentplane-control-plane',
      AGENTPLANE_TENANT_KEYS_ROLE: 'agentplane-tenant-keys',
    })!;
    expect(c.runtime).toMatchObject({
      ingress: { allowedCustomDomains: ['bots.example.com', 'agents.acme.io'] },
      limits: { maxScale: 4, maxCpu: 2.5, maxMemoryMb: 4096 },
      networkPolicy: {
        enabled: false,
        ingressNamespaceSelector: { 'kubernetes.io/metadata.name': 'traefik', tier: 'edge' },
        agentEgressExceptCidrs: [],
      },
      buildPullSecretName: 'pull',
      buildResources: { requests: { cpu: '500m', memory: '1Gi' }, limits: { cpu: '2', memory: '8Gi' } },
      buildWorkspaceSize: '6Gi',
      buildCacheSize: '10Gi',
      tenantNamespaces: {
        enabled: true,
        prefix: 'tn-',
        keysWriter: { namespace: 'agentplane', name: 'agentplane-control-plane' },
        keysRole: 'agentplane-tenant-keys',
      },
    });
    const d = parseOperatorConfig([], {})!;
    expect(d.runtime.ingress.allowedCustomDomains).toEqual([]);
    expect(d.runtime.networkPolicy.enabled).toBe(true);
    expect(d.runtime.networkPolicy.agentEgressExceptCidrs).toEqual([
      '10.0.0.0/8',
      '172.16.0.0/12',
      '192.168.0.0/16',
      '169.254.0.0/16',
    ]);
  });

  it('lets flags win over the environment', () => {
    const c = parseOperatorConfig(['--namespace', 'flagged', '--leader-elect', 'false'], {
      AGENTPLANE_NAMESPACE: 'env',
      AGENTPLANE_LEADER_ELECT: 'true',
    })!;
    expect([c.namespace, c.leaderElect]).toEqual(['flagged', false]);
  });

  it.each([
    [['--lease-duration', 'soon'], /--lease-duration/],
    [['--postgres-mode', 'internal'], /--postgres-mode/],
    [['--namespace', 'Not_A_Name'], /--namespace/],
    [['--leader-elect', 'yes'], /--leader-elect/],
    [['--max-scale', 'many'], /--max-scale/],
    [['--max-cpu', '0'], /--max-cpu/],
    [['--allowed-custom-domains', 'https://x.io'], /--allowed-custom-domains/],
    [['--network-policy', 'on'], /--network-policy/],
    [['--agent-egress-except', '10.0.0.0'], /--agent-egress-except/],
    [['--ingress-namespace-selector', 'justakey'], /--ingress-namespace-selector/],
    [['--ingress-annotations', '{"bad key!":"x"}'], /--ingress-annotations: annotation key "bad key!"/],
    [['--ingress-annotations', '{"cert-manager.io/cluster-issuer":'], /--ingress-annotations: not JSON/],
    [['--ingress-tls-per-ingress', 'yes'], /--ingress-tls-per-ingress/],
    [['--ingress-tls-per-ingress', 'true', '--ingress-tls-secret', 'wild'], /--ingress-tls-per-ingress: a shared TLS/],
    [['--build-memory-limit', 'lots'], /--build-memory-limit/],
    [['--namespace-per-tenant', 'yes'], /--namespace-per-tenant/],
    [['--tenant-namespace-prefix', 'Bad_'], /--tenant-namespace-prefix/],
    [['--tenant-keys-writer', 'just-a-name'], /--tenant-keys-writer/],
    [['--no-such-flag'], /no-such-flag/],
    [['--source-fetch-url', 'http://cp'], /--source-fetch-url and --source-uploads-key go together/],
    [['--source-fetch-url', 'http://cp', '--source-uploads-key', 'c2hvcnQ='], /--source-uploads-key: must be/],
    [
      ['--source-fetch-url', 'ftp://cp', '--source-uploads-key', Buffer.alloc(32).toString('base64')],
      /--source-fetch-url: must be an http\(s\) URL/,
    ],
    [
      ['--listener-id', 'x', '--listener-tenant', 't', '--listener-api-key', 'k'],
      /\(missing: --listener-control-plane-url\)/,
    ],
    [
      [
        '--listener-control-plane-url',
        'ftp://cp',
        '--listener-tenant',
        't',
        '--listener-id',
        'x',
        '--listener-api-key',
        'k',
      ],
      /--listener-control-plane-url: must be http\(s\)/,
    ],
  ])('refuses %j naming the flag', (argv, message) => {
    expect(() => parseOperatorConfig(argv, {})).toThrow(UsageError);
    expect(() => parseOperatorConfig(argv, {})).toThrow(message);
  });

  it('reads the listener settings of a data-plane-only install (all four), the key from the environment', () => {
    const env = {
      AGENTPLANE_LISTENER_CONTROL_PLANE_URL: 'https://cp.example.com/',
      AGENTPLANE_LISTENER_TENANT: 'team-a',
      AGENTPLANE_LISTENER_ID: '0b7c3a4e-5f6d-4e8f-9a0b-1c2d3e4f5a6b',
      AGENTPLANE_LISTENER_API_KEY: 'apk_listener',
    };
    expect(parseOperatorConfig([], env)!.listener).toEqual({
      controlPlaneUrl: 'https://cp.example.com',
      tenant: 'team-a',
      listenerId: '0b7c3a4e-5f6d-4e8f-9a0b-1c2d3e4f5a6b',
      apiKey: 'apk_listener',
    });
    expect(parseOperatorConfig([], {})!).not.toHaveProperty('listener');
    expect(() => parseOperatorConfig([], { ...env, AGENTPLANE_LISTENER_API_KEY: '' })).toThrow(
      /\(missing: --listener-api-key\)/,
    );
  });

  it('documents every flag in --help', () => {
    const help = execFileSync(
      process.execPath,
      [join(import.meta.dirname, '../../bin/agentplane.mjs'), 'operator', '--help'],
      { encoding: 'utf8' },
    );
    for (const flag of Object.keys(operatorCommand.options)) expect(help).toContain(`--${flag}`);
    expect(help).toContain('AGENTPLANE_REGISTRY');
  });
});
