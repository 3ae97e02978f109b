// The demo agent: a tool-calling chat loop driven by a deterministic fake chat model, so it runs without network
// or API keys. Its thread state has the shape of a real Anthropic-backed agent: human -> ai (text + tool_use,
// stop_reason tool_use) -> tool (status success) -> ai (stop_reason end_turn, usage_metadata).
import { randomUUID } from 'node:crypto';
import { AIMessage, type BaseMessage, ToolMessage } from '@langchain/core/messages';
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import type { ChatResult } from '@langchain/core/outputs';
import { tool } from '@langchain/core/tools';
import { END, MessagesValue, START, StateGraph, StateSchema } from '@langchain/langgraph';
import { z } from 'zod';

/** Read per call, so a deployment's environment (or langgraph.json "env") decides the answer. */
function greeting(): string {
  return process.env.AGENT_GREETING ?? 'Hello';
}

function textOf(message: BaseMessage): string {
  if (typeof message.content === 'string') return message.content;
  return message.content
    .map((block) => (block.type === 'text' && typeof block.text === 'string' ? block.text : ''))
    .join('');
}

/** Rough token count so usage_metadata carries plausible integers. */
function tokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

export const lookupGreeting = tool(
  async ({ name }) => {
    const text = `${greeting()}, ${name}!`;
    return [text, { source: 'AGENT_GREETING', length: text.length }];
  },
  {
    name: 'lookup_greeting',
    description: 'Returns the greeting this deployment uses for a person.',
    schema: z.object({ name: z.string().describe('who to greet') }),
    responseFormat: 'content_and_artifact',
  },
);

/**
 * Answers a human turn with one tool call, and a tool result with the final reply. No randomness in content;
 * ids are unique per message as a real provider's are.
 */
export class ScriptedChatModel extends BaseChatModel {
  override _llmType(): string {
    return 'scripted';
  }

  override async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const last = messages.at(-1);
    const inputTokens = messages.reduce((n, m) => n + tokens(textOf(m)), 0);
    let message: AIMessage;
    if (last && ToolMessage.isInstance(last)) {
      const text = `The greeting tool says: ${textOf(last)}`;
      message = new AIMessage({
        id: `msg_${randomUUID()}`,
        content: text,
        response_metadata: { model_name: 'scripted', stop_reason: 'end_turn', stop_sequence: null },
        usage_metadata: {
          input_tokens: inputTokens,
          output_tokens: tokens(text),
          total_tokens: inputTokens + tokens(text),
        },
      });
    } else {
      const asked = last ? textOf(last).trim() : '';
      const name = asked.length > 0 ? asked.slice(0, 60) : 'there';
      const callId = `toolu_${randomUUID().replaceAll('-', '')}`;
      const args = { name };
      const preface = 'Let me look up the greeting.';
      message = new AIMessage({
        id: `msg_${randomUUID()}`,
        content: [
          { type: 'text', text: preface, index: 0 },
          {
            type: 'tool_use',
            id: callId,
            name: lookupGreeting.name,
            input: args,
            index: 1,
            partial_json: JSON.stringify(args),
          },
        ],
        tool_calls: [{ name: lookupGreeting.name, args, id: callId, type: 'tool_call' }],
        response_metadata: { model_name: 'scripted', stop_reason: 'tool_use', stop_sequence: null },
        usage_metadata: {
          input_tokens: inputTokens,
          output_tokens: tokens(preface) + 10,
          total_tokens: inputTokens + tokens(preface) + 10,
        },
      });
    }
    return { generations: [{ text: textOf(message), message }] };
  }
}

const State = new StateSchema({ messages: MessagesValue });

const model = new ScriptedChatModel({});

async function callModel(state: { messages: BaseMessage[] }) {
  return { messages: [await model.invoke(state.messages)] };
}

async function callTools(state: { messages: BaseMessage[] }) {
  const last = state.messages.at(-1);
  const calls = last && AIMessage.isInstance(last) ? (last.tool_calls ?? []) : [];
  // Invoked with a ToolCall, a tool answers with a ToolMessage (tool_call_id, artifact, status "success").
  const results = await Promise.all(calls.map((call) => lookupGreeting.invoke({ ...call, type: 'tool_call' })));
  return { messages: results };
}

function route(state: { messages: BaseMessage[] }): 'tools' | typeof END {
  const last = state.messages.at(-1);
  return last && AIMessage.isInstance(last) && (last.tool_calls?.length ?? 0) > 0 ? 'tools' : END;
}

export const graph = new StateGraph(State)
  .addNode('agent', callModel)
  .addNode('tools', callTools)
  .addEdge(START, 'agent')
  .addConditionalEdges('agent', route, ['tools', END])
  .addEdge('tools', 'agent')
  .compile();
