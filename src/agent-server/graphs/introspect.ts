// JSON schemas, subgraphs and the drawable graph of a loaded graph. Zod-defined state (and StateSchema) is
// converted by the graph's OWN copy of @langchain/langgraph (its schema registry knows the reducers the graph
// registered); graphs defined with Annotation have no runtime types, so their schemas list the channels without
// types. The context schema is the zod `context` given to StateGraph; JS graphs have no separate config schema,
// so config_schema and context_schema are the same (as the JS reference server answers).
import { pathToFileURL } from 'node:url';
import type { PregelLike } from './pregel-like.ts';
import { esmSubpathFile, type LanggraphInstall } from './version.ts';

type JsonSchema = Record<string, unknown>;

export interface GraphSchemas {
  input_schema: JsonSchema;
  output_schema: JsonSchema;
  state_schema: JsonSchema;
  config_schema: JsonSchema | null;
  /** Omitted when the graph declares no context (as the reference's undefined drops out of its JSON). */
  context_schema?: JsonSchema;
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

function channelSchema(title: string, names: string[]): JsonSchema {
  return { title, type: 'object', properties: Object.fromEntries(names.map((n) => [n, {}])) };
}

function safely(fn: () => JsonSchema | undefined): JsonSchema | undefined {
  try {
    return fn();
  } catch {
    return undefined;
  }
}

export async function graphSchemas(
  graphId: string,
  graph: PregelLike,
  install: LanggraphInstall | null,
): Promise<GraphSchemas> {
  const helpers = install ? await loadHelpers(install) : null;
  const zodState = helpers ? safely(() => helpers.getStateTypeSchema(graph)) : undefined;
  const zodInput = helpers ? safely(() => helpers.getInputTypeSchema(graph)) : undefined;
  const zodOutput = helpers ? safely(() => helpers.getOutputTypeSchema(graph)) : undefined;
  const zodConfig = helpers ? safely(() => helpers.getConfigTypeSchema(graph)) : undefined;

  const stateNames = userChannels(Object.keys(graph.channels ?? {}));
  const inputNames = userChannels(asList(graph.inputChannels));
  const outputNames = userChannels(asList(graph.outputChannels));
  const result: GraphSchemas = {
    input_schema: zodInput ?? channelSchema(`${graphId}_input`, inputNames.length ? inputNames : stateNames),
    output_schema: zodOutput ?? channelSchema(`${graphId}_output`, outputNames.length ? outputNames : stateNames),
    state_schema: zodState ?? channelSchema(`${graphId}_state`, stateNames),
    config_schema: zodConfig ?? null,
  };
  if (zodConfig) result.context_schema = zodConfig;
  return result;
}

/**
 * Schemas of the subgraphs of a graph by namespace (`parent|child`), as GET /assistants/{id}/subgraphs answers:
 * the direct children, or with `recurse` every level; with `namespace` only that subgraph.
 */
export async function subgraphSchemas(
  graphId: string,
  graph: PregelLike,
  install: LanggraphInstall | null,
  opts: { namespace?: string; recurse?: boolean },
): Promise<Record<string, GraphSchemas & { graph_id: string }>> {
  const out: Record<string, GraphSchemas & { graph_id: string }> = {};
  if (!graph.getSubgraphsAsync) return out;
  for await (const [ns, sub] of graph.getSubgraphsAsync(opts.namespace, opts.recurse ?? false)) {
    out[ns] = { graph_id: graphId, ...(await graphSchemas(`${graphId}|${ns}`, sub, install)) };
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
