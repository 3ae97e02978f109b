// MCP and A2A behind the deployment's keys and custom auth, against real server processes: two replicas on one
// Postgres database with the owner-only auth fixture and an API key file. Each caller acts as themself through the
// protocols: no token is a 401, another workspace's key a 401, and bob, holding alice's thread and task ids, can
// neither continue her thread nor read her task (through either replica), while alice follows her task on the
// replica that did not create it.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../../src/agent-server/http/api-keys.ts';
import { createTestDatabase } from '../helpers/pg.ts';
import { startServerProcess, type ServerProc } from '../helpers/process.ts';

const OWNER_CONFIG = new URL('../fixtures/auth-owner/langgraph.json', import.meta.url).pathname;
const WORKSPACE_KEY = 'apk_workspace-key-0123456789';
const OTHER_WORKSPACE_KEY = 'apk_other-workspace-9876543210';

async function mcpAs(url: string, token: string): Promise<Client> {
  const client = new Client({ name: 'auth-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  return client;
}

describe(
  'MCP and A2A act as the caller (custom auth, API keys, two replicas on Postgres)',
  { timeout: 120_000 },
  () => {
    let dir: string;
    let a: ServerProc;
    let b: ServerProc;
    let drop: () => Promise<void>;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'ap-as-protocols-auth-'));
      const keysFile = join(dir, 'keys.json');
      writeFileSync(keysFile, JSON.stringify({ hashes: [hashApiKey(WORKSPACE_KEY)] }));
      const db = await createTestDatabase();
      drop = db.drop;
      const args = ['--config', OWNER_CONFIG, '--database-url', db.url, '--auth-keys-file', keysFile];
      [a, b] = await Promise.all([startServerProcess(args), startServerProcess(args)]);
    });
    afterAll(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
      await drop?.();
      rmSync(dir, { recursive: true, force: true });
    });

    it('refuses MCP without a token, with a bad one, and with another workspace key', async () => {
      for (const headers of [
        {},
        { authorization: 'Bearer nope' },
        { authorization: 'Bearer token-alice', 'x-api-key': OTHER_WORKSPACE_KEY },
      ] as Array<Record<string, string>>) {
        const res = await fetch(`${a.url}/mcp`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
        });
        expect(res.status).toBe(401);
        expect(JSON.stringify(await res.json())).not.toContain('counter');
      }
    });

    it("keeps alice's MCP thread and task hers: bob gets not-found on either replica, alice follows her task on the other", async () => {
      const alice = await mcpAs(a.url, 'token-alice');
      const bob = await mcpAs(b.url, 'token-bob');
      const aliceOnB = await mcpAs(b.url, 'token-alice');
      try {
        const run = await alice.callTool({ name: 'whoami', arguments: {} });
        expect(run.structuredContent).toMatchObject({ user_id: 'alice' });
        const threadId = run._meta!.thread_id as string;

        // Bob names alice's thread: the run is refused as on the API (her thread does not exist for him).
        const hijack = await bob
          .callTool({ name: 'counter', arguments: {}, _meta: { thread_id: threadId } })
          .catch((e: unknown) => e);
        expect(hijack).toBeInstanceOf(McpError);
        expect((hijack as McpError).message).toContain('Thread not found');

        // Bob's own call runs as bob.
        const own = await bob.callTool({ name: 'whoami', arguments: {} });
        expect(own.structuredContent).toMatchObject({ user_id: 'bob' });

        // Alice's task, created on replica A: bob cannot see it anywhere; alice reads it on replica B.
        const created = (await alice.request(
          { method: 'tools/call', params: { name: 'counter', arguments: { count: 5 }, task: {} } },
          (await import('@modelcontextprotocol/sdk/types.js')).CreateTaskResultSchema,
        )) as { task: { taskId: string } };
        const taskId = created.task.taskId;
        for (const call of [
          () => bob.experimental.tasks.getTask(taskId),
          () => bob.experimental.tasks.getTaskResult(taskId, CallToolResultSchema),
          () => bob.experimental.tasks.cancelTask(taskId),
        ]) {
          const err = await call().catch((e: unknown) => e);
          expect(err).toBeInstanceOf(McpError);
          expect((err as McpError).message).toContain('Unknown task');
        }
        const result = await aliceOnB.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
        expect(result.structuredContent).toEqual({ count: 16, steps: ['first', 'second'] });
      } finally {
        await Promise.all([alice.close(), bob.close(), aliceOnB.close()]);
      }
    });

    const a2a = async (url: string, token: string | null, body: unknown) => {
      const res = await fetch(`${url}/a2a/whoami`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, any> };
    };
    const sendData = (id: number, message: Record<string, unknown>) => ({
      jsonrpc: '2.0',
      id,
      method: 'SendMessage',
      params: { message: { messageId: `m${id}`, role: 'ROLE_USER', parts: [{ data: {} }], ...message } },
    });

    it("refuses A2A without a token or with another workspace key, and keeps alice's A2A task and context hers", async () => {
      expect((await a2a(a.url, null, sendData(1, {}))).status).toBe(401);
      expect((await fetch(`${a.url}/a2a/whoami/.well-known/agent-card.json`)).status).toBe(401);
      const foreign = await fetch(`${a.url}/.well-known/agent-card.json?assistant_id=whoami`, {
        headers: { authorization: 'Bearer token-alice', 'x-api-key': OTHER_WORKSPACE_KEY },
      });
      expect(foreign.status).toBe(401);
      const card = await fetch(`${a.url}/a2a/whoami/.well-known/agent-card.json`, {
        headers: { authorization: 'Bearer token-alice' },
      });
      expect(((await card.json()) as { name: string }).name).toBe('whoami');

      const mine = await a2a(a.url, 'token-alice', sendData(2, { contextId: 'alice-private-context' }));
      expect(mine.body.result.task.status.state).toBe('TASK_STATE_COMPLETED');
      expect(mine.body.result.task.artifacts[0].parts[0].data).toMatchObject({ user_id: 'alice' });
      const taskId = mine.body.result.task.id as string;

      for (const server of [a, b]) {
        const got = await a2a(server.url, 'token-bob', {
          jsonrpc: '2.0',
          id: 3,
          method: 'GetTask',
          params: { id: taskId },
        });
        expect(got.body).toMatchObject({ id: 3, error: { code: -32001 } });
        const sub = await a2a(server.url, 'token-bob', {
          jsonrpc: '2.0',
          id: 4,
          method: 'tasks/resubscribe',
          params: { id: taskId },
        });
        expect(sub.body).toMatchObject({ id: 4, error: { code: -32001 } });
        // The same context name is alice's thread: bob's message to it finds no thread of his.
        const joined = await a2a(server.url, 'token-bob', sendData(5, { contextId: 'alice-private-context' }));
        expect(joined.body.error?.message).toContain('Thread not found');
      }
      // Listing the agent's tasks: alice sees hers, on either replica; bob's listing does not have it.
      const listTasks = async (server: ServerProc, token: string) =>
        (await a2a(server.url, token, { jsonrpc: '2.0', id: 7, method: 'ListTasks', params: { pageSize: 100 } })).body
          .result.tasks as Array<{ id: string }>;
      for (const server of [a, b]) {
        expect((await listTasks(server, 'token-alice')).map((t) => t.id)).toContain(taskId);
        expect((await listTasks(server, 'token-bob')).map((t) => t.id)).not.toContain(taskId);
      }
      // Alice reads her task on the replica that did not run it.
      const onB = await a2a(b.url, 'token-alice', {
        jsonrpc: '2.0',
        id: 6,
        method: 'tasks/get',
        params: { id: taskId },
      });
      expect(onB.body.result).toMatchObject({ kind: 'task', id: taskId, status: { state: 'completed' } });
    });
  },
);
