// Stored run events (the durable log every replica reads) as thread-protocol events (@langchain/protocol's Event).
// Deterministic: the same stored events give the same protocol events, with the same seq and event_id, on every
// replica and every reconnect, so a client that switches replicas or rotates its stream deduplicates exactly.
// seq = stored id * SEQ_SLOTS + the position among the protocol events that one stored event becomes.
// - a run's first `metadata` event: lifecycle "running" (root); its run_done marker: the terminal lifecycle
//   (completed / interrupted / failed, from the run's record) of every namespace seen, deepest first, then root;
// - the first values / updates / checkpoints / tasks event of a subgraph namespace: lifecycle "started" for it
//   (and for its parents not seen yet);
// - values carrying __interrupt__: one input.requested per interrupt, then the values without it;
// - protocol runs' messages (content-block events), tools, updates, custom, tasks, checkpoints: as LangGraph's
//   convertToProtocolEvent shapes them; runs started by the run API contribute values, updates, custom and tasks,
//   and messages as content blocks from the protocol events their executor records beside their own stream
//   (runs/protocol-messages.ts; their older messages-tuple events have no content-block form: left out).
import { convertToProtocolEvent, normalizeNamespaceSegment } from '@langchain/langgraph/stream';
import type { RunStatus, StoredStreamEvent } from '../storage/types.ts';
import { isRunDone } from '../streams/thread-events.ts';
import { parseStoredName } from '../streams/run-events.ts';

export const SEQ_SLOTS = 64;

export interface ProtocolEvent {
  type: 'event';
  event_id: string;
  seq: number;
  method: string;
  params: { namespace: string[]; timestamp: number; node?: string; data: unknown };
}

/** What the mapper needs to know of a run: its graph and, once ended, how. */
export interface RunFacts {
  graphName: string;
  status: RunStatus;
  error?: string;
  /** The interrupts the run resumes by id: `input.answered` tells every client on the thread when it starts. */
  answers?: string[];
  /** A strict resume's refusal (UnknownInterruptError): the root `failed` event carries it for the SDK. */
  refusal?: { reason: string; interrupt_ids: string[]; pending_ids: string[] };
}

type Json = Record<string, unknown>;

const LEGACY_MODES = new Set(['values', 'updates', 'custom', 'tasks']);
const GRAPH_LEVEL = new Set(['values', 'updates', 'checkpoints', 'tasks']);

function terminalStatus(facts: RunFacts | null): ({ event: string; error?: string } & Json) | null {
  switch (facts?.status) {
    case 'success':
      return { event: 'completed' };
    case 'interrupted':
      return { event: 'interrupted' };
    case 'error':
    case 'timeout':
      return {
        event: 'failed',
        error: facts.error ?? `run ended with status ${facts.status}`,
        ...(facts.refusal ?? {}),
      };
    default:
      return null;
  }
}

export class ProtocolMapper {
  /** Per run being mapped: namespaces seen (key: segments joined by NUL) and interrupts announced. */
  private readonly runs = new Map<string, { namespaces: Map<string, string[]>; interrupts: Set<string> }>();

  /** `started`: the run as it is now; `ended`: the run once it has ended (its run_done marker precedes that). */
  constructor(
    private readonly lookup: {
      started(runId: string): Promise<RunFacts | null>;
      ended(runId: string): Promise<RunFacts | null>;
    },
  ) {}

  private stateOf(runId: string) {
    let s = this.runs.get(runId);
    if (!s) this.runs.set(runId, (s = { namespaces: new Map(), interrupts: new Set() }));
    return s;
  }

