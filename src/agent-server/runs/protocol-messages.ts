// Token deltas of runs started through the run API, for the thread protocol. Those runs stream with the modes their
// request asked for, so LangGraph makes no content-block message events for them; this callback handler, attached
// to such a run, makes them from the same callbacks LangGraph's own message streaming listens to, in the shape a
// protocol-started run stores (streams/run-events.ts): `[event, { langgraph_node, run_id }]` under
// `v2:messages|<checkpoint ns>`, which the run-centric streams leave out and protocol/events.ts serves.
// - a chat model's tokens (handleLLMNewToken, with the chunk when the model passes it) go through
//   @langchain/core's convertChunksToEvents, the converter a protocol run's model stream goes through, so the
//   message-start / content-block-* / message-finish events are the ones a protocol run of the same model makes;
// - a model call that streamed no token becomes one whole message (start, each block with its whole text or
//   arguments as one delta, finish), stored as one event `[[event, ...], metadata]` that protocol/events.ts
//   expands. Unlike a protocol run, a message a node returns without calling a model (no model callback) is not
//   sent: it shows in the run's values only.
// The handler does not ask models to stream, so the run's state and its run-centric stream stay exactly as they
// were. The executor attaches it only to runs whose own modes make their models stream (messages-tuple, messages,
// events: what chat UIs ask for); a values-only run (the SDK's default) has no tokens to relay and would pay the
// handler's callbacks for nothing. A call in such a run that still streams nothing (a `nostream` model, one that
// does not report its chunks) reaches protocol clients whole, when it ends. Events go out in order, a call's last
// ones before the call returns.
import { BaseCallbackHandler, type NewTokenIndices } from '@langchain/core/callbacks/base';
import { convertChunksToEvents } from '@langchain/core/language_models/compat';
import { AIMessageChunk, BaseMessage } from '@langchain/core/messages';
import { ChatGenerationChunk, type LLMResult } from '@langchain/core/outputs';

type Json = Record<string, unknown>;
/**
 * Protocol `messages` events to store: their namespace and the JSON-ready `[event, metadata]` pair, or, for a
 * whole message, `[[event, ...], metadata]`: one stored event (protocol/events.ts expands it), not one per event.
 */
export type MessagesSink = (namespace: string[], payload: [Json | Json[], Json]) => void;

/** Events of a whole message per stored event, well within the protocol events one stored event may become. */
const MESSAGE_BATCH = 48;

/** Chunks pushed by callbacks, read by convertChunksToEvents; fail() ends the read with an error. */
class ChunkQueue implements AsyncIterable<ChatGenerationChunk> {
  private readonly items: ChatGenerationChunk[] = [];
  private ended = false;
  private error: unknown;
  private wake: (() => void) | undefined;

  push(chunk: ChatGenerationChunk): void {
    this.items.push(chunk);
    this.wake?.();
  }

  end(error?: unknown): void {
    this.ended = true;
    this.error = error;
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<ChatGenerationChunk> {
    for (;;) {
      const next = this.items.shift();
      if (next) yield next;
      else if (this.ended) {
        if (this.error !== undefined) throw this.error;
        return;
      } else {
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
      }
    }
  }
}

interface Scope {
  namespace: string[];
  node: string | undefined;
}

interface ModelCall extends Scope {
  queue?: ChunkQueue;
  /** Resolves once every event of the queued chunks is out. */
  drained?: Promise<void>;
}

const NO_STREAM_TAGS = ['nostream', 'langsmith:nostream'];

function scopeOf(metadata: Json | undefined): Scope | undefined {
  const ns = metadata?.langgraph_checkpoint_ns;
  if (typeof ns !== 'string') return undefined;
  const node = metadata?.langgraph_node;
  return { namespace: ns.split('|'), node: typeof node === 'string' ? node : undefined };
}

const delta = (index: number, d: Json): Json => ({ event: 'content-block-delta', index, delta: d });
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/**
 * A block of a whole message: the empty block its content-block-start announces and the delta that fills it, in
 * the forms a streamed message's blocks take (convertChunksToEvents), so a client reads both alike.
 */
function blockParts(block: Json, index: number): { start: Json; delta?: Json } {
  switch (block.type) {
    case 'text':
      return {
        start: { type: 'text', text: '' },
        ...(str(block.text) ? { delta: delta(index, { type: 'text-delta', text: block.text }) } : {}),
      };
    case 'reasoning':
      return {
        start: { type: 'reasoning', reasoning: '' },
        ...(str(block.reasoning)
          ? { delta: delta(index, { type: 'reasoning-delta', reasoning: block.reasoning }) }
          : {}),
      };
    case 'tool_call':
    case 'tool_call_chunk': {
      const args = typeof block.args === 'string' ? block.args : JSON.stringify(block.args ?? {});
      const { id, name } = block;
      return {
        start: {
          type: 'tool_call_chunk',
          ...(id != null ? { id } : {}),
          ...(name != null ? { name } : {}),
          args: '',
          index,
        },
        ...(args ? { delta: delta(index, { type: 'tool-call-delta', args }) } : {}),
      };
    }
    default:
      return { start: block };
  }
}

/** A message's blocks: its content, then each tool call its content does not hold already. */
function blocksOf(message: BaseMessage): Json[] {
  const content = message.content;
  const blocks = (typeof content === 'string' ? (content ? [{ type: 'text', text: content }] : []) : content) as Json[];
  const calls = (message as { tool_calls?: Array<{ id?: string; name: string; args: unknown }> }).tool_calls ?? [];
  const held = new Set(blocks.filter((b) => b.type === 'tool_call' || b.type === 'tool_use').map((b) => b.id));
  const extra = calls
    .filter((c) => !held.has(c.id))
    .map((c) => ({ type: 'tool_call', ...(c.id != null ? { id: c.id } : {}), name: c.name, args: c.args }));
  return [...blocks, ...extra];
}

export class ProtocolMessagesRecorder extends BaseCallbackHandler {
  name = 'agentplane_protocol_messages';
  /** LangChain awaits this handler: a model call's events are out before the call returns. */
  override awaitHandlers = true;
  // No chain callbacks: looking at every node's input and output cost more than the rest of the handler (about
  // 2 ms per run of the example agent, bench/run-overhead.ts deltas), for messages nodes return without a model.
  override ignoreChain = true;
  override ignoreRetriever = true;
  override ignoreAgent = true;
  override ignoreCustomEvent = true;

