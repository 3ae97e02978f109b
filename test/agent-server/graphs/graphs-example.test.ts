// The example agent loads through langgraph.json and leaves the seed's message shapes in the thread state.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MemorySaver } from '@langchain/langgraph';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadGraphs, type GraphRegistry } from '../../../src/agent-server/graphs/index.ts';
import { silentLogger } from '../../../src/lib/logger.ts';

const config = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../examples/agent/langgraph.json');
let registry: GraphRegistry;

beforeAll(async () => {
  delete process.env.AGENT_GREETING;
  registry = await loadGraphs(config, { logger: silentLogger() });
});

afterEach(() => {
  process.env.AGENT_GREETING = 'Hello';
});

async function run(threadId: string, text: string) {
  const graph = await registry.getGraph('agent', {}, { checkpointer: new MemorySaver() });
  const cfg = { configurable: { thread_id: threadId } };
  await graph.invoke({ messages: [{ role: 'human', content: text }] }, cfg);
  return graph.getState(cfg);
}

describe('examples/agent', () => {
  it('has one graph "agent" with the reference system assistant id and env from langgraph.json', () => {
    expect(registry.specs).toEqual([
      expect.objectContaining({
        graphId: 'agent',
        assistantId: 'fe096781-5601-53d2-b2f6-0d3403f7e9ca',
        exportName: 'graph',
      }),
    ]);
    expect(registry.env).toEqual({ AGENT_GREETING: 'Hello' });
    expect(process.env.AGENT_GREETING).toBe('Hello');
  });

  it('answers human -> ai(tool_use) -> tool -> ai(end_turn)', async () => {
    const state = await run('t1', 'Ada');
    expect(state.next).toEqual([]);
    const messages = (state.values as { messages: Array<Record<string, unknown> & { getType(): string }> }).messages;
    expect(messages.map((m) => m.getType())).toEqual(['human', 'ai', 'tool', 'ai']);
    const [human, call, result, final] = messages as unknown as [
      Record<string, any>,
      Record<string, any>,
      Record<string, any>,
      Record<string, any>,
    ];
    expect(human.content).toBe('Ada');
    expect(typeof human.id).toBe('string');

    expect(call.content).toEqual([
      { type: 'text', text: 'Let me look up the greeting.', index: 0 },
      expect.objectContaining({ type: 'tool_use', name: 'lookup_greeting', input: { name: 'Ada' }, index: 1 }),
    ]);
    const toolCall = call.tool_calls[0];
    expect(call.tool_calls).toEqual([
      { name: 'lookup_greeting', args: { name: 'Ada' }, id: toolCall.id, type: 'tool_call' },
    ]);
    expect(call.content[1].id).toBe(toolCall.id);
    expect(call.response_metadata.stop_reason).toBe('tool_use');

    expect(result.tool_call_id).toBe(toolCall.id);
    expect(result.status).toBe('success');
    expect(result.content).toBe('Hello, Ada!');
    expect(result.artifact).toEqual({ source: 'AGENT_GREETING', length: 11 });

    expect(final.content).toBe('The greeting tool says: Hello, Ada!');
    expect(final.response_metadata.stop_reason).toBe('end_turn');
    const usage = final.usage_metadata as Record<string, number>;
    expect(Object.values(usage).every(Number.isInteger)).toBe(true);
    expect(usage.total_tokens).toBe(usage.input_tokens! + usage.output_tokens!);
  });

  it('takes its greeting from AGENT_GREETING at call time', async () => {
    process.env.AGENT_GREETING = 'Bonjour';
    const state = await run('t2', 'Grace');
    const messages = (state.values as { messages: Array<{ content: unknown }> }).messages;
    expect(messages.at(-1)?.content).toBe('The greeting tool says: Bonjour, Grace!');
  });

  it('publishes a messages state schema', async () => {
    const s = await registry.getSchemas('agent');
    expect(s.state_schema).toMatchObject({ type: 'object', properties: { messages: { langgraph_type: 'messages' } } });
    const drawn = await registry.getDrawableGraph('agent', {});
    expect((drawn.nodes as Array<{ id: string }>).map((n) => n.id).sort()).toEqual([
      '__end__',
      '__start__',
      'agent',
      'tools',
    ]);
  });
});
