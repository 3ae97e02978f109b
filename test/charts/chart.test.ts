// The Helm chart's files: values validate against values.schema.json, bad values are refused, the chart's CRDs are
// the generated ones, and templates only read values that exist (chart-render.test.ts renders it with helm).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { parse, parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { operatorCommand } from '../../src/operator/flags.ts';
import { controlPlaneCommand } from '../../src/control-plane/config.ts';
import { listenerCommand } from '../../src/listener/config.ts';
import { activatorCommand } from '../../src/operator/activator/command.ts';
import { uninstallCommand } from '../../src/operator/uninstall.ts';
import type { CommandSpec } from '../../src/lib/cli-args.ts';
import { DEFAULT_DNS_PEERS } from '../../src/operator/runtimes/kubernetes/config.ts';

const chart = join(import.meta.dirname, '../../charts/agentplane');
const values = parse(readFileSync(join(chart, 'values.yaml'), 'utf8')) as Record<string, unknown>;
const schema = JSON.parse(readFileSync(join(chart, 'values.schema.json'), 'utf8')) as object;
const validate = new Ajv({ allErrors: true, strict: false }).compile(schema);

function withValue(path: string, value: unknown): Record<string, unknown> {
  const copy = structuredClone(values);
  const keys = path.split('.');
  let node = copy as Record<string, unknown>;
  for (const k of keys.slice(0, -1)) node = node[k] as Record<string, unknown>;
  node[keys.at(-1)!] = value;
  return copy;
}

describe('values.schema.json', () => {
  it('accepts the default values.yaml', () => {
    expect(validate(values), JSON.stringify(validate.errors)).toBe(true);
  });

  it('accepts a typical production configuration', () => {
    let v = withValue('build.registry', 'registry.example.com/agents');
    v = { ...v, build: { ...(v.build as object), pushSecret: 'registry-push' } };
    const ok = structuredClone(v) as {
      controlPlane: { ingress: Record<string, unknown> };
      agents: { ingress: Record<string, unknown> };
    };
    ok.controlPlane.ingress = {
      enabled: true,
      host: 'agentplane.example.com',
      className: 'nginx',
      tlsSecretName: 'tls',
      annotations: {},
    };
    ok.agents.ingress = { className: 'nginx', baseDomain: 'agents.example.com', tlsSecretName: '' };
    expect(validate(ok), JSON.stringify(validate.errors)).toBe(true);
  });

  it.each([
    ['image.pullPolicy', 'Sometimes'],
    ['operator.replicas', -1],
    ['operator.leaderElection.leaseDurationSeconds', 1],
    ['operator.logLevel', 'verbose'],
    ['controlPlane.bootstrapApiKey.value', 'short'],
    ['controlPlane.service.port', 70000],
    ['build.registry', 'https://registry.example.com'],
    ['build.timeoutSeconds', '30m'],
    ['agents.ingress.baseDomain', 'Agents_Example'],
    ['agents.postgres.storageSize', '1 gigabyte'],
    ['agents.postgres.mode', 'internal'],
    ['agents.defaultResources.cpu', 0],
    ['operator.resources', { requests: { memory: 'lots' } }],
    ['operator.typo', true],
    ['agents.ingress.allowedCustomDomains', ['https://bots.example.com']],
    ['agents.limits.maxScale', 0],
    ['agents.limits.maxCpu', '4 cores'],
    ['build.resources', { requests: { cpu: '1' }, limits: { cpu: '2', memory: '4Gi' } }],
    ['build.workspaceSizeLimit', 'big'],
    ['networkPolicy.agentEgressExceptCidrs', ['10.0.0.0']],
    ['networkPolicy.buildEgressExceptCidrs', ['metadata']],
    ['networkPolicy.ingressNamespaceSelector', {}],
    ['agents.tenantNamespacePrefix', 'Tenants_'],
    ['agents.namespacePerTenant', 'yes'],
  ])('refuses %s = %j', (path, value) => {
    expect(validate(withValue(path, value))).toBe(false);
  });

  it('requires a host when the control plane ingress is enabled', () => {
    expect(validate(withValue('controlPlane.ingress.enabled', true))).toBe(false);
  });
});

