// Writes the reference tables of docs/ (flags, environment variables, defaults, chart values) from the command
// specs and the chart's values.schema.json + values.yaml, into the regions between
// `<!-- generated:<id> -->` and `<!-- /generated -->`. Everything outside those regions is hand-written.
// `npm run gen:docs` writes; test/docs/reference-tables.test.ts fails when a region is stale.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isMap, isScalar, isSeq, parseDocument, type Document } from 'yaml';
import { agentServerCommand } from '../src/agent-server/flags.ts';
import { apiKeyCommand } from '../src/control-plane/api-key-command.ts';
import { secretKeyCommand } from '../src/control-plane/secret-key-command.ts';
import { controlPlaneCommand } from '../src/control-plane/config.ts';
import { devCommand } from '../src/dev/config.ts';
import { backupCommand, restoreCommand } from '../src/dev/backup-command.ts';
import { operatorCommand } from '../src/operator/flags.ts';
import { uninstallCommand } from '../src/operator/uninstall.ts';
import { activatorCommand } from '../src/operator/activator/command.ts';
import { listenerCommand } from '../src/listener/config.ts';
import { deployCommand } from '../src/client/deploy-command.ts';
import { deploymentsCommand } from '../src/client/deployments-command.ts';
import { revisionsCommand } from '../src/client/revisions-command.ts';
import { logsCommand } from '../src/client/logs-command.ts';
import type { ClientCommandSpec } from '../src/client/args.ts';
import type { CommandSpec } from '../src/lib/cli-args.ts';

type Spec = CommandSpec | ClientCommandSpec;
type JsonSchema = {
  type?: string | string[];
  enum?: unknown[];
  $ref?: string;
  properties?: Record<string, JsonSchema>;
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  minLength?: number;
  maxLength?: number;
  definitions?: Record<string, JsonSchema>;
};

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Which region goes into which file. */
export const DOC_FILES: Record<string, string[]> = {
  'docs/agent-server.md': ['agent-server-flags'],
  'docs/control-plane-api.md': ['control-plane-flags', 'api-key-flags'],
  'docs/local-runtime.md': ['dev-flags'],
  'docs/kubernetes.md': ['uninstall-flags', 'activator-flags', 'chart-values', 'operator-flags'],
  'docs/cli.md': ['deploy-flags', 'deployments-flags', 'revisions-flags', 'logs-flags'],
  'docs/listeners.md': ['listener-flags'],
  'docs/operations.md': ['backup-flags', 'restore-flags', 'secret-key-flags'],
};

/** Text of a table cell: pipes, HTML-looking angle brackets and emphasis stars would break the table. */
function cell(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\|/g, '\\|').replace(/</g, '&lt;').replace(/\*/g, '\\*');
}

function code(text: string): string {
  return `\`${text.replace(/\|/g, '\\|')}\``;
}

export function flagTable(spec: Spec): string {
  const rows = ['| Flag | Environment | Default | Meaning |', '|---|---|---|---|'];
  for (const [name, o] of Object.entries(spec.options)) {
    const flag = [`--${name}`, o.short ? `-${o.short}` : ''].filter(Boolean).map(code).join(', ');
    const env = (o.env ?? []).map(code).join(', ');
    const def = o.default === undefined ? '' : code(o.default);
    const repeat = 'multiple' in o && o.multiple && !o.description.includes('repeatable') ? ' (repeatable)' : '';
    const kind = o.type === 'boolean' ? ' (switch, no value)' : '';
    rows.push(`| ${flag} | ${env} | ${def} | ${cell(o.description)}${repeat}${kind} |`);
  }
  rows.push(`| ${code('--help')}, ${code('-h')} | | | this list in the terminal |`);
  return rows.join('\n');
}

function resolve(schema: JsonSchema, root: JsonSchema): JsonSchema {
  if (!schema.$ref) return schema;
  const name = schema.$ref.replace('#/definitions/', '');
  const { $ref: _ref, ...rest } = schema;
  return { ...resolve(root.definitions?.[name] ?? {}, root), ...rest };
}

function typeOf(s: JsonSchema): string {
  if (s.enum) return s.enum.map((v) => String(v)).join(' | ');
  const t = Array.isArray(s.type) ? s.type.join(' or ') : (s.type ?? 'any');
  if (t === 'array') return `list of ${s.items ? typeOf(s.items) : 'any'}`;
  if (t === 'object') return 'map of string';
  const bounds: string[] = [];
  if (s.minimum !== undefined) bounds.push(`≥ ${s.minimum}`);
  if (s.exclusiveMinimum !== undefined) bounds.push(`> ${s.exclusiveMinimum}`);
  if (s.maximum !== undefined) bounds.push(`≤ ${s.maximum}`);
  if (s.maxLength !== undefined) bounds.push(`≤ ${s.maxLength} chars`);
  return bounds.length ? `${t} ${bounds.join(', ')}` : t;
}

