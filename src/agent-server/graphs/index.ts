// Graph loading: langgraph.json -> modules imported (TypeScript through tsx) -> compiled graphs, their system
// assistant ids, JSON schemas and drawable graphs. Graphs are handled structurally (PregelLike) because they
// come from the user's project's copy of @langchain/langgraph, not ours.
import { access } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { v5 as uuidv5 } from 'uuid';
import { AppError, NotFoundError } from '../../lib/errors.ts';
import { nearMatches } from '../../lib/near-names.ts';
import type { Logger } from '../../lib/logger.ts';
import { patchBatchedStoreOf } from '../platform/batched-store.ts';
import { endImportContexts, withImportContext } from '../platform/context.ts';
import { GraphConfigError, parseGraphEntry, readGraphEnv, readLanggraphJson } from './config.ts';
import { drawableGraph, graphSchemas, subgraphSchemas, type GraphSchemas, type SubgraphSchemas } from './introspect.ts';
import type { Config, PregelLike } from './pregel-like.ts';
import { typeScriptSchemasInThread, type ProjectTypes } from './typescript-types.ts';
import { inUserTerms, projectPath } from './user-terms.ts';
import { checkLanggraphVersion, type LanggraphInstall } from './version.ts';

export { GraphConfigError } from './config.ts';
export type { GraphSchemas } from './introspect.ts';
export type { DrawableLike, PregelLike, StateSnapshotLike } from './pregel-like.ts';

const SYSTEM_ASSISTANT_NAMESPACE = '6ba7b821-9dad-11d1-80b4-00c04fd430c8';

/** System assistant ids by graph id: every run's create resolves one, and a uuid v5 is a SHA-1 (about 4 µs). */
const systemAssistantIds = new Map<string, string>();
const SYSTEM_ASSISTANT_IDS_MAX = 1024;

/** The id of a graph's system assistant, as the reference servers compute it ("agent" -> fe096781-...). */
export function systemAssistantId(graphId: string): string {
  let id = systemAssistantIds.get(graphId);
  if (id === undefined) {
    id = uuidv5(graphId, SYSTEM_ASSISTANT_NAMESPACE);
    // Callers pass the graph ids of langgraph.json, but nothing here relies on that to stay bounded.
    if (systemAssistantIds.size < SYSTEM_ASSISTANT_IDS_MAX) systemAssistantIds.set(graphId, id);
  }
  return id;
}

/**
 * Whether an assistant is the one the server made for its graph (its id derives from the graph id, so no caller can
 * make or claim one). Under custom auth every caller the handlers let in may read and run it, whatever their filter
 * says of its metadata: it holds only the graph's defaults from langgraph.json, and the hosted platform lets users
 * run it. Listing, changing and deleting it stay under the filter.
 */
export function isSystemAssistant(a: { assistant_id: string; graph_id: string }): boolean {
  return a.assistant_id === systemAssistantId(a.graph_id);
}

export interface GraphSpec {
  graphId: string;
  assistantId: string;
  path: string;
  exportName: string;
}

/**
 * A graph named in langgraph.json that could not be loaded (isolated mode): its assistant exists, but every
 * request that needs the graph answers 422 naming the cause, while the other graphs keep serving.
 */
export class GraphUnavailableError extends AppError {
  constructor(
    readonly graphId: string,
    readonly reason: string,
  ) {
    super(`Graph "${graphId}" is unavailable: it failed to load: ${reason}`, 422);
  }
}

/** A factory export that threw or returned no graph for this call: 500 naming the cause (it may be transient). */
export class GraphBuildError extends AppError {
  constructor(
    readonly graphId: string,
    reason: string,
    options?: { cause?: unknown },
  ) {
    super(`Graph "${graphId}" could not be built: ${reason}`, 500);
    if (options?.cause !== undefined) this.cause = options.cause;
  }
}

export interface GraphRegistry {
  configPath: string;
  projectDir: string;
  /** From langgraph.json "env" (a .env file or an object). */
  env: Record<string, string>;
  /** Every graph of langgraph.json, loaded or not. */
  specs: GraphSpec[];
  /** Graphs that failed to load, by graph id -> the error message (empty unless loaded with isolateFailures). */
  failures: Record<string, string>;
  /** Factory exports are called with the run config; `attach` sets the server's checkpointer/store on the graph. */
  getGraph(graphId: string, config?: Config, attach?: { checkpointer?: unknown; store?: unknown }): Promise<PregelLike>;
  /**
   * Whether the graph is exported as a factory (`(config) => graph`), i.e. whether the config given to getGraph
   * can change the graph; false for compiled graphs and for graphs that are unknown or failed to load.
   */
  isFactory(graphId: string): boolean;
  /** `config` builds a factory graph the way the assistant (or caller) configures it. */
  getSchemas(graphId: string, config?: Config): Promise<GraphSchemas>;
  getSubgraphSchemas(
    graphId: string,
    opts: { config?: Config; namespace?: string; recurse?: boolean },
  ): Promise<Record<string, SubgraphSchemas>>;
  getDrawableGraph(
    graphId: string,
    opts: { xray?: boolean | number; config?: Config },
  ): Promise<{ nodes: unknown[]; edges: unknown[] }>;
}

