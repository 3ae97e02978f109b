// Token deltas of runs started through the run API, for the thread protocol. Those runs stream with the modes their
// request asked for, so LangGraph makes no content-block message events for them; this callback handler, attached
// to such a run, makes them from the same callbacks LangGraph's own message streaming listens to, in the shape a
// protocol-started run stores (streams/run-events.ts): `[event, { langgraph_node, run_id }]` under
// `v2:messages|<checkpoint ns>`, which the run-centric streams leave out and protocol/events.ts serves.
// - a chat model's tokens (handleLLMNewToken, with the chunk when the model passes it) go through
//   @langchain/core's convertChunksToEvents, the converter a protocol run's model stream goes through, so the
//   message-start / content-block-* / message-finish events are the ones a protocol run of the same model makes;
// - a model call that streamed no token, and a message with an id a node returns without a model, become one whole
//   message (start, each block with its whole text or arguments as one delta, finish), unless already sent.
// The handler does not ask models to stream: a model streams when the run's own modes make it (messages-tuple,
// messages, events: what chat UIs ask for), so the run's state and its run-centric stream stay exactly as they
// were; a run that asked for values only (the SDK's default) has its model answer whole, and protocol clients get
// each answer as one delta when the call ends. Events go out in order, a call's last ones before the call returns.
import { BaseCallbackHandler, type NewTokenIndices } from '@langchain/core/callbacks/base';
import { convertChunksToEvents } from '@langchain/core/language_models/compat';
import { AIMessageChunk, BaseMessage, ToolMessage } from '@langchain/core/messages';
import { ChatGenerationChunk, type LLMResult } from '@langchain/core/outputs';

type Json = Record<string, unknown>;
/** One protocol `messages` event: its namespace and the JSON-ready `[event, metadata]` pair. */
export type MessagesSink = (namespace: string[], payload: [Json, Json]) => void;

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
  /** The message id its events carry (the model's, or `run-<call id>` as LangChain names it). */
  id?: string;
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
  override ignoreRetriever = true;
  override ignoreAgent = true;
  override ignoreCustomEvent = true;

  private readonly calls = new Map<string, ModelCall>();
  private readonly nodes = new Map<string, Scope>();
  /** Ids of the messages already sent or known (a node's input), so none goes out twice. */
  private readonly seen = new Set<string>();

  constructor(private readonly sink: MessagesSink) {
    super();
  }

  private send(scope: Scope, runId: string, event: Json): void {
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
            let event = e as unknown as Json;
            if (event.event === 'message-start') {
              call.id = typeof event.id === 'string' ? event.id : `run-${runId}`;
              this.seen.add(call.id);
              event = { ...event, id: call.id };
            }
            this.send(call, runId, event);
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
      if (BaseMessage.isInstance(message) && message.id) this.seen.add(message.id);
    } else if (BaseMessage.isInstance(message)) this.sendWhole(call, runId, message, `run-${runId}`);
  }

  override async handleLLMError(err: unknown, runId: string): Promise<void> {
    const call = this.calls.get(runId);
    this.calls.delete(runId);
    if (!call?.queue) return;
    call.queue.end(err ?? new Error('model call failed'));
    await call.drained;
  }

  override handleChainStart(
    _chain: unknown,
    inputs: Json,
    runId: string,
    _parentRunId?: string,
    tags?: string[],
    metadata?: Json,
    _runType?: string,
    name?: string,
  ): void {
    // A graph node's own run (not the runnables inside it), as LangGraph's message streaming tells them apart.
    if (metadata === undefined || name !== metadata.langgraph_node || tags?.includes('langsmith:hidden')) return;
    const scope = scopeOf(metadata);
    if (!scope) return;
    this.nodes.set(runId, scope);
    if (inputs && typeof inputs === 'object')
      for (const value of Object.values(inputs))
        for (const m of Array.isArray(value) ? (value as unknown[]) : [value])
          if (BaseMessage.isInstance(m) && m.id) this.seen.add(m.id);
  }

  override handleChainEnd(outputs: Json, runId: string): void {
    const scope = this.nodes.get(runId);
    if (!scope) return;
    this.nodes.delete(runId);
    // Only messages with an id: one without gets its id from the graph's reducer later, and events under another
    // id would show the message twice (LangGraph's protocol handler names it by changing the message: not here,
    // where the run's state and its run-centric stream must stay as they were).
    const each = (v: unknown) => {
      if (BaseMessage.isInstance(v) && v.id && !ToolMessage.isInstance(v)) this.sendWhole(scope, runId, v);
    };
    if (BaseMessage.isInstance(outputs)) each(outputs);
    else if (Array.isArray(outputs)) outputs.forEach(each);
    else if (outputs && typeof outputs === 'object')
      for (const value of Object.values(outputs)) (Array.isArray(value) ? value : [value]).forEach(each);
  }

  override handleChainError(_err: unknown, runId: string): void {
    this.nodes.delete(runId);
  }

  /** A message that was not streamed, as one start, its blocks whole, and a finish; nothing if already sent. */
  private sendWhole(scope: Scope, runId: string, message: BaseMessage, fallbackId?: string): void {
    const id = message.id ?? fallbackId;
    if (id !== undefined && this.seen.has(id)) return;
    if (id !== undefined) this.seen.add(id);
    const type = message.getType();
    const role = type === 'human' || type === 'system' || type === 'tool' ? type : 'ai';
    const toolCallId = ToolMessage.isInstance(message) ? message.tool_call_id : undefined;
    this.send(scope, runId, {
      event: 'message-start',
      ...(id !== undefined ? { id } : {}),
      ...(role !== 'ai' ? { role } : {}),
      ...(toolCallId !== undefined ? { tool_call_id: toolCallId } : {}),
    });
    blocksOf(message).forEach((block, position) => {
      const index = typeof block.index === 'number' ? block.index : position;
      const { start, delta } = blockParts(block, index);
      this.send(scope, runId, { event: 'content-block-start', index, content: start });
      if (delta) this.send(scope, runId, delta);
      this.send(scope, runId, { event: 'content-block-finish', index, content: block });
    });
    const usage = (message as { usage_metadata?: unknown }).usage_metadata;
    const meta = message.response_metadata;
    this.send(scope, runId, {
      event: 'message-finish',
      ...(usage != null ? { usage } : {}),
      ...(meta && typeof meta === 'object' ? { responseMetadata: meta } : {}),
    });
  }
}
