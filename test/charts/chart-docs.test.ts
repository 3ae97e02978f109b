// The values docs/kubernetes.md shows, as an administrator would copy them: every `helm install` / `helm upgrade`
// command of its sh blocks and every values file (a yaml block starting with `# values:`, applied on top of the
// documented install) is linted (`helm lint --strict`) and rendered by the real helm (3.17), and every rendered
// object must be valid against the official Kubernetes schemas. The upgrade command's flags must exist in that helm.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { CHART_DIR, helm } from '../support/helm/index.ts';
import { parseOperatorConfig } from '../../src/operator/config.ts';
import { validateK8s } from '../support/kubernetes/k8s-schema.ts';

type Json = Record<string, any>;

const DOC = readFileSync(join(import.meta.dirname, '../../docs/kubernetes.md'), 'utf8');
const blocks = (lang: string) =>
  [...DOC.matchAll(new RegExp('^```' + lang + '\\n([\\s\\S]*?)^```', 'gm'))].map((m) => m[1]!);

/** Words of a shell command line: whitespace-separated, '...' and "..." quoting, no expansion. */
function words(line: string): string[] {
  const out: string[] = [];
  for (const m of line.matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)) out.push(m[1] ?? m[2] ?? m[3]!);
  return out;
}

/** The helm install/upgrade commands of the sh blocks, continuation lines joined, comments dropped. */
const COMMANDS = blocks('sh')
  .flatMap((b) => b.replace(/\\\n\s*/g, ' ').split('\n'))
  .map((l) => l.replace(/\s+#.*$/, '').trim())
  .filter((l) => /^helm (install|upgrade) /.test(l))
  .map(words);

/** The --set / --set-string / --set-json arguments of a command (the `...` placeholders dropped). */
const setArgs = (cmd: string[]) =>
  cmd.flatMap((w, i) => (/^--set(-string|-json)?$/.test(w) && cmd[i + 1] ? [w, cmd[i + 1]!] : []));

const INSTALL = COMMANDS.find((c) => c[1] === 'install' && c.includes('--set'))!;

const VALUES_FILES = blocks('yaml')
  .filter((b) => b.startsWith('# values:'))
  .map((b) => [b.split('\n')[0]!.replace('# values: ', ''), b] as const);

const dir = mkdtempSync(join(tmpdir(), 'chart-docs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** helm lint --strict and helm template with `args`; returns the rendered objects. */
function lintAndRender(args: string[]): Json[] {
  const lint = helm(['lint', CHART_DIR, '--strict', '--namespace', 'agentplane', ...args]);
  expect(lint.ok ? '' : lint.stderr).toBe('');
  const r = helm(['template', 'agentplane', CHART_DIR, '--namespace', 'agentplane', '--include-crds', ...args]);
  if (!r.ok) throw new Error(r.stderr);
  return parseAllDocuments(r.stdout)
    .map((d) => d.toJSON() as Json)
    .filter((d) => d && typeof d === 'object');
}

function expectValid(docs: Json[]) {
  for (const doc of docs) {
    // The Prometheus Operator's CRD kind has no schema in kubernetes-models; its wiring is checked in
    // chart-render.test.ts.
    if (doc.kind === 'ServiceMonitor') {
      expect(doc.apiVersion).toBe('monitoring.coreos.com/v1');
      continue;
    }
    expect(() => validateK8s(doc), `${doc.kind}/${doc.metadata?.name}`).not.toThrow();
  }
}

describe('docs/kubernetes.md values, rendered by the real helm', () => {
  it('finds the documented commands and values files', () => {
    expect(INSTALL).toBeDefined();
    expect(COMMANDS.some((c) => c[1] === 'upgrade')).toBe(true);
    expect(VALUES_FILES.length).toBeGreaterThanOrEqual(6);
  });

  it.each(COMMANDS.map((c) => [c.join(' '), c] as const))('%s', (_line, cmd) => {
    expectValid(lintAndRender(setArgs(cmd)));
  });

  it.each(VALUES_FILES)('values: %s', (name, yaml) => {
    const file = join(dir, `${name.replace(/[^a-z0-9]+/gi, '-')}.yaml`);
    writeFileSync(file, yaml);
    const docs = lintAndRender([...setArgs(INSTALL), '-f', file]);
    expectValid(docs);
    expect(docs.some((d) => d.kind === 'Deployment' && /operator$/.test(d.metadata.name))).toBe(true);
  });

  it('uses only upgrade flags the helm it documents (3.17) has', () => {
    const help = helm(['upgrade', '--help']);
    expect(help.ok).toBe(true);
    const flags = COMMANDS.filter((c) => c[1] === 'upgrade').flatMap((c) => c.filter((w) => w.startsWith('--')));
    expect(flags).toContain('--reset-then-reuse-values');
    for (const flag of flags) expect((help as { stdout: string }).stdout, flag).toContain(`${flag} `);
  });
});

describe('an upgrade with --reuse-values from a chart without the newer values', () => {
  // --reuse-values keeps the old chart's defaults, so values added since are simply absent (null removes a key).
  it('still renders, and the operator reads what the chart hands it', () => {
    const docs = lintAndRender([
      ...['podDisruptionBudget', 'serviceAccount', 'nodeSelector', 'tolerations', 'podLabels'].flatMap((k) => [
        '--set-json',
        `${k}=null`,
      ]),
      '--set-json',
      'agents.ingress.annotations=null',
      '--set-json',
      'agents.ingress.tlsSecretPerIngress=null',
    ]);
    expectValid(docs);
    const op = docs.find((d) => d.kind === 'Deployment' && d.metadata.name === 'agentplane-operator')!;
    const env = Object.fromEntries(
      (op.spec.template.spec.containers[0].env as Json[]).filter((e) => 'value' in e).map((e) => [e.name, e.value]),
    );
    const config = parseOperatorConfig([], { ...env, POD_NAMESPACE: 'agentplane', POD_NAME: 'op-0' })!;
    expect(config.runtime.ingress.annotations).toEqual({});
    expect(config.runtime.ingress.tlsSecretPerIngress).toBe(false);
    expect(docs.filter((d) => d.kind === 'PodDisruptionBudget')).toEqual([]);
  });
});
