// The API's stream modes on top of LangGraph's: which modes to ask the graph for, and how its chunks become the
// events clients receive (names, `mode|ns` namespacing with subgraphs, and the platform's payload shapes).
// - "messages-tuple" is LangGraph's "messages" ([message chunk, metadata]), sent as event "messages";
// - "messages" is the older form: messages/metadata when a message starts, messages/partial with the message so
//   far on every token, messages/complete with the finished messages of each values chunk;
// - "events" are LangChain's streamEvents v2 events; asking for them (or for "messages") runs the graph through
//   streamEvents, which costs more than stream, so only then;
// - debug, checkpoints and tasks carry checkpoint / parent_checkpoint and no internal config keys.
import { stringify } from '../serde.ts';

/** Every stream mode the API accepts (the run schemas' enum is made from this list). */
export const API_STREAM_MODES = [
  'values',
  'messages',
  'messages-tuple',
  'updates',
  'events',
  'tasks',
  'checkpoints',
  'debug',
  'custom',
] as const;
export type ApiStreamMode = (typeof API_STREAM_MODES)[number];

type Emit = (event: string, json: string) => void;
type Json = Record<string, unknown>;

export interface StreamPlan {
  /** LangGraph stream modes to ask for ("values" always: the engine takes the final state from it). */
  graphModes: string[];
  subgraphs: boolean;
  /** Run through streamEvents (v2) instead of stream. */
  useEvents: boolean;
  wanted: Set<ApiStreamMode>;
}

export function planStream(streamMode: string[] | undefined, subgraphs: boolean | undefined): StreamPlan {
  const wanted = new Set((streamMode?.length ? streamMode : ['values']) as ApiStreamMode[]);
  const graph = new Set<string>(['values']);
  for (const m of wanted) {
    if (m === 'messages-tuple') graph.add('messages');
    else if (m !== 'events' && m !== 'messages') graph.add(m);
  }
  return {
    graphModes: [...graph],
    subgraphs: !!subgraphs,
    useEvents: wanted.has('events') || wanted.has('messages'),
    wanted,
  };
}

const name = (mode: string, ns: string[]) => (ns.length ? `${mode}|${ns.join('|')}` : mode);

/** Turns graph output into API events; `onRootValues` sees every root "values" chunk (the engine's final state). */
export class StreamTranslator {
  /** Messages of the "messages" mode being streamed, by id, accumulated. */
  private readonly partial = new Map<string, { concat(o: unknown): unknown }>();
  private readonly completed = new Set<string>();

  constructor(
    private readonly plan: StreamPlan,
    private readonly emit: Emit,
    /** `json`: the chunk's JSON text when it was serialised for the stream. */
    private readonly onRootValues: (v: unknown, json?: string) => void,
  ) {}

  /** A chunk of graph.stream: [mode, data] or, with subgraphs, [ns, mode, data]. */
  chunk(parts: unknown[]): void {
    const [ns, mode, data] = (this.plan.subgraphs ? parts : [[], ...parts]) as [string[], string, unknown];
    this.modeChunk(ns, mode, data);
  }

  /** The graph's own run id in streamEvents: the run of the first event. */
  private rootRunId: unknown;

  /** A streamEvents v2 event. */
  event(e: Json): void {
    this.rootRunId ??= e.run_id;
    if (e.event === 'on_chain_stream' && e.run_id === this.rootRunId) {
      const parts = (e.data as Json).chunk as unknown[];
      if (Array.isArray(parts)) {
        const [ns, mode, data] = (this.plan.subgraphs ? parts : [[], ...parts]) as [string[], string, unknown];
        this.modeChunk(ns, mode, data);
        if (this.plan.wanted.has('messages') && mode === 'values') this.completeMessages(data);
      }
      return;
    }
    const tags = Array.isArray(e.tags) ? (e.tags as string[]) : [];
    if (tags.includes('langsmith:hidden')) return;
    if (this.plan.wanted.has('events')) this.emit('events', stringify(e));
    if (this.plan.wanted.has('messages') && e.event === 'on_chat_model_stream') {
      if (!tags.includes('nostream')) this.partialMessage((e.data as Json).chunk, e.metadata);
    }
  }

