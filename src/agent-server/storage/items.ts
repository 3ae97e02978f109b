// The long-term memory store (LangGraph's BaseStore: items under namespaces) as both adapters keep it: the
// pieces that are the same for both (namespace matching, value filters, cosine scoring, the "store" section of
// langgraph.json and its embeddings function). Pure, apart from loading the embeddings module.
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  BaseStore,
  validateNamespace,
  type Item,
  type Operation,
  type OperationResults,
} from '@langchain/langgraph-checkpoint';
import { z } from 'zod';
import type { ItemsConfig, ItemStore, StoreItem } from './types.ts';

export type { ItemsConfig } from './types.ts';

/** langgraph.json "store": semantic index and item TTL, as on the platform (TTL values in minutes). */
export const storeSectionSchema = z.looseObject({
  // Without "embed" there is nothing to index with: the section is then ignored (as the reference server does).
  index: z
    .looseObject({
      embed: z.string().min(1).optional(),
      dims: z.number().int().positive(),
      fields: z.array(z.string().min(1)).optional(),
    })
    .optional(),
  ttl: z
    .looseObject({
      default_ttl: z.number().positive().nullable().optional(),
      refresh_on_read: z.boolean().optional(),
      sweep_interval_minutes: z.number().positive().nullable().optional(),
    })
    .optional(),
});
export type StoreSection = z.infer<typeof storeSectionSchema>;

export const DEFAULT_ITEMS_CONFIG: ItemsConfig = {
  ttl: { defaultMinutes: null, refreshOnRead: true, sweepMinutes: null },
};

export function itemsConfig(section: StoreSection | undefined, projectDir?: string): ItemsConfig {
  const ttl = section?.ttl;
  return {
    projectDir,
    index: section?.index?.embed
      ? { embed: section.index.embed, dims: section.index.dims, fields: section.index.fields ?? ['$'] }
      : undefined,
    ttl: {
      defaultMinutes: ttl?.default_ttl ?? null,
      refreshOnRead: ttl?.refresh_on_read ?? true,
      // With a TTL in use, expired items are deleted every hour unless told otherwise (reads never show them).
      sweepMinutes: ttl?.sweep_interval_minutes ?? (ttl ? 60 : null),
    },
  };
}

export interface Embedder {
  embedDocuments(texts: string[]): Promise<number[][]>;
  embedQuery(text: string): Promise<number[]>;
}

/**
 * "provider:model" (as the platform's docs write it, e.g. "openai:text-embedding-3-small"): the provider's LangChain
 * embeddings class, from the package the project installs (this server ships none of them).
 */
const EMBEDDING_PROVIDERS: Record<string, { pkg: string; className: string }> = {
  openai: { pkg: '@langchain/openai', className: 'OpenAIEmbeddings' },
  azure_openai: { pkg: '@langchain/openai', className: 'AzureOpenAIEmbeddings' },
  cohere: { pkg: '@langchain/cohere', className: 'CohereEmbeddings' },
  mistralai: { pkg: '@langchain/mistralai', className: 'MistralAIEmbeddings' },
  ollama: { pkg: '@langchain/ollama', className: 'OllamaEmbeddings' },
  google_genai: { pkg: '@langchain/google-genai', className: 'GoogleGenerativeAIEmbeddings' },
  google_vertexai: { pkg: '@langchain/google-vertexai', className: 'VertexAIEmbeddings' },
  bedrock: { pkg: '@langchain/aws', className: 'BedrockEmbeddings' },
};

/** A provider's embeddings object, or undefined when `spec` is a file reference ("./file.ts:export"). */
async function providerEmbeddings(spec: string, projectDir: string): Promise<unknown> {
  const m = /^([a-z][a-z0-9_-]*):([^/\\]+)$/.exec(spec);
  if (!m || m[1]!.includes('.')) return undefined;
  const [, provider, model] = m as unknown as [string, string, string];
  const known = EMBEDDING_PROVIDERS[provider];
  if (!known) {
    // "name:export" with no extension could still be a file of the project.
    if (existsSync(path.resolve(projectDir, provider))) return undefined;
    throw new Error(
      `store.index.embed "${spec}": unknown provider "${provider}" (known: ${Object.keys(EMBEDDING_PROVIDERS).join(', ')}; ` +
        'or name your own: "./file.ts:exportName")',
    );
  }
  let entry: string;
  try {
    entry = createRequire(path.join(projectDir, 'package.json')).resolve(known.pkg);
  } catch {
    throw new Error(`store.index.embed "${spec}" needs ${known.pkg} in the project's dependencies`);
  }
  const mod = (await import(pathToFileURL(entry).href)) as Record<string, unknown>;
  const Embeddings = mod[known.className] as (new (fields: { model: string }) => unknown) | undefined;
  if (typeof Embeddings !== 'function') {
    throw new Error(`store.index.embed "${spec}": ${known.pkg} exports no ${known.className}`);
  }
  return new Embeddings({ model });
}