type ValueRow = { path: string; type: string; node: unknown; comment: string };

/** The yaml node at a dotted path, with the comment written above its key. */
function lookup(doc: Document, path: string[]): { value: unknown; comment: string } | undefined {
  let node: unknown = doc.contents;
  let comment = '';
  for (const key of path) {
    if (!isMap(node)) return undefined;
    const pair = node.items.find((p) => isScalar(p.key) && p.key.value === key);
    if (!pair) return undefined;
    // The yaml parser hangs a comment above a map's first key on the map itself.
    comment =
      (isScalar(pair.key) ? pair.key.commentBefore : '') || (pair === node.items[0] ? node.commentBefore : '') || '';
    node = pair.value;
  }
  return { value: node, comment };
}

function yamlDefault(node: unknown): string {
  if (node === undefined || node === null) return '';
  if (isScalar(node)) return node.value === '' ? '""' : String(node.value);
  if (isSeq(node) || isMap(node)) return JSON.stringify((node as { toJSON(): unknown }).toJSON());
  return '';
}

function valueRows(schema: JsonSchema, root: JsonSchema, doc: Document, prefix: string[]): ValueRow[] {
  const rows: ValueRow[] = [];
  for (const [key, raw] of Object.entries(schema.properties ?? {})) {
    const s = resolve(raw, root);
    const path = [...prefix, key];
    const found = lookup(doc, path);
    if (s.properties) {
      rows.push(...valueRows(s, root, doc, path));
      continue;
    }
    rows.push({ path: path.join('.'), type: typeOf(s), node: found?.value, comment: found?.comment ?? '' });
  }
  return rows;
}

/** The comment above a key in values.yaml, on one line. */
function oneLine(comment: string): string {
  return comment
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .join(' ');
}

export function valuesTable(schemaText: string, valuesYaml: string): string {
  const root = JSON.parse(schemaText) as JsonSchema;
  const doc = parseDocument(valuesYaml);
  const rows = ['| Value | Type | Default | Notes (from values.yaml) |', '|---|---|---|---|'];
  for (const r of valueRows(root, root, doc, [])) {
    const def = yamlDefault(r.node);
    rows.push(`| ${code(r.path)} | ${cell(r.type)} | ${def ? code(def) : ''} | ${cell(oneLine(r.comment))} |`);
  }
  return rows.join('\n');
}

/** The command whose flag table each region holds. */
export const FLAG_REGIONS: Record<string, Spec> = {
  'agent-server-flags': agentServerCommand,
  'control-plane-flags': controlPlaneCommand,
  'api-key-flags': apiKeyCommand,
  'secret-key-flags': secretKeyCommand,
  'backup-flags': backupCommand,
  'restore-flags': restoreCommand,
  'dev-flags': devCommand,
  'operator-flags': operatorCommand,
  'uninstall-flags': uninstallCommand,
  'activator-flags': activatorCommand,
  'listener-flags': listenerCommand,
  'deploy-flags': deployCommand,
  'deployments-flags': deploymentsCommand,
  'revisions-flags': revisionsCommand,
  'logs-flags': logsCommand,
};

/** Every region's content as the generator writes it now. */
export function renderRegions(schemaText: string, valuesYaml: string): Record<string, string> {
  return {
    ...Object.fromEntries(Object.entries(FLAG_REGIONS).map(([id, spec]) => [id, flagTable(spec)])),
    'chart-values': valuesTable(schemaText, valuesYaml),
  };
}

const REGION = /(<!-- generated:([a-z0-9-]+) -->\n)[\s\S]*?(<!-- \/generated -->)/g;

/** The document with each marked region replaced; throws on a region the generator does not know. */
export function fillRegions(text: string, regions: Record<string, string>): string {
  return text.replace(REGION, (_m, open: string, id: string, close: string) => {
    const body = regions[id];
    if (body === undefined) throw new Error(`unknown generated region "${id}"`);
    return `${open}${body}\n${close}`;
  });
}

/** Region ids marked in a document, in order. */
export function regionIds(text: string): string[] {
  return [...text.matchAll(REGION)].map((m) => m[2]!);
}

export function readChart(root = ROOT): { schemaText: string; valuesYaml: string } {
  return {
    schemaText: readFileSync(join(root, 'charts/agentplane/values.schema.json'), 'utf8'),
    valuesYaml: readFileSync(join(root, 'charts/agentplane/values.yaml'), 'utf8'),
  };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { schemaText, valuesYaml } = readChart();
  const regions = renderRegions(schemaText, valuesYaml);
  for (const file of Object.keys(DOC_FILES)) {
    const path = join(ROOT, file);
    const before = readFileSync(path, 'utf8');
    const after = fillRegions(before, regions);
    if (after !== before) writeFileSync(path, after);
    process.stdout.write(`${after === before ? 'unchanged' : 'wrote'} ${file}\n`);
  }
}