  async map(e: StoredStreamEvent): Promise<ProtocolEvent[]> {
    const out: Array<Omit<ProtocolEvent, 'seq' | 'event_id'>> = [];
    const push = (method: string, namespace: string[], data: unknown, node?: string) =>
      out.push({
        type: 'event',
        method,
        params: { namespace, timestamp: Date.now(), ...(node !== undefined ? { node } : {}), data },
      });
    if (isRunDone(e)) {
      const state = this.runs.get(e.run_id);
      this.runs.delete(e.run_id);
      const facts = await this.lookup.ended(e.run_id);
      const end = terminalStatus(facts);
      if (!end) return [];
      const children = [...(state?.namespaces.values() ?? [])].sort((a, b) => b.length - a.length);
      for (const ns of children) push('lifecycle', ns, { event: end.event, graph_name: graphOf(ns) });
      push('lifecycle', [], { ...end, graph_name: facts!.graphName });
      return numbered(e.id, out);
    }
    const { mode, namespace, native } = parseStoredName(e.event);
    if (mode === 'metadata') {
      const data = parse(e.data);
      if (typeof data?.run_id !== 'string') return [];
      this.runs.delete(e.run_id);
      const facts = await this.lookup.started(e.run_id);
      push('lifecycle', [], { event: 'running', graph_name: facts?.graphName ?? 'graph' });
      // Before the answer is checked (a strict resume may still refuse it): clients reload the state if it fails.
      if (facts?.answers?.length) push('input.answered', [], { interrupt_ids: facts.answers });
      return numbered(e.id, out);
    }
    if (!native && !LEGACY_MODES.has(mode)) return [];
    if (mode === 'updates' && e.data.startsWith('{"__interrupt__"')) return [];
    const state = this.stateOf(e.run_id);
    // Graph-level channels name subgraphs; messages, tools and custom events name the node's task as well.
    for (let n = 1; n <= (GRAPH_LEVEL.has(mode) ? namespace.length : 0); n++) {
      const prefix = namespace.slice(0, n);
      const key = prefix.join('\0');
      if (state.namespaces.has(key)) continue;
      state.namespaces.set(key, prefix);
      push('lifecycle', prefix, { event: 'started', graph_name: graphOf(prefix) });
    }
    let payload: unknown = JSON.parse(e.data);
    if (mode === 'values' && payload && typeof payload === 'object' && '__interrupt__' in payload) {
      const { __interrupt__: raw, ...rest } = payload as Json;
      for (const i of Array.isArray(raw) ? (raw as Json[]) : []) {
        const id = typeof i?.id === 'string' ? i.id : undefined;
        if (!id || state.interrupts.has(id)) continue;
        state.interrupts.add(id);
        // The JS SDK reads payload, the Python SDKs value: both carry the interrupt's value.
        push('input.requested', namespace, { interrupt_id: id, payload: i.value, value: i.value });
      }
      if (!Object.keys(rest).length) return numbered(e.id, out);
      payload = rest;
    }
    for (const part of messageBatch(mode, payload) ?? [payload])
      for (const pe of convertToProtocolEvent({ namespace, mode: mode as never, payload: part, seq: 0 })) {
        const p = pe.params as ProtocolEvent['params'];
        push(pe.method, namespace, p.data, p.node);
      }
    return numbered(e.id, out);
  }
}

/**
 * A whole message a run-API run recorded in one stored event (`[[event, ...], metadata]`, runs/protocol-messages.ts,
 * at most MESSAGE_BATCH events) as the `[event, metadata]` payloads of its events; null for any other payload.
 */
function messageBatch(mode: string, payload: unknown): unknown[] | null {
  if (mode !== 'messages' || !Array.isArray(payload) || !Array.isArray(payload[0])) return null;
  const [events, metadata] = payload as [unknown[], unknown];
  return events.map((event) => [event, metadata]);
}

const graphOf = (ns: string[]) => normalizeNamespaceSegment(ns[ns.length - 1] ?? 'root');

function parse(text: string): Json | null {
  try {
    const v = JSON.parse(text) as unknown;
    return v && typeof v === 'object' ? (v as Json) : null;
  } catch {
    return null;
  }
}

/** Gives the events of stored event `id` their seq; beyond SEQ_SLOTS (a values chunk with 60+ interrupts) drops. */
function numbered(id: number, events: Array<Omit<ProtocolEvent, 'seq' | 'event_id'>>): ProtocolEvent[] {
  return events.slice(0, SEQ_SLOTS).map((ev, k) => {
    const seq = id * SEQ_SLOTS + k;
    return { ...ev, seq, event_id: String(seq) };
  });
}