/**
 * Loads "./file.ts:export" (relative to langgraph.json): an Embeddings object or a function of texts; or
 * "provider:model" through the provider's LangChain package.
 */
export async function loadEmbedder(config: ItemsConfig): Promise<Embedder | undefined> {
  if (!config.index) return undefined;
  const spec = config.index.embed;
  const projectDir = config.projectDir ?? process.cwd();
  const fromProvider = await providerEmbeddings(spec, projectDir);
  let value: unknown;
  let source: string;
  let name = '';
  if (fromProvider !== undefined) {
    value = fromProvider;
    source = spec;
  } else {
    const colon = spec.lastIndexOf(':');
    if (colon <= 0) {
      throw new Error(`store.index.embed "${spec}" must be "./file.ts:exportName" or "provider:model"`);
    }
    source = path.resolve(projectDir, spec.slice(0, colon));
    name = spec.slice(colon + 1);
    const mod = (await import(pathToFileURL(source).href)) as Record<string, unknown>;
    value = mod[name];
  }
  const dims = config.index.dims;
  const check = (vectors: number[][]): number[][] => {
    for (const v of vectors) {
      if (!Array.isArray(v) || v.length !== dims) {
        throw new Error(
          `store.index.embed returned a vector of ${Array.isArray(v) ? v.length : typeof v} dimensions; store.index.dims is ${dims}`,
        );
      }
    }
    return vectors;
  };
  if (typeof value === 'function') {
    const fn = value as (texts: string[]) => Promise<number[][]>;
    return {
      embedDocuments: async (texts) => check(await fn(texts)),
      embedQuery: async (text) => check(await fn([text]))[0]!,
    };
  }
  if (value && typeof value === 'object' && typeof (value as Embedder).embedDocuments === 'function') {
    const e = value as Embedder;
    return {
      embedDocuments: async (texts) => check(await e.embedDocuments(texts)),
      embedQuery: async (text) => check([await e.embedQuery(text)])[0]!,
    };
  }
  throw new Error(`store.index.embed "${spec}": ${source} exports no function or Embeddings named "${name}"`);
}

/** Label-wise prefix/suffix match with "*" wildcards, as LangGraph's stores do. */
export function namespaceMatches(ns: string[], cond: { matchType: 'prefix' | 'suffix'; path: string[] }): boolean {
  if (cond.path.length > ns.length) return false;
  const offset = cond.matchType === 'prefix' ? 0 : ns.length - cond.path.length;
  return cond.path.every((label, i) => label === '*' || ns[offset + i] === label);
}

/** ListNamespaces over the distinct namespaces: match, cut to maxDepth, dedupe, sort, page. */
export function listNamespaces(
  all: string[][],
  q: {
    matchConditions?: Array<{ matchType: 'prefix' | 'suffix'; path: string[] }>;
    maxDepth?: number;
    limit: number;
    offset: number;
  },
): string[][] {
  let out = all.filter((ns) => (q.matchConditions ?? []).every((c) => namespaceMatches(ns, c)));
  if (q.maxDepth !== undefined) out = out.map((ns) => ns.slice(0, q.maxDepth));
  const unique = new Map(out.map((ns) => [JSON.stringify(ns), ns]));
  return [...unique.values()].sort((a, b) => compareNamespaces(a, b)).slice(q.offset, q.offset + q.limit);
}

function compareNamespaces(a: string[], b: string[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (a[i] !== b[i]) return a[i]! < b[i]! ? -1 : 1;
  }
  return a.length - b.length;
}

const OPERATORS = new Set(['$eq', '$ne', '$gt', '$gte', '$lt', '$lte', '$in', '$nin', '$exists']);

