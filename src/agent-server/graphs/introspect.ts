// JSON schemas, subgraphs and the drawable graph of a loaded graph. Zod-defined state (and StateSchema) is
// converted by the graph's OWN copy of @langchain/langgraph (its schema registry knows the reducers the graph
// registered), else by zod 4's z.toJSONSchema or StateSchema's own getJsonSchema; graphs defined with Annotation
// have no runtime types, so their fields are typed from what the channels show (the messages reducer, a default's
// JSON type) and, where the graph is TypeScript, from its source types (typescript-types.ts: `Annotation<"a" | "b">`
// becomes an enum); what neither tells accepts anything. The context schema is the zod `context` given to StateGraph,
// else the Annotation context's source types, else a permissive schema; JS graphs have no separate config schema, so
// config_schema and context_schema are the same (as the JS reference server answers).
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import type { Logger } from '../../lib/logger.ts';
import type { PregelLike } from './pregel-like.ts';
import type { TypedSchemas } from './typescript-types.ts';
import { esmSubpathFile, type LanggraphInstall } from './version.ts';

type JsonSchema = Record<string, unknown>;

export interface GraphSchemas {
  input_schema: JsonSchema;
  output_schema: JsonSchema;
  state_schema: JsonSchema;
  config_schema: JsonSchema;
  context_schema: JsonSchema;
}

interface ZodSchemaHelpers {
  getStateTypeSchema(graph: unknown): JsonSchema | undefined;
  getInputTypeSchema(graph: unknown): JsonSchema | undefined;
  getOutputTypeSchema(graph: unknown): JsonSchema | undefined;
  getConfigTypeSchema(graph: unknown): JsonSchema | undefined;
}

const helpersByDir = new Map<string, Promise<ZodSchemaHelpers | null>>();

function loadHelpers(install: LanggraphInstall): Promise<ZodSchemaHelpers | null> {
  let pending = helpersByDir.get(install.dir);
  if (!pending) {
    const file = esmSubpathFile(install, './zod/schema');
    pending = file
      ? import(pathToFileURL(file).href).then(
          (m: Partial<ZodSchemaHelpers>) =>
            typeof m.getStateTypeSchema === 'function' ? (m as ZodSchemaHelpers) : null,
          () => null,
        )
      : Promise.resolve(null);
    helpersByDir.set(install.dir, pending);
  }
  return pending;
}

/** Internal channels (__start__, branch:..., __pregel_...) are not part of the user's state. */
function userChannels(names: Iterable<string>): string[] {
  return [...names].filter((n) => !n.startsWith('__') && !n.startsWith('branch:') && !n.includes(':'));
}

function asList(value: string | string[] | undefined): string[] {
  if (value === undefined) return [];
  return Array.isArray(value) ? value : [value];
}

/** A JSON value small enough to show as a field's default in a form. */
function asDefault(value: unknown): { default?: unknown } {
  try {
    const text = JSON.stringify(value);
    return text !== undefined && text.length <= 2_000 ? { default: JSON.parse(text) as unknown } : {};
  } catch {
    return {};
  }
}

/**
 * What an Annotation channel says about its values at runtime: the messages reducer's channel is a message list (as
 * StateSchema's MessagesValue answers); a reducer channel with a default has its default's JSON type; anything
 * else (LastValue: the type lives only in TypeScript) accepts any value.
 */
export function channelJsonSchema(channel: unknown): JsonSchema {
  const c = channel as { operator?: { name?: string }; initialValueFactory?: unknown } | null;
  if (!c || typeof c !== 'object') return {};
  if (c.operator?.name === 'messagesStateReducer') {
    return { langgraph_type: 'messages', description: 'A list of chat messages' };
  }
  if (typeof c.initialValueFactory !== 'function') return {};
  let value: unknown;
  try {
    value = (c.initialValueFactory as () => unknown)();
  } catch {
    return {};
  }
  if (Array.isArray(value)) return { type: 'array', ...asDefault(value) };
  if (typeof value === 'string' || typeof value === 'boolean') return { type: typeof value, ...asDefault(value) };
  if (typeof value === 'number') return { type: 'number', ...asDefault(value) };
  if (value && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    return { type: 'object', ...asDefault(value) };
  }
  return {};
}

function channelSchema(title: string, names: string[], channels: Record<string, unknown>): JsonSchema {
  return {
    title,
    type: 'object',
    properties: Object.fromEntries(names.map((n) => [n, channelJsonSchema(channels[n])])),
  };
}

