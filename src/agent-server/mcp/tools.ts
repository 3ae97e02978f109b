// MCP tools: one per assistant the caller can see. Names are the assistant's name made safe for MCP
// ([A-Za-z0-9_.-], at most 128 characters); when several visible assistants come to the same name, the oldest keeps
// it and the others carry a piece of their id, so a name stays with its assistant as others are added. Input
// schemas are always object schemas (the graph's input schema when it is one, else an open object), so clients
// that require `type: "object"` accept every tool.
import { RpcError, INTERNAL_ERROR } from '../http/jsonrpc.ts';
import { detailOf, type CallerApi } from '../http/as-caller.ts';

type JsonSchema = Record<string, unknown>;

export interface AssistantRow {
  assistant_id: string;
  graph_id: string;
  name?: string | null;
  description?: string | null;
  created_at?: string;
}

export interface NamedAssistant {
  tool: string;
  assistant: AssistantRow;
}

/** Search pages read to list the tools, of 1000 assistants each. */
const MAX_PAGES = 10;

export function toolBaseName(a: AssistantRow): string {
  const raw = (a.name || a.graph_id || 'assistant').replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 128);
  return raw || 'assistant';
}

/** Every assistant the caller may read (the API's search, under its auth filter), oldest first, with tool names. */
export async function namedAssistants(api: CallerApi): Promise<NamedAssistant[]> {
  const rows: AssistantRow[] = [];
  for (let page = 0; page < MAX_PAGES; page++) {
    const res = await api.searchAssistants({
      limit: 1000,
      offset: page * 1000,
      sort_by: 'created_at',
      sort_order: 'asc',
      select: ['assistant_id', 'graph_id', 'name', 'description', 'created_at'],
    });
    if (res.status !== 200 || !Array.isArray(res.body)) {
      throw new RpcError(INTERNAL_ERROR, `listing the assistants failed: ${detailOf(res)}`, { status: res.status });
    }
    rows.push(...(res.body as AssistantRow[]));
    if (res.body.length < 1000) break;
  }
  const taken = new Set<string>();
  return rows.map((assistant) => {
    let tool = toolBaseName(assistant);
    if (taken.has(tool)) tool = `${tool.slice(0, 119)}-${assistant.assistant_id.replace(/-/g, '').slice(0, 8)}`;
    taken.add(tool);
    return { tool, assistant };
  });
}

/** A JSON schema as an MCP object schema: an object schema stays; anything else becomes an open object. */
export function asObjectSchema(schema: unknown): JsonSchema {
  if (schema && typeof schema === 'object' && (schema as JsonSchema).type === 'object') {
    const { $schema: _drop, ...rest } = schema as JsonSchema;
    return rest;
  }
  return { type: 'object', additionalProperties: true };
}

/**
 * The output schema a tool declares: the graph's output object schema with its top-level `required` dropped
 * (structuredContent is the thread's values, which may lack a field the graph never wrote; a client validates the
 * result against this and would refuse it). Undefined when the graph has no object output schema.
 */
export function outputSchemaOf(schema: unknown): JsonSchema | undefined {
  if (!schema || typeof schema !== 'object' || (schema as JsonSchema).type !== 'object') return undefined;
  const { $schema: _drop, required: _required, ...rest } = schema as JsonSchema;
  return rest;
}

export interface GraphSchemas {
  input_schema?: unknown;
  output_schema?: unknown;
}

/** The tool an assistant is, as tools/list describes it. */
export function describeTool(named: NamedAssistant, schemas: GraphSchemas | null, tasks: boolean) {
  const { assistant, tool } = named;
  const description =
    assistant.description ||
    `Runs the "${assistant.name || assistant.graph_id}" agent (graph ${assistant.graph_id}) on a thread and answers ` +
      'with its final state. The thread id comes back in _meta.thread_id: send it in _meta of the next call to ' +
      'continue that thread, with _meta.resume to answer an interrupt.';
  const output = outputSchemaOf(schemas?.output_schema);
  return {
    name: tool,
    title: assistant.name || assistant.graph_id,
    description,
    inputSchema: asObjectSchema(schemas?.input_schema),
    ...(output ? { outputSchema: output } : {}),
    ...(tasks ? { execution: { taskSupport: 'optional' } } : {}),
    _meta: { assistant_id: assistant.assistant_id, graph_id: assistant.graph_id },
  };
}