/** A filter value made of operators only ({$gt: 1}); any other object is compared whole. */
export function isOperators(v: unknown): v is Record<string, unknown> {
  return (
    !!v &&
    typeof v === 'object' &&
    !Array.isArray(v) &&
    Object.keys(v).length > 0 &&
    Object.keys(v).every((k) => OPERATORS.has(k))
  );
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * Search filters: each top-level key equals the given JSON value, or meets its operators ($eq, $ne, $gt, $gte,
 * $lt, $lte, $in, $nin, $exists). Comparisons order numbers as numbers and strings as strings.
 */
export function matchesFilter(value: Record<string, unknown>, filter: Record<string, unknown> | undefined): boolean {
  for (const [key, want] of Object.entries(filter ?? {})) {
    const have = value[key];
    if (!isOperators(want)) {
      if (!sameJson(have, want)) return false;
      continue;
    }
    for (const [op, arg] of Object.entries(want)) {
      const ordered =
        (typeof have === 'number' && typeof arg === 'number') || (typeof have === 'string' && typeof arg === 'string');
      const ok = (() => {
        switch (op) {
          case '$eq':
            return sameJson(have, arg);
          case '$ne':
            return !sameJson(have, arg);
          case '$gt':
            return ordered && (have as number) > (arg as number);
          case '$gte':
            return ordered && (have as number) >= (arg as number);
          case '$lt':
            return ordered && (have as number) < (arg as number);
          case '$lte':
            return ordered && (have as number) <= (arg as number);
          case '$in':
            return Array.isArray(arg) && arg.some((a) => sameJson(have, a));
          case '$nin':
            return Array.isArray(arg) && !arg.some((a) => sameJson(have, a));
          case '$exists':
            return (have !== undefined) === !!arg;
          default:
            return false;
        }
      })();
      if (!ok) return false;
    }
  }
  return true;
}

export function cosine(a: number[], b: number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return na && nb ? dot / Math.sqrt(na * nb) : 0;
}

/** Texts to embed for an item: the configured fields (or the put's own `index` list); "$" is the whole value. */
export function textsToEmbed(value: Record<string, unknown>, fields: string[]): Array<{ field: string; text: string }> {
  const out: Array<{ field: string; text: string }> = [];
  for (const field of fields) {
    if (field === '$') {
      out.push({ field, text: JSON.stringify(value) });
      continue;
    }
    let cur: unknown = value;
    for (const part of field.split('.'))
      cur = cur && typeof cur === 'object' ? (cur as Record<string, unknown>)[part] : undefined;
    if (cur === undefined || cur === null) continue;
    out.push({ field, text: typeof cur === 'string' ? cur : JSON.stringify(cur) });
  }
  return out;
}

/**
 * Namespaces the HTTP API accepts and graphs may use: LangGraph's rules (no "." or ":" in a label, none empty,
 * no "langgraph" root), checked by the library's own validateNamespace.
 */
export { validateNamespace };

/**
 * LangGraph's BaseStore over an ItemStore, so graphs (config.store / getStore()) and the HTTP API read and write
 * through the same code and see the same items, TTLs and scores.
 */
export class ItemsBaseStore extends BaseStore {
  constructor(private readonly items: ItemStore) {
    super();
  }

  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results: unknown[] = [];
    for (const op of operations) {
      if ('namespacePrefix' in op) {
        validateNamespace(op.namespacePrefix, { allowEmpty: true });
        const found = await this.items.search({
          namespace_prefix: op.namespacePrefix,
          filter: op.filter,
          limit: op.limit ?? 10,
          offset: op.offset ?? 0,
          query: op.query,
        });
        results.push(found.map((i) => ({ ...toItem(i), ...(i.score != null ? { score: i.score } : {}) })));
      } else if ('key' in op && 'value' in op) {
        validateNamespace(op.namespace);
        if (op.value === null) await this.items.delete(op.namespace, op.key);
        else await this.items.put(op.namespace, op.key, op.value, { index: op.index });
        results.push(undefined);
      } else if ('key' in op) {
        validateNamespace(op.namespace);
        const item = await this.items.get(op.namespace, op.key);
        results.push(item ? toItem(item) : null);
      } else {
        const prefix = op.matchConditions?.find((c) => c.matchType === 'prefix')?.path;
        const suffix = op.matchConditions?.find((c) => c.matchType === 'suffix')?.path;
        results.push(
          await this.items.listNamespaces({
            prefix: prefix as string[] | undefined,
            suffix: suffix as string[] | undefined,
            max_depth: op.maxDepth,
            limit: op.limit,
            offset: op.offset,
          }),
        );
      }
    }
    return results as OperationResults<Op>;
  }
}

function toItem(i: StoreItem): Item {
  return {
    namespace: i.namespace,
    key: i.key,
    value: i.value,
    createdAt: new Date(i.created_at),
    updatedAt: new Date(i.updated_at),
  };
}

/** The "store" section of the langgraph.json at `configPath` (an invalid one names the key that is wrong). */
export async function readItemsConfig(configPath: string): Promise<ItemsConfig> {
  const json = JSON.parse(await readFile(configPath, 'utf8')) as Record<string, unknown>;
  if (json.store === undefined) return { ...DEFAULT_ITEMS_CONFIG, projectDir: path.dirname(configPath) };
  const parsed = storeSectionSchema.safeParse(json.store);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`${configPath}: store.${issue.path.join('.')}: ${issue.message}`);
  }
  return itemsConfig(parsed.data, path.dirname(path.resolve(configPath)));
}