  private modeChunk(ns: string[], mode: string, data: unknown): void {
    const w = this.plan.wanted;
    if (mode === 'values' && !ns.length) {
      // Its JSON text goes to the stream and, for the last chunk, into the run's outcome: serialised once.
      const json = w.has('values') ? stringify(data) : undefined;
      this.onRootValues(data, json);
      if (json !== undefined) this.emit(name(mode, ns), json);
      return;
    }
    if (mode === 'messages') {
      if (w.has('messages-tuple')) this.emit(name('messages', ns), stringify(data));
      return;
    }
    if (!w.has(mode as ApiStreamMode)) return;
    let out = data;
    if (mode === 'debug') out = debugPayload(data as Json);
    else if (mode === 'checkpoints') out = checkpointPayload(data as Json);
    else if (mode === 'tasks') out = taskPayload(data as Json);
    this.emit(name(mode, ns), stringify(out));
  }

  private partialMessage(chunk: unknown, metadata: unknown): void {
    const msg = chunk as { id?: string; concat?(o: unknown): unknown } | undefined;
    if (!msg?.id || typeof msg.concat !== 'function') return;
    const seen = this.partial.get(msg.id);
    if (!seen) {
      this.partial.set(msg.id, msg as { concat(o: unknown): unknown });
      this.emit('messages/metadata', stringify({ [msg.id]: { metadata } }));
    } else this.partial.set(msg.id, seen.concat(msg) as { concat(o: unknown): unknown });
    this.emit('messages/partial', stringify([this.partial.get(msg.id)]));
  }

  private completeMessages(values: unknown): void {
    if (!values || typeof values !== 'object' || !('messages' in values)) return;
    const raw = (values as Json).messages;
    const fresh: unknown[] = [];
    for (const m of Array.isArray(raw) ? raw : [raw]) {
      const id = (m as { id?: string } | null)?.id;
      if (!id || this.completed.has(id)) continue;
      this.completed.add(id);
      this.partial.delete(id);
      fresh.push(m);
    }
    if (fresh.length) this.emit('messages/complete', stringify(fresh));
  }
}

/** A config without internal keys (`__pregel_*`, callbacks): what clients may see. */
function publicConfig(config: unknown): unknown {
  if (!config || typeof config !== 'object') return config ?? null;
  const { callbacks: _c, configurable, ...rest } = config as Json;
  if (!configurable || typeof configurable !== 'object') return rest;
  return {
    ...rest,
    configurable: Object.fromEntries(Object.entries(configurable).filter(([k]) => !k.startsWith('__'))),
  };
}

/** {thread_id, checkpoint_ns, checkpoint_id, checkpoint_map} of a checkpoint's config, or null. */
function checkpointOf(config: unknown): Json | null {
  const c = (config as { configurable?: Json } | null | undefined)?.configurable;
  if (!c || !c.checkpoint_id) return null;
  return {
    thread_id: c.thread_id ?? null,
    checkpoint_ns: c.checkpoint_ns ?? '',
    checkpoint_id: c.checkpoint_id,
    checkpoint_map: c.checkpoint_map ?? null,
  };
}

function taskPayload(task: Json): Json {
  if (!task || typeof task !== 'object') return task;
  const state = task.state as Json | undefined;
  // A subgraph task's state is the config of its checkpoint: clients get the checkpoint itself.
  if (state && typeof state === 'object' && 'configurable' in state) {
    const { state: _s, ...rest } = task;
    const checkpoint = checkpointOf(state);
    return checkpoint ? { ...rest, checkpoint } : rest;
  }
  return task;
}

function checkpointPayload(p: Json): Json {
  if (!p || typeof p !== 'object') return p;
  const { parentConfig, config, tasks, ...rest } = p;
  return {
    ...rest,
    config: publicConfig(config),
    parent_config: publicConfig(parentConfig),
    checkpoint: checkpointOf(config),
    parent_checkpoint: checkpointOf(parentConfig),
    tasks: Array.isArray(tasks) ? tasks.map((t) => taskPayload(t as Json)) : tasks,
  };
}

function debugPayload(chunk: Json): Json {
  if (!chunk || typeof chunk !== 'object') return chunk;
  if (chunk.type === 'checkpoint') return { ...chunk, payload: checkpointPayload(chunk.payload as Json) };
  if (chunk.type === 'task_result' || chunk.type === 'task')
    return { ...chunk, payload: taskPayload(chunk.payload as Json) };
  return chunk;
}