/** Any object: what a form gets for a part of the graph whose schema exists only in TypeScript. */
function permissive(title: string): JsonSchema {
  return { title, type: 'object', properties: {}, additionalProperties: true };
}

/**
 * A runtime definition as JSON Schema without the graph's helpers: a StateSchema answers its own, a zod 4 object
 * (any copy of zod 4: z.toJSONSchema reads its `_zod` internals) is converted.
 */
function definitionJsonSchema(definition: unknown, input = false): JsonSchema | undefined {
  if (!definition || typeof definition !== 'object') return undefined;
  const own = definition as { getJsonSchema?: unknown; getInputJsonSchema?: unknown };
  const method = input ? own.getInputJsonSchema : own.getJsonSchema;
  if (typeof method === 'function') return (method as () => JsonSchema).call(definition);
  if (!('_zod' in definition)) return undefined;
  return z.toJSONSchema(definition as z.ZodType, { unrepresentable: 'any' }) as JsonSchema;
}

function safely(fn: () => JsonSchema | undefined, problems: string[], what: string): JsonSchema | undefined {
  try {
    return fn();
  } catch (err) {
    problems.push(`${what}: ${(err as Error)?.message ?? String(err)}`);
    return undefined;
  }
}

interface RuntimeDefinitions {
  _schemaRuntimeDefinition?: unknown;
  _inputRuntimeDefinition?: unknown;
  _outputRuntimeDefinition?: unknown;
  _configRuntimeSchema?: unknown;
}

/** The source types of a graph or subgraph, asked for only when runtime definitions leave something untyped. */
export type TypesOf = () => Promise<TypedSchemas | undefined>;

const DRAFT_07 = 'http://json-schema.org/draft-07/schema#';

/**
 * A schema derived from channels, its fields typed by the source types where the channels said nothing more
 * (what the channels show, such as a reducer's default or the messages marker, is kept beside the type).
 */
function withTypes(
  runtime: JsonSchema,
  typed: JsonSchema | undefined,
  definitions: Record<string, JsonSchema>,
): JsonSchema {
  const typedProps = typed?.properties as Record<string, JsonSchema> | undefined;
  if (!typedProps) return runtime;
  const own = (runtime.properties ?? {}) as Record<string, JsonSchema>;
  const properties = Object.fromEntries(
    Object.entries(own).map(([name, schema]) => [name, typedProps[name] ? { ...typedProps[name], ...schema } : schema]),
  );
  const refs = JSON.stringify(properties).includes('"$ref"');
  return { ...runtime, properties, ...(refs ? { definitions } : {}), $schema: DRAFT_07 };
}

// Per compiled graph (a factory's graphs are new objects, so their schemas follow the config they were built with).
const cache = new WeakMap<object, Promise<GraphSchemas>>();
const explained = new Set<string>();

/**
 * JSON schemas of a graph from its runtime definitions, without a TypeScript compiler pass: zod state, input, output
 * and context through the graph's own LangGraph helpers (else zod 4's z.toJSONSchema), StateSchema likewise, and
 * Annotation channels by their reducers and defaults. What exists only as TypeScript types is answered with a
 * permissive schema and logged once per graph, never an error.
 */
export function graphSchemas(
  graphId: string,
  graph: PregelLike,
  install: LanggraphInstall | null,
  logger?: Logger,
  typesOf?: TypesOf,
): Promise<GraphSchemas> {
  let pending = cache.get(graph);
  if (!pending) {
    pending = deriveSchemas(graphId, graph, install, logger, typesOf);
    cache.set(graph, pending);
  }
  return pending;
}

