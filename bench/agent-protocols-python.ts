// Side by side with the Python Agent Server (not a test: it needs PyPI's langgraph-cli): the same MCP and A2A
// requests to the Python server and to ours, each on an equivalent graph, and both answers printed for comparison.
// docs/agent-server.md (MCP, A2A) lists what differs and why. The Python graph is a Python copy of
// test/agent-server/fixtures/a2a/echo.ts (MessagesState plus `topic`; "ask: ..." interrupts):
//
//   python3 -m venv .venv && .venv/bin/pip install "langgraph-cli[inmem]"
//   .venv/bin/langgraph dev --no-browser --port 2024          # in a folder with that graph as "echo"
//   npx agentplane agent-server --config test/agent-server/fixtures/a2a/langgraph.json --port 8731 &
//   node --import tsx bench/agent-protocols-python.ts http://127.0.0.1:2024 http://127.0.0.1:8731 > compare.json
import { parseArgs } from 'node:util';

const { positionals } = parseArgs({ allowPositionals: true });
if (positionals.length !== 2) throw new Error('usage: agent-protocols-python.ts <python server URL> <our URL>');
const servers = { python: positionals[0]!, ours: positionals[1]! };

async function post(url: string, body: unknown) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = text.slice(0, 600);
  }
  return { status: res.status, type: res.headers.get('content-type'), body: parsed as Record<string, any> };
}

const rpc = (id: number | string, method: string, params: unknown) => ({ jsonrpc: '2.0', id, method, params });
const text03 = (id: string, text: string, more: Record<string, unknown> = {}) => ({
  message: { kind: 'message', messageId: id, role: 'user', parts: [{ kind: 'text', text }], ...more },
});

const out: Record<string, Record<string, unknown>> = {};
for (const [name, base] of Object.entries(servers)) {
  const o: Record<string, unknown> = (out[name] = {});
  const assistants = (await post(`${base}/assistants/search`, { graph_id: 'echo' })).body as unknown as Array<{
    assistant_id: string;
  }>;
  const a2a = `${base}/a2a/${assistants[0]!.assistant_id}`;
  const mcp = `${base}/mcp`;
  const chat = { messages: [{ role: 'user', content: 'hi' }] };
  o.initialize = await post(
    mcp,
    rpc(1, 'initialize', {
      protocolVersion: '2025-06-18',
      capabilities: {},
      clientInfo: { name: 'cmp', version: '1' },
    }),
  );
  o.toolsList = await post(mcp, rpc(2, 'tools/list', {}));
  o.toolsCall = await post(mcp, rpc(3, 'tools/call', { name: 'echo', arguments: chat }));
  o.toolsCallInterrupt = await post(
    mcp,
    rpc(4, 'tools/call', { name: 'echo', arguments: { messages: [{ role: 'user', content: 'ask: colour?' }] } }),
  );
  o.toolsCallUnknown = await post(mcp, rpc('x5', 'tools/call', { name: 'nope', arguments: {} }));
  o.getMcp = await fetch(mcp).then(async (r) => ({ status: r.status, body: (await r.text()).slice(0, 200) }));
  o.cardByQuery = await fetch(`${base}/.well-known/agent-card.json?assistant_id=${assistants[0]!.assistant_id}`).then(
    async (r) => ({ status: r.status, body: (await r.json().catch(() => null)) as unknown }),
  );
  o.cardUnderAgent = await fetch(`${a2a}/.well-known/agent-card.json`).then((r) => ({ status: r.status }));
  const sent = await post(a2a, rpc(6, 'message/send', text03('m6', 'hello')));
  o.send03 = sent;
  o.get03 = await post(a2a, rpc(7, 'tasks/get', { id: sent.body.result?.id }));
  o.sendNonUuidContext = await post(a2a, rpc(8, 'message/send', text03('m8', 'hello', { contextId: 'my-chat' })));
  o.send10 = await post(
    a2a,
    rpc(9, 'SendMessage', { message: { messageId: 'm9', role: 'ROLE_USER', parts: [{ text: 'hello' }] } }),
  );
  o.sendInterrupt03 = await post(a2a, rpc(10, 'message/send', text03('m10', 'ask: colour?')));
  o.badParams = await post(a2a, rpc(11, 'message/send', {}));
}
process.stdout.write(`${JSON.stringify(out, null, 1)}\n`);