export interface LoadGraphsOptions {
  logger: Logger;
  /**
   * Copy langgraph.json "env" into process.env before importing graphs (default true). Variables already set
   * win, so a deployment's secrets override the defaults written in the repository.
   */
  applyEnv?: boolean;
  /**
   * Keep serving when some graphs fail to import or build: they are reported in `failures` and logged instead of
   * failing the whole load (default false: the first failing graph rejects, e.g. for `--strict` in CI).
   * langgraph.json itself being unreadable or invalid always rejects.
   */
  isolateFailures?: boolean;
}

type GraphFactory = (config: Config) => unknown;

interface LoadedGraph {
  spec: GraphSpec;
  install: LanggraphInstall | null;
  /** A compiled graph, or a factory producing one per call. */
  value: PregelLike | GraphFactory;
}

function isCompiledGraph(value: unknown): value is PregelLike {
  if (typeof value !== 'object' || value === null) return false;
  const g = value as Record<string, unknown>;
  return (
    typeof g.invoke === 'function' &&
    typeof g.stream === 'function' &&
    typeof g.getState === 'function' &&
    typeof g.nodes === 'object' &&
    g.nodes !== null
  );
}

function isGraphBuilder(value: unknown): value is { compile(): unknown } {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { compile?: unknown }).compile === 'function' &&
    typeof (value as { invoke?: unknown }).invoke !== 'function'
  );
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'object') return `an object of type ${value.constructor?.name ?? 'Object'}`;
  return `a ${typeof value}`;
}

/** Compiles builders and checks the result is a graph. */
function toCompiledGraph(graphId: string, value: unknown, where: string): PregelLike {
  const compiled = isGraphBuilder(value) ? value.compile() : value;
  if (!isCompiledGraph(compiled)) {
    throw new GraphConfigError(
      `graph "${graphId}": ${where} is ${describe(compiled)}, not a LangGraph graph ` +
        '(export a compiled graph, a StateGraph, or a function returning one)',
    );
  }
  return compiled;
}

async function importGraph(spec: GraphSpec, logger: Logger, projectDir: string): Promise<LoadedGraph> {
  const file = projectPath(spec.path, projectDir);
  try {
    await access(spec.path);
  } catch {
    throw new GraphConfigError(`graph "${spec.graphId}": file ${file} does not exist`);
  }
  const install = await checkLanggraphVersion(spec.graphId, spec.path);
  if (!install) {
    logger.warn(
      { graph_id: spec.graphId, path: spec.path },
      'graph project has no @langchain/langgraph; loading it anyway',
    );
  }
  let mod: Record<string, unknown>;
  try {
    // Top-level code of the module logs with its graph id (getLogger() of the SDK).
    mod = (await withImportContext({ graph_id: spec.graphId }, () => import(pathToFileURL(spec.path).href))) as Record<
      string,
      unknown
    >;
  } catch (err) {
    throw new GraphConfigError(`graph "${spec.graphId}": importing ${file} failed: ${inUserTerms(err, projectDir)}`);
  }
  if (!(spec.exportName in mod) || mod[spec.exportName] === undefined) {
    const names = Object.keys(mod).filter((k) => k !== '__esModule');
    const meant = nearMatches(spec.exportName, names);
    const hint = meant.length
      ? ` (did you mean ${meant.map((m) => `"${m}"`).join(' or ')}?)`
      : ` (exports: ${names.join(', ') || 'none'})`;
    throw new GraphConfigError(`graph "${spec.graphId}": ${file} has no export "${spec.exportName}"${hint}`);
  }
  // Runs' store wrapper of this project's LangGraph copy: event-driven instead of polling (platform/batched-store.ts).
  if (install && !(await patchBatchedStoreOf(install.dir))) {
    logger.debug({ graph_id: spec.graphId }, 'AsyncBatchedStore of this LangGraph copy left as is (unexpected shape)');
  }
  let exported = mod[spec.exportName];
  // A module may export a promise of a graph (top-level async setup).
  if (typeof (exported as { then?: unknown } | null)?.then === 'function') exported = await exported;
  const where = `export "${spec.exportName}" of ${file}`;
  const value: LoadedGraph['value'] =
    typeof exported === 'function' ? (exported as GraphFactory) : toCompiledGraph(spec.graphId, exported, where);
  logger.info(
    {
      graph_id: spec.graphId,
      assistant_id: spec.assistantId,
      langgraph_version: install?.version,
      factory: typeof value === 'function',
    },
    'graph loaded',
  );
  return { spec, install, value };
}