async function deriveSchemas(
  graphId: string,
  graph: PregelLike,
  install: LanggraphInstall | null,
  logger?: Logger,
  typesOf?: TypesOf,
): Promise<GraphSchemas> {
  const problems: string[] = [];
  const helpers = install ? await loadHelpers(install) : null;
  const defs = (graph.builder ?? {}) as RuntimeDefinitions;
  const derive = (what: string, helper: keyof ZodSchemaHelpers, definition: unknown) =>
    (helpers ? safely(() => helpers[helper](graph), problems, what) : undefined) ??
    safely(() => definitionJsonSchema(definition, what === 'input'), problems, what);
  const zodState = derive('state', 'getStateTypeSchema', defs._schemaRuntimeDefinition);
  // No input of its own: the state's, as the graph takes it (LangGraph marks that with a symbol).
  const inputDefinition =
    typeof defs._inputRuntimeDefinition === 'symbol' ? defs._schemaRuntimeDefinition : defs._inputRuntimeDefinition;
  const zodInput = derive('input', 'getInputTypeSchema', inputDefinition);
  const zodOutput = derive('output', 'getOutputTypeSchema', defs._outputRuntimeDefinition);
  const zodConfig = derive('context', 'getConfigTypeSchema', defs._configRuntimeSchema);

  const channels = graph.channels ?? {};
  const stateNames = userChannels(Object.keys(channels));
  const inputNames = userChannels(asList(graph.inputChannels));
  const outputNames = userChannels(asList(graph.outputChannels));
  const typed = (zodState && zodInput && zodOutput && zodConfig) || !typesOf ? undefined : await typesOf();
  const definitions = typed?.definitions ?? {};
  const typedContext = typed?.context?.properties as Record<string, JsonSchema> | undefined;
  const config =
    zodConfig ??
    (typedContext
      ? { ...permissive(`${graphId}_config`), properties: typedContext, $schema: DRAFT_07 }
      : permissive(`${graphId}_config`));
  const fromChannels = (title: string, names: string[], types: JsonSchema | undefined) =>
    withTypes(channelSchema(title, names, channels), types, definitions);
  const result: GraphSchemas = {
    input_schema:
      zodInput ?? fromChannels(`${graphId}_input`, inputNames.length ? inputNames : stateNames, typed?.input),
    output_schema:
      zodOutput ?? fromChannels(`${graphId}_output`, outputNames.length ? outputNames : stateNames, typed?.output),
    state_schema: zodState ?? fromChannels(`${graphId}_state`, stateNames, typed?.state),
    // JS graphs have one runtime context: config_schema and context_schema are the same (as the reference answers).
    config_schema: config,
    context_schema: config,
  };
  const reasons = [
    ...problems,
    ...(zodState || typed?.state ? [] : ['the state is not zod or StateSchema and its source types were not read']),
    ...(zodConfig || typedContext ? [] : ['no zod context and no context type in the source: any context is accepted']),
  ];
  if (reasons.length && !explained.has(graphId)) {
    explained.add(graphId);
    logger?.info({ graph_id: graphId, reasons }, 'graph schemas: what cannot be derived at runtime is permissive');
  }
  return result;
}

/**
 * A subgraph's schemas as GET /assistants/{id}/subgraphs answers them: the platform's fields (`state_schema`, ...,
 * what the SDK's GraphSchema types) and, beside them, the same schemas under the names the JS reference server
 * uses there (`state`, `input`, `output`, `config`), for clients written against it.
 */
export type SubgraphSchemas = GraphSchemas & {
  graph_id: string;
  state: JsonSchema;
  input: JsonSchema;
  output: JsonSchema;
  config: JsonSchema;
};

/**
 * Schemas of the subgraphs of a graph by namespace (`parent|child`), as GET /assistants/{id}/subgraphs answers:
 * the direct children, or with `recurse` every level; with `namespace` only that subgraph. `typesOf(ns)` gives a
 * subgraph's source types.
 */
export async function subgraphSchemas(
  graphId: string,
  graph: PregelLike,
  install: LanggraphInstall | null,
  opts: { namespace?: string; recurse?: boolean },
  logger?: Logger,
  typesOf?: (ns: string) => Promise<TypedSchemas | undefined>,
): Promise<Record<string, SubgraphSchemas>> {
  const out: Record<string, SubgraphSchemas> = {};
  if (!graph.getSubgraphsAsync) return out;
  for await (const [ns, sub] of graph.getSubgraphsAsync(opts.namespace, opts.recurse ?? false)) {
    const types = typesOf && (() => typesOf(ns));
    const schemas = await graphSchemas(`${graphId}|${ns}`, sub, install, logger, types);
    out[ns] = {
      graph_id: graphId,
      ...schemas,
      state: schemas.state_schema,
      input: schemas.input_schema,
      output: schemas.output_schema,
      config: schemas.config_schema,
    };
  }
  return out;
}

export async function drawableGraph(
  graph: PregelLike,
  xray: boolean | number | undefined,
  runConfig: Record<string, unknown> = {},
): Promise<{ nodes: unknown[]; edges: unknown[] }> {
  // The config reaches subgraph factories that xray expands, as it reaches the graph's own factory.
  const config = xray === undefined ? runConfig : { ...runConfig, xray };
  const drawable = graph.getGraphAsync ? await graph.getGraphAsync(config) : graph.getGraph?.(config);
  if (!drawable) return { nodes: [], edges: [] };
  const json = drawable.toJSON();
  return { nodes: json.nodes, edges: json.edges };
}
