// A2A push notifications against a real agent-server process (custom auth: alice and bob own their threads) and a
// receiver the test starts. First without --webhook-allow: loopback, metadata and private targets are refused as a
// run webhook is, with the same words, and nothing is stored; then, restarted on the same data with 127.0.0.1
// allowed: a config set before the restart is still there, notifications arrive (working, then completed) with the
// token and Authorization the config names, in the dialect it was set in, and bob can neither set, read, list nor
// delete alice's configs.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { Role, type AgentCard } from '@a2a-js/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServerProcess, type ServerProc } from '../helpers/process.ts';

const OWNER_CONFIG = new URL('../fixtures/auth-owner/langgraph.json', import.meta.url).pathname;

interface Received {
  path: string;
  token: string | undefined;
  authorization: string | undefined;
  body: Record<string, any>;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let data = '';
    req.on('data', (c: Buffer) => (data += c.toString()));
    req.on('end', () => resolve(data));
  });
}

async function until<T>(what: string, read: () => T | undefined, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = read();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('A2A push notifications', { timeout: 120_000 }, () => {
  let receiver: Server;
  let hookBase: string;
  const received: Received[] = [];
  let dir: string;
  let server: ServerProc | undefined;

  beforeAll(async () => {
    receiver = createServer(async (req, res) => {
      received.push({
        path: req.url ?? '',
        token: req.headers['x-a2a-notification-token'] as string | undefined,
        authorization: req.headers.authorization,
        body: JSON.parse(await readBody(req)) as Record<string, any>,
      });
      res.writeHead(200).end();
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    hookBase = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    dir = mkdtempSync(join(tmpdir(), 'ap-as-a2a-push-'));
    server = await startServerProcess(['--config', OWNER_CONFIG, '--data-dir', dir]);
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
    await new Promise((r) => receiver.close(r));
  });

  const rpc = async (token: string, method: string, params: unknown) => {
    const res = await fetch(`${server!.url}/a2a/whoami`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    return (await res.json()) as { result?: any; error?: { code: number; message: string } };
  };
  const sendData = (token: string, configuration?: Record<string, unknown>, method = 'SendMessage') =>
    rpc(token, method, {
      message:
        method === 'SendMessage'
          ? { messageId: crypto.randomUUID(), role: 'ROLE_USER', parts: [{ data: {} }] }
          : { kind: 'message', messageId: crypto.randomUUID(), role: 'user', parts: [{ kind: 'data', data: {} }] },
      ...(configuration ? { configuration } : {}),
    });

  let aliceTask: string;

  it('refuses loopback, metadata and private push targets as it refuses a run webhook, storing nothing', async () => {
    const sent = await sendData('token-alice');
    aliceTask = sent.result.task.id as string;
    const threadId = aliceTask.split(':')[0]!;
    for (const url of [
      `${hookBase}/loopback`,
      'http://169.254.169.254/latest/meta-data/',
      'http://10.20.30.40/hook',
      'http://[::ffff:192.168.1.1]/hook',
    ]) {
      const run = await fetch(`${server!.url}/threads/${threadId}/runs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer token-alice' },
        body: JSON.stringify({ assistant_id: 'whoami', input: {}, webhook: url }),
      });
      expect(run.status).toBe(422);
      const problem = String(((await run.json()) as { detail: string }).detail).replace(/^webhook: /, '');
      expect(problem).toMatch(/is not public/);

      const create = await rpc('token-alice', 'CreateTaskPushNotificationConfig', { taskId: aliceTask, url });
      expect(create.error).toMatchObject({ code: -32602 });
      expect(create.error!.message).toContain(`url: ${problem}`);
      const set03 = await rpc('token-alice', 'tasks/pushNotificationConfig/set', {
        taskId: aliceTask,
        pushNotificationConfig: { url },
      });
      expect(set03.error!.message).toContain(`url: ${problem}`);
      // A send naming such a target starts no run.
      const send = await sendData('token-alice', { pushNotificationConfig: { url } }, 'message/send');
      expect(send.error!.message).toContain(`url: ${problem}`);
    }
    const listed = await rpc('token-alice', 'ListTasks', { pageSize: 100 });
    expect(listed.result.totalSize).toBe(1);
    expect((await rpc('token-alice', 'ListTaskPushNotificationConfigs', { taskId: aliceTask })).result).toEqual({
      configs: [],
      nextPageToken: '',
    });
    // A name is judged where the delivery connects: localhost resolves to loopback, so this one is never POSTed.
    const port = new URL(hookBase).port;
    const set = await rpc('token-alice', 'CreateTaskPushNotificationConfig', {
      taskId: aliceTask,
      id: 'kept',
      url: `http://localhost:${port}/kept`,
      token: 'tok-kept',
    });
    expect(set.result).toMatchObject({ id: 'kept', taskId: aliceTask, token: 'tok-kept' });
    await sendData(
      'token-alice',
      { pushNotificationConfig: { url: `http://localhost:${port}/refused` } },
      'message/send',
    );
  });

  it('keeps configs across a restart and notifies working then completed, in each dialect (1.0 SDK client)', async () => {
    await server!.stop();
    server = await startServerProcess(['--config', OWNER_CONFIG, '--data-dir', dir, '--webhook-allow', '127.0.0.1']);
    const kept = await rpc('token-alice', 'GetTaskPushNotificationConfig', { taskId: aliceTask, id: 'kept' });
    expect(kept.result).toMatchObject({ id: 'kept', url: expect.stringContaining('/kept'), token: 'tok-kept' });

    const asAlice: typeof fetch = (input, init) => {
      const headers = new Headers(init?.headers);
      headers.set('authorization', 'Bearer token-alice');
      return fetch(input, { ...init, headers });
    };
    const card = await asAlice(`${server!.url}/a2a/whoami/.well-known/agent-card.json`).then(
      (r) => r.json() as Promise<AgentCard>,
    );
    const client = await new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new JsonRpcTransportFactory({ fetchImpl: asAlice })],
      }),
    ).createFromAgentCard(card);
    expect((await client.getAgentCard()).capabilities?.pushNotifications).toBe(true);
    const sent = await client.sendMessage({
      tenant: '',
      message: {
        messageId: crypto.randomUUID(),
        contextId: '',
        taskId: '',
        role: Role.ROLE_USER,
        parts: [{ content: { $case: 'data', value: {} }, metadata: undefined, filename: '', mediaType: '' }],
        metadata: undefined,
        extensions: [],
        referenceTaskIds: [],
      },
      configuration: {
        acceptedOutputModes: [],
        returnImmediately: false,
        taskPushNotificationConfig: {
          tenant: '',
          id: '',
          taskId: '',
          url: `${hookBase}/v10`,
          token: 'tok-10',
          authentication: { scheme: 'Bearer', credentials: 'receiver-secret' },
        },
      },
      metadata: undefined,
    });
    const taskId = (sent as { id: string }).id;
    const v10 = await until('the 1.0 completed notification', () => {
      const got = received.filter((r) => r.path === '/v10' && r.body.task?.id === taskId);
      return got.some((r) => r.body.task.status.state === 'TASK_STATE_COMPLETED') ? got : undefined;
    });
    expect(v10.map((r) => r.body.task.status.state)).toEqual(['TASK_STATE_WORKING', 'TASK_STATE_COMPLETED']);
    expect(v10.every((r) => r.token === 'tok-10' && r.authorization === 'Bearer receiver-secret')).toBe(true);
    expect(v10[1]!.body.task.artifacts[0].parts[0].data).toMatchObject({ user_id: 'alice' });

    // The config methods through the SDK: the send's config, one more, then that one deleted.
    const more = await client.createTaskPushNotificationConfig({
      tenant: '',
      id: 'second',
      taskId,
      url: `${hookBase}/second`,
      token: 'tok-2',
      authentication: undefined,
    });
    expect(more).toMatchObject({ id: 'second', taskId, url: `${hookBase}/second` });
    const got = await client.getTaskPushNotificationConfig({ tenant: '', taskId, id: 'default' });
    expect(got).toMatchObject({ url: `${hookBase}/v10`, token: 'tok-10' });
    const listed = await client.listTaskPushNotificationConfig({ tenant: '', taskId, pageSize: 10, pageToken: '' });
    expect(listed.configs.map((c) => c.id).sort()).toEqual(['default', 'second']);
    await client.deleteTaskPushNotificationConfig({ tenant: '', taskId, id: 'second' });
    const after = await client.listTaskPushNotificationConfig({ tenant: '', taskId, pageSize: 10, pageToken: '' });
    expect(after.configs.map((c) => c.id)).toEqual(['default']);

    // 0.3, raw JSON-RPC: the task itself, with `kind` and lowercase states.
    const sent03 = await sendData(
      'token-alice',
      { pushNotificationConfig: { url: `${hookBase}/v03`, token: 'tok-03' } },
      'message/send',
    );
    const id03 = sent03.result.id as string;
    const v03 = await until('the 0.3 completed notification', () => {
      const all = received.filter((r) => r.path === '/v03' && r.body.id === id03);
      return all.some((r) => r.body.status.state === 'completed') ? all : undefined;
    });
    expect(v03.map((r) => [r.body.kind, r.body.status.state, r.token])).toEqual([
      ['task', 'working', 'tok-03'],
      ['task', 'completed', 'tok-03'],
    ]);
    const set = await rpc('token-alice', 'tasks/pushNotificationConfig/set', {
      taskId: id03,
      pushNotificationConfig: {
        id: 'x',
        url: `${hookBase}/x`,
        authentication: { schemes: ['Basic'], credentials: 'YTpi' },
      },
    });
    expect(set.result).toEqual({
      taskId: id03,
      pushNotificationConfig: {
        id: 'x',
        url: `${hookBase}/x`,
        authentication: { schemes: ['Basic'], credentials: 'YTpi' },
      },
    });
    expect((await rpc('token-alice', 'tasks/pushNotificationConfig/list', { id: id03 })).result).toHaveLength(2);
    expect(
      (await rpc('token-alice', 'tasks/pushNotificationConfig/delete', { id: id03, pushNotificationConfigId: 'x' }))
        .result,
    ).toBeNull();
    const gone = await rpc('token-alice', 'tasks/pushNotificationConfig/get', {
      id: id03,
      pushNotificationConfigId: 'x',
    });
    expect(gone.error).toMatchObject({ code: -32602 });

    // Set before the restart with a name that resolves to loopback: refused where it connected, never delivered.
    expect(received.filter((r) => r.path === '/kept' || r.path === '/refused')).toEqual([]);
  });

  it("keeps alice's configs hers: bob gets task-not-found for every config method on her task", async () => {
    const attempts: Array<[string, unknown]> = [
      ['CreateTaskPushNotificationConfig', { taskId: aliceTask, id: 'bob', url: `${hookBase}/bob` }],
      ['GetTaskPushNotificationConfig', { taskId: aliceTask, id: 'kept' }],
      ['ListTaskPushNotificationConfigs', { taskId: aliceTask }],
      ['DeleteTaskPushNotificationConfig', { taskId: aliceTask, id: 'kept' }],
      ['tasks/pushNotificationConfig/set', { taskId: aliceTask, pushNotificationConfig: { url: `${hookBase}/bob` } }],
      ['tasks/pushNotificationConfig/get', { id: aliceTask }],
      ['tasks/pushNotificationConfig/list', { id: aliceTask }],
      ['tasks/pushNotificationConfig/delete', { id: aliceTask, pushNotificationConfigId: 'kept' }],
    ];
    for (const [method, params] of attempts) {
      const res = await rpc('token-bob', method, params);
      expect(res.error, method).toMatchObject({ code: -32001 });
      expect(JSON.stringify(res)).not.toContain('tok-kept');
    }
    const mine = await rpc('token-alice', 'ListTaskPushNotificationConfigs', { taskId: aliceTask });
    expect(mine.result.configs).toEqual([expect.objectContaining({ id: 'kept', token: 'tok-kept' })]);
  });
});
