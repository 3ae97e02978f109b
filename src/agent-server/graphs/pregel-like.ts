// The parts of a compiled graph (Pregel) and its snapshots the server uses, typed structurally: graphs come from
// the user's project's copy of @langchain/langgraph, not ours.

export type Config = Record<string, unknown>;

/** A checkpoint snapshot as Pregel.getState returns it. */
export interface StateSnapshotLike {
  values: unknown;
  next: string[];
  tasks: Array<Record<string, unknown>>;
  metadata?: Record<string, unknown>;
  config: Config;
  createdAt?: string;
  parentConfig?: Config;
}

/** The parts of a compiled graph (Pregel) the server uses, typed structurally. */
export interface PregelLike {
  name?: string;
  nodes: Record<string, unknown>;
  channels?: Record<string, unknown>;
  inputChannels?: string | string[];
  outputChannels?: string | string[];
  streamChannels?: string | string[];
  checkpointer?: unknown;
  store?: unknown;
  builder?: unknown;
  invoke(input: unknown, config?: Config): Promise<unknown>;
  stream(input: unknown, config?: Config): Promise<AsyncIterable<unknown>>;
  streamEvents?(input: unknown, config: Config): AsyncIterable<unknown>;
  getState(config: Config, options?: { subgraphs?: boolean }): Promise<StateSnapshotLike>;
  getStateHistory(config: Config, options?: Record<string, unknown>): AsyncIterable<StateSnapshotLike>;
  updateState(config: Config, values: unknown, asNode?: string): Promise<Config>;
  /** Each superstep's updates applied together as one step (every @langchain/langgraph 1.x graph has it). */
  bulkUpdateState(
    config: Config,
    supersteps: Array<{ updates: Array<{ values: unknown; asNode: string }> }>,
  ): Promise<Config>;
  getGraphAsync?(config?: Config): Promise<DrawableLike>;
  getGraph?(config?: Config): DrawableLike;
  getSubgraphsAsync?(namespace?: string, recurse?: boolean): AsyncIterable<[string, PregelLike]>;
}

export interface DrawableLike {
  toJSON(): { nodes: unknown[]; edges: unknown[] };
}