export async function loadGraphs(configPath: string, opts: LoadGraphsOptions): Promise<GraphRegistry> {
  const absConfig = path.resolve(configPath);
  const projectDir = path.dirname(absConfig);
  const json = await readLanggraphJson(absConfig);
  const env = await readGraphEnv(json.env, projectDir);
  if (opts.applyEnv ?? true) {
    for (const [k, v] of Object.entries(env)) if (process.env[k] === undefined) process.env[k] = v;
  }
  const specs: GraphSpec[] = [];
  const loaded = new Map<string, LoadedGraph>();
  const failures: Record<string, string> = {};
  const fail = (graphId: string, err: unknown) => {
    if (!opts.isolateFailures) throw err;
    const message = (err as Error)?.message ?? String(err);
    failures[graphId] = message;
    opts.logger.error({ graph_id: graphId, err }, 'graph failed to load; the other graphs keep serving');
  };
  // Sequential: imports of one project share module state, and errors then name the first bad graph.
  try {
    await importAll();
  } finally {
    endImportContexts();
  }
  async function importAll() {
    for (const [graphId, raw] of Object.entries(json.graphs)) {
      let spec: GraphSpec;
      try {
        spec = { ...parseGraphEntry(graphId, raw, projectDir), assistantId: systemAssistantId(graphId) };
      } catch (err) {
        fail(graphId, err);
        spec = { graphId, assistantId: systemAssistantId(graphId), path: '', exportName: '' };
      }
      specs.push(spec);
      if (failures[graphId] !== undefined) continue;
      try {
        loaded.set(graphId, await importGraph(spec, opts.logger, projectDir));
      } catch (err) {
        fail(graphId, err);
      }
    }
  }
  // Nothing to serve: a server whose every graph failed is refused, so a broken revision never goes live.
  if (specs.length > 0 && loaded.size === 0) {
    // Each failure names its graph already (graph "<id>": ...).
    const why = Object.entries(failures)
      .map(([id, m]) => (m.startsWith(`graph "${id}"`) ? m : `graph "${id}": ${m}`))
      .join('; ');
    throw new GraphConfigError(`no graph could be loaded: ${why}`);
  }

  function entry(graphId: string): LoadedGraph {
    const found = loaded.get(graphId);
    if (found) return found;
    if (failures[graphId] !== undefined) throw new GraphUnavailableError(graphId, failures[graphId]);
    throw new NotFoundError(`Graph "${graphId}" not found.`);
  }

  async function getGraph(
    graphId: string,
    config: Config = {},
    attach?: { checkpointer?: unknown; store?: unknown },
  ): Promise<PregelLike> {
    const { spec, value } = entry(graphId);
    let graph: PregelLike;
    if (typeof value === 'function') {
      try {
        graph = toCompiledGraph(graphId, await value(config), `the graph returned by factory "${spec.exportName}"`);
      } catch (err) {
        throw new GraphBuildError(graphId, (err as Error)?.message ?? String(err), { cause: err });
      }
    } else graph = value;
    if (attach?.checkpointer !== undefined) graph.checkpointer = attach.checkpointer;
    if (attach?.store !== undefined) graph.store = attach.store;
    return graph;
  }

  // The graphs' TypeScript types, read once for the whole project when a schema first needs them (a thread of its
  // own runs the compiler for seconds; executor threads, which never answer schemas, never start it).
  let projectTypes: Promise<ProjectTypes> | undefined;
  const typesOf = (graphId: string, ns = '') => {
    projectTypes ??= typeScriptSchemasInThread(
      [...loaded.values()].map(({ spec }) => ({ graphId: spec.graphId, path: spec.path, exportName: spec.exportName })),
      (err) => opts.logger.warn({ err }, 'graph schemas: the TypeScript types of the graphs could not be read'),
    );
    return projectTypes.then((types) => types.get(graphId)?.get(ns));
  };

  return {
    configPath: absConfig,
    projectDir,
    env,
    specs,
    failures,
    getGraph,
    isFactory: (graphId) => typeof loaded.get(graphId)?.value === 'function',
    async getSchemas(graphId, config = {}) {
      const found = entry(graphId);
      return graphSchemas(graphId, await getGraph(graphId, config), found.install, opts.logger, () => typesOf(graphId));
    },
    async getSubgraphSchemas(graphId, { config = {}, namespace, recurse }) {
      const found = entry(graphId);
      return subgraphSchemas(
        graphId,
        await getGraph(graphId, config),
        found.install,
        { namespace, recurse },
        opts.logger,
        (ns) => typesOf(graphId, ns),
      );
    },
    async getDrawableGraph(graphId, { xray, config = {} }) {
      return drawableGraph(await getGraph(graphId, config), xray, config);
    },
  };
}