  private readonly calls = new Map<string, ModelCall>();

  constructor(private readonly sink: MessagesSink) {
    super();
  }

  private send(scope: Scope, runId: string, event: Json | Json[]): void {
    this.sink(scope.namespace, [
      event,
      { ...(scope.node !== undefined ? { langgraph_node: scope.node } : {}), run_id: runId },
    ]);
  }

  override handleChatModelStart(
    _llm: unknown,
    _messages: unknown,
    runId: string,
    _parentRunId?: string,
    _extra?: Json,
    tags?: string[],
    metadata?: Json,
  ): void {
    if (tags?.some((t) => NO_STREAM_TAGS.includes(t))) return;
    const scope = scopeOf(metadata);
    if (scope) this.calls.set(runId, scope);
  }

  override handleLLMNewToken(
    token: string,
    _idx: NewTokenIndices,
    runId: string,
    _parentRunId?: string,
    _tags?: string[],
    fields?: { chunk?: unknown },
  ): void {
    const call = this.calls.get(runId);
    if (!call) return;
    // The model's chunk when it passes one (a graph may bring its own copy of LangChain: no instanceof), else the
    // token as a text chunk, as LangGraph's "messages" mode makes it.
    const given = fields?.chunk as { message?: unknown } | undefined;
    const chunk = BaseMessage.isInstance(given?.message)
      ? (given as ChatGenerationChunk)
      : new ChatGenerationChunk({ text: token, message: new AIMessageChunk({ content: token }) });
    if (!call.queue) {
      const queue = (call.queue = new ChunkQueue());
      call.drained = (async () => {
        try {
          for await (const e of convertChunksToEvents(queue)) {
            const event = e as unknown as Json;
            // Without the model's own id, LangChain names the message `run-<call id>`, as the state has it.
            this.send(
              call,
              runId,
              event.event === 'message-start' ? { ...event, id: event.id ?? `run-${runId}` } : event,
            );
          }
        } catch {
          // The model call failed: its message ends where its tokens stopped, as a protocol run's does.
        }
      })();
    }
    call.queue.push(chunk);
  }

  override async handleLLMEnd(output: LLMResult, runId: string): Promise<void> {
    const call = this.calls.get(runId);
    if (!call) return;
    this.calls.delete(runId);
    const message = (output.generations?.[0]?.[0] as { message?: unknown } | undefined)?.message;
    if (call.queue) {
      call.queue.end();
      await call.drained;
    } else if (BaseMessage.isInstance(message)) this.sendWhole(call, runId, message);
  }

  override async handleLLMError(err: unknown, runId: string): Promise<void> {
    const call = this.calls.get(runId);
    this.calls.delete(runId);
    if (!call?.queue) return;
    call.queue.end(err ?? new Error('model call failed'));
    await call.drained;
  }

  /** A model's answer that was not streamed, as one start, its blocks whole, and a finish, stored together. */
  private sendWhole(scope: Scope, runId: string, message: BaseMessage): void {
    const events: Json[] = [{ event: 'message-start', id: message.id ?? `run-${runId}` }];
    blocksOf(message).forEach((block, position) => {
      const index = typeof block.index === 'number' ? block.index : position;
      const { start, delta } = blockParts(block, index);
      events.push({ event: 'content-block-start', index, content: start });
      if (delta) events.push(delta);
      events.push({ event: 'content-block-finish', index, content: block });
    });
    const usage = (message as { usage_metadata?: unknown }).usage_metadata;
    const meta = message.response_metadata;
    events.push({
      event: 'message-finish',
      ...(usage != null ? { usage } : {}),
      ...(meta && typeof meta === 'object' ? { responseMetadata: meta } : {}),
    });
    for (let i = 0; i < events.length; i += MESSAGE_BATCH) this.send(scope, runId, events.slice(i, i + MESSAGE_BATCH));
  }
}
