// The Helm chart without a helm binary: values validate against values.schema.json, bad values are refused,
// the chart's CRDs are the generated ones, and templates only read values that exist.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { parse, parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { operatorCommand } from '../../src/operator/config.ts';
import { controlPlaneCommand } from '../../src/control-plane/config.ts';
import type { CommandSpec } from '../../src/lib/cli-args.ts';

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
    const ok = structuredClone(v) as { controlPlane: { ingress: Record<string, unknown> }; agents: { ingress: Record<string, unknown> } };
    ok.controlPlane.ingress = { enabled: true, host: 'agentplane.example.com', className: 'nginx', tlsSecretName: 'tls', annotations: {} };
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
  ])('refuses %s = %j', (path, value) => {
    expect(validate(withValue(path, value))).toBe(false);
  });

  it('requires a host when the control plane ingress is enabled', () => {
    expect(validate(withValue('controlPlane.ingress.enabled', true))).toBe(false);
  });
});

describe('chart files', () => {
  it('ships exactly the generated CRDs', () => {
    const generated = readdirSync(join(chart, '../../crds')).filter((f) => f.endsWith('.yaml')).sort();
    expect(readdirSync(join(chart, 'crds')).sort()).toEqual(generated);
    for (const f of generated) {
      expect(readFileSync(join(chart, 'crds', f), 'utf8'), `charts/agentplane/crds/${f} differs from crds/${f}: copy it again`).toBe(
        readFileSync(join(chart, '../../crds', f), 'utf8'),
      );
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
    ['control-plane.yaml', controlPlaneCommand, []],
  ] as [string, CommandSpec, string[]][])('%s sets only variables its command reads, and covers every operator setting', (file, command, extra) => {
    const text = readFileSync(join(chart, 'templates', file), 'utf8');
    const set = [...text.matchAll(/- name: ([A-Z_]+)\n/g)].map((m) => m[1]!);
    const known = new Set([...Object.values(command.options).flatMap((o) => o.env ?? []), ...extra]);
    expect(set.filter((n) => !known.has(n))).toEqual([]);
    if (command === operatorCommand) {
      // Every operator flag except the local ones is reachable from the chart.
      const local = new Set(['kubeconfig', 'identity', 'lease-namespace']);
      const unset = Object.entries(command.options).filter(([flag, o]) => !local.has(flag) && !(o.env ?? []).some((e) => set.includes(e)));
      expect(unset.map(([flag]) => flag)).toEqual([]);
    }
  });
});