describe('chart files', () => {
  it('ships exactly the generated CRDs', () => {
    const generated = readdirSync(join(chart, '../../crds'))
      .filter((f) => f.endsWith('.yaml'))
      .sort();
    expect(readdirSync(join(chart, 'crds')).sort()).toEqual(generated);
    for (const f of generated) {
      expect(
        readFileSync(join(chart, 'crds', f), 'utf8'),
        `charts/agentplane/crds/${f} differs from crds/${f}: copy it again`,
      ).toBe(readFileSync(join(chart, '../../crds', f), 'utf8'));
    }
  });

  it('templates read only values that values.yaml defines', () => {
    const dir = join(chart, 'templates');
    const missing: string[] = [];
    for (const f of readdirSync(dir)) {
      const text = readFileSync(join(dir, f), 'utf8');
      for (const m of text.matchAll(/\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)/g)) {
        let node: unknown = values;
        for (const k of m[1]!.slice(1).split('.')) node = (node as Record<string, unknown> | undefined)?.[k];
        if (node === undefined) missing.push(`${f}: .Values${m[1]}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('Chart.yaml is a v2 application chart', () => {
    const meta = parse(readFileSync(join(chart, 'Chart.yaml'), 'utf8')) as Record<string, string>;
    expect(meta).toMatchObject({ apiVersion: 'v2', name: 'agentplane', type: 'application' });
    expect(parseAllDocuments(readFileSync(join(chart, 'values.yaml'), 'utf8'))).toHaveLength(1);
  });

  it.each([
    ['operator.yaml', operatorCommand, ['POD_NAME', 'POD_NAMESPACE']],
    // Bounds, custom domains and tenant namespaces: the chart passes the operator's values to the control plane under
    // the same names, and the control plane reads every one of them.
    ['control-plane.yaml', controlPlaneCommand, []],
    ['listener.yaml', listenerCommand, []],
    ['activator.yaml', activatorCommand, []],
  ] as [string, CommandSpec, string[]][])(
    '%s sets only variables its command reads, and covers every operator setting',
    (file, command, extra) => {
      const own = readFileSync(join(chart, 'templates', file), 'utf8');
      // Variables set by named templates the file includes (e.g. agentplane.githubEnv) count as set by the file.
      const helpers = readFileSync(join(chart, 'templates', '_helpers.tpl'), 'utf8');
      const included = [...own.matchAll(/include "([\w.]+)"/g)].map((m) => m[1]!);
      const text = [
        own,
        ...included.map(
          (name) => new RegExp(`define "${name.replace(/\./g, '\\.')}"[\\s\\S]*?{{-? end -}}`).exec(helpers)?.[0] ?? '',
        ),
      ].join('\n');
      const set = [...text.matchAll(/- name: ([A-Z_]+)\n/g)].map((m) => m[1]!);
      // Read from the environment only (secrets: never a flag), next to the flags' variables.
      const envOnly = [
        'AGENTPLANE_GITHUB_APP_PRIVATE_KEY',
        'AGENTPLANE_GITHUB_WEBHOOK_SECRET',
        'AGENTPLANE_GITHUB_APP_CLIENT_SECRET',
      ];
      const known = new Set([...Object.values(command.options).flatMap((o) => o.env ?? []), ...extra, ...envOnly]);
      expect(set.filter((n) => !known.has(n))).toEqual([]);
      if (command === operatorCommand) {
        // Every operator flag except the local ones is reachable from the chart (in a cluster, agent pods are asked
        // for their activity at their own address: the flag's other addresses are for an operator outside one).
        const local = new Set(['kubeconfig', 'identity', 'lease-namespace', 'agent-activity-url']);
        // The App key file is the flag's form; the chart gives the PEM itself from a Secret.
        const alternatives: Record<string, string> = {
          'github-app-private-key-file': 'AGENTPLANE_GITHUB_APP_PRIVATE_KEY',
        };
        const unset = Object.entries(command.options).filter(
          ([flag, o]) => !local.has(flag) && ![...(o.env ?? []), alternatives[flag] ?? ''].some((e) => set.includes(e)),
        );
        expect(unset.map(([flag]) => flag)).toEqual([]);
      }
    },
  );
});

describe('the chart runs commands only with flags they declare', () => {
  it.each([
    ['operator.yaml', 'operator', operatorCommand],
    ['control-plane.yaml', 'control-plane', controlPlaneCommand],
    ['listener.yaml', 'listener', listenerCommand],
    ['activator.yaml', 'activator', activatorCommand],
    ['uninstall-hook.yaml', 'uninstall', uninstallCommand],
  ] as [string, string, CommandSpec][])('%s: args name %s and its own flags only', (file, name, command) => {
    const text = readFileSync(join(chart, 'templates', file), 'utf8');
    const args = [...text.matchAll(/^\s+args: \[(.*)\]$/gm)].map((m) => m[1]!);
    expect(args).toHaveLength(1);
    expect(args[0]).toMatch(new RegExp(`^"${name}"`));
    const flags = [...args[0]!.matchAll(/"--([a-z0-9-]+)"/g)].map((m) => m[1]!);
    expect(flags.filter((f) => !(f in command.options))).toEqual([]);
  });
});

describe('isolation in the chart', () => {
  const template = (f: string) => readFileSync(join(chart, 'templates', f), 'utf8');

  it('passes the same bounds and custom domains to the control plane and the operator', () => {
    for (const f of ['control-plane.yaml', 'operator.yaml']) {
      const text = template(f);
      for (const [name, value] of [
        ['AGENTPLANE_MAX_SCALE', '.Values.agents.limits.maxScale'],
        ['AGENTPLANE_MAX_CPU', '.Values.agents.limits.maxCpu'],
        ['AGENTPLANE_MAX_MEMORY_MB', '.Values.agents.limits.maxMemoryMb'],
        ['AGENTPLANE_ALLOWED_CUSTOM_DOMAINS', 'join "," .Values.agents.ingress.allowedCustomDomains'],
      ] as [string, string][]) {
        expect(text, `${f} ${name}`).toMatch(
          new RegExp(
            `- name: ${name}\\n\\s+value: \\{\\{ ${value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\| quote \\}\\}`,
          ),
        );
      }
    }
    expect(values.agents).toMatchObject({
      limits: { maxScale: 10, maxCpu: 4, maxMemoryMb: 8192 },
      ingress: { allowedCustomDomains: [] },
    });
  });

  it('lets the operator manage NetworkPolicies and read ServiceAccounts', () => {
    const rbac = template('operator-rbac.yaml');
    expect(rbac).toMatch(
      /resources: \["networkpolicies"\]\n\s+verbs: \["get", "list", "watch", "create", "patch", "update"/,
    );
    expect(rbac).toMatch(/resources: \["serviceaccounts"\]\n\s+verbs: \["get"\]/);
    // A namespace per tenant: the control plane gets a ClusterRole for Secrets (and reading the ServiceAccounts
    // deployments name), bound per tenant namespace by the operator, which may bind that role and no other.
    const cp = template('control-plane-rbac.yaml');
    expect(cp).toMatch(
      /kind: ClusterRole\n[\s\S]*-tenant-keys\n[\s\S]*rules:\n\s+- apiGroups: \[""\]\n\s+resources: \["secrets"\]\n[^\n]+\n(?:\s+#[^\n]*\n)?\s+- apiGroups: \[""\]\n\s+resources: \["serviceaccounts"\]\n\s+verbs: \["get"\]\n\{\{- end \}\}/,
    );
    expect(rbac).toMatch(
      /resources: \["clusterroles"\]\n\s+verbs: \["bind"\]\n\s+resourceNames: \[\{\{ printf "%s-tenant-keys"/,
    );
    expect(template('operator.yaml')).toContain(
      '- name: AGENTPLANE_TENANT_KEYS_ROLE\n              value: {{ printf "%s-tenant-keys"',
    );
    // A namespace per tenant: a ClusterRole allowed to create namespaces, not to act in every namespace.
    expect(rbac).toContain('{{- $clusterWide := .Values.operator.clusterWideRbac }}');
    expect(rbac).toMatch(
      /name: \{\{ \$name \}\}-namespaces\n(\s+.*\n)*?rules:\n\s+- apiGroups: \[""\]\n\s+resources: \["namespaces"\]\n\s+verbs: \["get", "create"\]/,
    );
    expect(rbac).toMatch(/resources: \["secrets"\]\n\s+verbs: \["get"/);
  });

  it('protects the control plane (its API port only) and the operator (nothing in) when policies are on', () => {
    const text = template('networkpolicy.yaml');
    expect(text.startsWith('{{- if .Values.networkPolicy.enabled }}')).toBe(true);
    const docs = text.split('\n---\n');
    expect(docs[0]).toContain('component" "control-plane"');
    expect(docs[0]).toMatch(/ingress:\n\s+- ports:\n\s+- \{ protocol: TCP, port: 8080 \}/);
    expect(template('control-plane.yaml')).toMatch(/containerPort: 8080/);
    expect(docs[1]).toContain('component" "operator"');
    expect(docs[1]).toContain('policyTypes: ["Ingress"]');
    // Only the metrics scrape gets in, and only with the ServiceMonitor on (chart-render.test.ts renders both).
    expect(docs[1]!.split('{{- if .Values.metrics.serviceMonitor.enabled }}')[0]).not.toContain('ingress:');
    expect(values.networkPolicy).toEqual({
      enabled: true,
      ingressNamespaceSelector: { 'kubernetes.io/metadata.name': 'ingress-nginx' },
      agentEgressExceptCidrs: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16'],
      buildEgressExceptCidrs: ['169.254.0.0/16'],
      // The chart's defaults are the operator's: a bare `agentplane operator` resolves names like an installed one.
      dnsPeers: DEFAULT_DNS_PEERS,
      dnsPorts: [53],
      agentIngressFrom: [],
    });
  });
});
