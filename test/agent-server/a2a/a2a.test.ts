// A2A at /a2a/{assistant_id}, on both stores, with the official @a2a-js/sdk 1.3: its 1.0 client created from the
// card URL, its v0.3 compatibility transport on the same URL, and raw 0.3 JSON-RPC as the hosted platform's clients
// send it. Text parts become messages, data parts merge into the input, a context is a thread (any string), an
// interrupt is input-required and a message with the task id resumes it, cancel cancels the run, and a stream can be
// subscribed to again.
import { randomUUID } from 'node:crypto';
import { Client as LangGraph } from '@langchain/langgraph-sdk';
import { Role, TaskState, type Task } from '@a2a-js/sdk';
import { Client, ClientFactory } from '@a2a-js/sdk/client';
import { LegacyJsonRpcTransport } from '@a2a-js/sdk/compat/v0_3/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../helpers/harness.ts';

const CONFIG = new URL('../fixtures/a2a/langgraph.json', import.meta.url).pathname;

/** A user message as the SDK's types spell it. */
function userMessage(
  parts: Array<{ text: string } | { data: unknown }>,
  more: { contextId?: string; taskId?: string } = {},
) {
  return {
    messageId: randomUUID(),
    contextId: more.contextId ?? '',
    taskId: more.taskId ?? '',
    role: Role.ROLE_USER,
    parts: parts.map((p) => ({
      content: 'text' in p ? { $case: 'text' as const, value: p.text } : { $case: 'data' as const, value: p.data },
      metadata: undefined,
      filename: '',
      mediaType: '',
    })),
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

const send = (message: ReturnType<typeof userMessage>, returnImmediately = false) => ({
  tenant: '',
  message,
  configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately },
  metadata: undefined,
});

const textOf = (t: Task) =>
  t.artifacts.flatMap((a) => a.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : ''))).join('');

describe.each(['embedded', 'postgres'] as const)('A2A with the official SDK clients, %s store', (store) => {
  let h: Harness;
  let url: string;
  let echoId: string;
  let counterId: string;
  let v10: Client;
  let v03: Client;
  let lg: LangGraph;
  /** The JSON-RPC methods the v0.3 compatibility client put on the wire. */
  const v03Methods: string[] = [];

  const raw = async (body: unknown, assistantId = echoId) => {
    const res = await fetch(`${url}/a2a/${assistantId}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, type: res.headers.get('content-type') ?? '', text: await res.text() };
  };

  beforeAll(async () => {
    h = await startHarness({ store, configPath: CONFIG });
    url = await h.app.listen({ port: 0, host: '127.0.0.1' });
    lg = new LangGraph({ apiUrl: url, apiKey: null });
    const assistants = await lg.assistants.search({ limit: 10 });
    echoId = assistants.find((a) => a.graph_id === 'echo')!.assistant_id;
    counterId = assistants.find((a) => a.graph_id === 'counter')!.assistant_id;
    v10 = await new ClientFactory().createFromUrl(`${url}/a2a/${echoId}/.well-known/agent-card.json`, '');
    const card = await v10.getAgentCard();
    const recording: typeof fetch = async (input, init) => {
      if (typeof init?.body === 'string') v03Methods.push((JSON.parse(init.body) as { method: string }).method);
      return fetch(input, init);
    };
    v03 = new Client(new LegacyJsonRpcTransport({ endpoint: `${url}/a2a/${echoId}`, fetchImpl: recording }), card);
  });
  afterAll(async () => {
    await h?.close();
  });

  it('serves one card at both paths, with the 0.3 fields and 1.0 interfaces, for assistants the caller can see', async () => {
    const byPath = (await fetch(`${url}/a2a/${echoId}/.well-known/agent-card.json`).then((r) => r.json())) as {
      skills: Array<Record<string, unknown>>;
    };
    const byQuery = await fetch(`${url}/.well-known/agent-card.json?assistant_id=${echoId}`).then((r) => r.json());
    expect(byQuery).toEqual(byPath);
    expect(byPath).toMatchObject({
      name: 'echo',
      url: `${url}/a2a/${echoId}`,
      protocolVersion: '0.3.0',
      preferredTransport: 'JSONRPC',
      capabilities: { streaming: true, pushNotifications: true },
      supportedInterfaces: [
        { url: `${url}/a2a/${echoId}`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
        { url: `${url}/a2a/${echoId}`, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
      ],
    });
    expect(byPath.skills[0]).toMatchObject({ id: 'echo', name: 'echo' });
    // A graph id names its default assistant, as in the API; an unknown one is a 404.
    expect((await fetch(`${url}/a2a/echo/.well-known/agent-card.json`)).status).toBe(200);
    expect((await fetch(`${url}/a2a/nope/.well-known/agent-card.json`)).status).toBe(404);
    expect((await fetch(`${url}/.well-known/agent-card.json`)).status).toBe(400);
    // The public host a proxy forwarded is the one the card names.
    const proxied = (await fetch(`${url}/a2a/${echoId}/.well-known/agent-card.json`, {
      headers: { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'agents.example.com' },
    }).then((r) => r.json())) as { url: string };
    expect(proxied.url).toBe(`https://agents.example.com/a2a/${echoId}`);
    // Forwarded values that are not plain host names or prefixes are not put into the URL.
    const forged = (await fetch(`${url}/a2a/${echoId}/.well-known/agent-card.json`, {
      headers: {
        'x-forwarded-host': 'a.example/evil?x=',
        'x-forwarded-prefix': '/p"><script>',
        'x-forwarded-proto': 'javascript',
      },
    }).then((r) => r.json())) as { url: string };
    expect(forged.url).toBe(`${url}/a2a/${echoId}`);
  });

  it('1.0 client: text becomes a message, the reply an artifact; a non-UUID contextId is a stable thread', async () => {
    const contextId = `chat with spaces & ünïcode ${randomUUID()}`;
    const first = (await v10.sendMessage(send(userMessage([{ text: 'hello' }], { contextId })))) as Task;
    expect(first.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(first.contextId).toBe(contextId);
    expect(textOf(first)).toBe('echo: hello');
    const [threadId] = first.id.split(':');
    // Data parts merge into the input; the same context is the same thread, so the conversation goes on.
    const second = (await v10.sendMessage(
      send(userMessage([{ text: 'again' }, { data: { topic: 'tides' } }], { contextId })),
    )) as Task;
    expect(textOf(second)).toBe('echo: again (topic tides)');
    expect(second.id.split(':')[0]).toBe(threadId);
    const state = await lg.threads.getState<{ messages: Array<{ content: string }> }>(threadId!);
    expect(state.values.messages.map((m) => m.content)).toEqual([
      'hello',
      'echo: hello',
      'again',
      'echo: again (topic tides)',
    ]);
    const got = await v10.getTask({ tenant: '', id: second.id, historyLength: undefined });
    expect(got.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(textOf(got)).toBe('echo: again (topic tides)');
    // The history is the task's turn: the user's message (text and data, with its id) and the agent's reply.
    const turn = (t: Task) => t.history.map((m) => [m.role, m.parts.map((p) => p.content?.value)] as [Role, unknown[]]);
    for (const t of [second, got]) {
      expect(turn(t)).toEqual([
        [Role.ROLE_USER, ['again', { topic: 'tides' }]],
        [Role.ROLE_AGENT, ['echo: again (topic tides)']],
      ]);
    }
  });

  it('0.3 compatibility client on the same URL: interrupt as input-required, resumed by a message with the task id', async () => {
    const asked = (await v03.sendMessage(send(userMessage([{ text: 'ask: which tide?' }])))) as Task;
    expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const question = asked.status?.message?.parts[0]?.content;
    expect(question).toEqual({ $case: 'data', value: expect.objectContaining({ value: { question: 'which tide?' } }) });
    const answered = (await v03.sendMessage(
      send(userMessage([{ text: 'the spring tide' }], { taskId: asked.id, contextId: asked.contextId })),
    )) as Task;
    expect(answered.id).toBe(asked.id);
    expect(answered.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(textOf(answered)).toBe('answer: the spring tide');
    expect(answered.history.map((m) => m.parts[0]?.content?.value)).toEqual([
      'the spring tide',
      'answer: the spring tide',
    ]);
    // The task is done: another message to it is refused.
    const again = await v03
      .sendMessage(send(userMessage([{ text: 'more' }], { taskId: asked.id })))
      .catch((e: unknown) => e);
    expect(String(again)).toContain('not waiting for input');
    expect(new Set(v03Methods)).toEqual(new Set(['message/send']));
  });

  it('streams a task with both clients, resubscribes to it, and cancels a running one', async () => {
    for (const client of [v10, v03]) {
      const events = [];
      for await (const e of client.sendMessageStream(send(userMessage([{ text: 'streamed' }])))) events.push(e);
      const kinds = events.map((e) => e.payload?.$case);
      expect(kinds[0]).toBe('task');
      expect(kinds.at(-1)).toBe('statusUpdate');
      const last = events.at(-1)!.payload!.value as { status: { state: TaskState } };
      expect(last.status.state).toBe(TaskState.TASK_STATE_COMPLETED);
      const artifact = events.find((e) => e.payload?.$case === 'artifactUpdate')!.payload!.value as {
        artifact: { parts: Array<{ content: { value: string } }> };
      };
      expect(artifact.artifact.parts[0]!.content.value).toBe('echo: streamed');
    }

    // A slow task left running: a subscription (a new connection) follows it; cancel ends it as canceled.
    const started = (await v10.sendMessage(send(userMessage([{ text: 'slow' }]), true))) as Task;
    expect([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING]).toContain(started.status?.state);
    const followed: TaskState[] = [];
    const following = (async () => {
      for await (const e of v03.resubscribeTask({ tenant: '', id: started.id })) {
        const v = e.payload?.value as { status?: { state: TaskState } };
        if (v.status) followed.push(v.status.state);
      }
    })();
    // Cancel once the run is running (the subscription's first event says the task exists).
    for (
      let i = 0;
      i < 100 &&
      (await v10.getTask({ tenant: '', id: started.id, historyLength: undefined })).status?.state !==
        TaskState.TASK_STATE_WORKING;
      i++
    )
      await new Promise((r) => setTimeout(r, 50));
    const cancelled = await v10.cancelTask({ tenant: '', id: started.id, metadata: undefined });
    expect(cancelled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    await following;
    expect(followed.at(-1)).toBe(TaskState.TASK_STATE_CANCELED);
    expect(v03Methods).toEqual(expect.arrayContaining(['message/stream', 'tasks/resubscribe']));
    const twice = await v10.cancelTask({ tenant: '', id: started.id, metadata: undefined }).catch((e: unknown) => e);
    expect(String(twice)).toContain('cannot be canceled');
  });

  it('streams the reply token by token to both clients, and replays it from the log to a late subscriber', async () => {
    const chatId = (await lg.assistants.search({ graphId: 'chat', limit: 1 }))[0]!.assistant_id;
    const client = await new ClientFactory().createFromUrl(`${url}/a2a/${chatId}/.well-known/agent-card.json`, '');
    const legacy = new Client(
      new LegacyJsonRpcTransport({ endpoint: `${url}/a2a/${chatId}` }),
      await client.getAgentCard(),
    );
    type Update = { artifact: { parts: Array<{ content?: { value: unknown } }> }; append: boolean; lastChunk: boolean };
    const pieces = (events: Array<{ payload?: { $case?: string; value?: unknown } }>) => {
      const updates = events
        .filter((e) => e.payload?.$case === 'artifactUpdate')
        .map((e) => e.payload!.value as Update);
      const streamed = updates.filter((u) => !u.lastChunk);
      return {
        count: streamed.length,
        appended: streamed.slice(1).every((u) => u.append),
        text: streamed.map((u) => String(u.artifact.parts[0]!.content!.value)).join(''),
        final: String(updates.at(-1)!.artifact.parts[0]!.content!.value),
      };
    };
    const reply = 'tokens, one by one';
    for (const c of [client, legacy]) {
      const events = [];
      const message = userMessage([{ text: 'hi' }, { data: { text: reply } }]);
      for await (const e of c.sendMessageStream(send(message))) events.push(e);
      // The fake model streams a character per token: many pieces, appended, adding up to the final reply.
      expect(pieces(events)).toEqual({ count: reply.length, appended: true, text: reply, final: reply });
      const last = events.at(-1)!.payload!.value as { status: { state: TaskState } };
      expect(last.status.state).toBe(TaskState.TASK_STATE_COMPLETED);
    }

    // A task started in the background (its tokens slowed down), followed by a new connection: the pieces written
    // before it subscribed come again from the run's durable event log, then the rest as they are written.
    const slow = userMessage([{ text: 'hi' }, { data: { text: reply, sleep_ms: 30 } }]);
    const started = (await client.sendMessage(send(slow, true))) as Task;
    await new Promise((r) => setTimeout(r, 150));
    const followed = [];
    for await (const e of legacy.resubscribeTask({ tenant: '', id: started.id })) followed.push(e);
    expect(pieces(followed)).toMatchObject({ count: reply.length, text: reply, final: reply });
  });

  it("lists the caller's tasks of an agent with ListTasks: newest first, paged, by context and state", async () => {
    const contextId = `list-${randomUUID()}`;
    const ids: string[] = [];
    for (const text of ['one', 'two', 'three']) {
      const t = (await v10.sendMessage(send(userMessage([{ text }], { contextId })))) as Task;
      ids.push(t.id);
    }
    const list = (more: { pageSize?: number; pageToken?: string; status?: TaskState; contextId?: string }) =>
      v10.listTasks({
        tenant: '',
        contextId: more.contextId ?? contextId,
        status: more.status ?? TaskState.TASK_STATE_UNSPECIFIED,
        pageSize: more.pageSize,
        pageToken: more.pageToken ?? '',
        historyLength: undefined,
        statusTimestampAfter: undefined,
        includeArtifacts: true,
      });
    const first = await list({ pageSize: 2 });
    expect(first.tasks.map((t) => t.id)).toEqual([ids[2], ids[1]]);
    // Each task shows its own run's reply, not the thread's newest one.
    expect(first.tasks.map(textOf)).toEqual(['echo: three', 'echo: two']);
    expect(first.totalSize).toBe(3);
    expect(first.nextPageToken).not.toBe('');
    const second = await list({ pageSize: 2, pageToken: first.nextPageToken });
    expect(second.tasks.map((t) => t.id)).toEqual([ids[0]]);
    expect(second.tasks.map(textOf)).toEqual(['echo: one']);
    const oldest = await v10.getTask({ tenant: '', id: ids[0]!, historyLength: undefined });
    expect(textOf(oldest)).toBe('echo: one');
    expect(oldest.history.map((m) => m.parts[0]?.content?.value)).toEqual(['one', 'echo: one']);
    const legacy = JSON.parse(
      (await raw({ jsonrpc: '2.0', id: 'g', method: 'tasks/get', params: { id: ids[1] } })).text,
    );
    expect(legacy.result.artifacts[0].parts).toEqual([{ kind: 'text', text: 'echo: two' }]);
    expect(legacy.result.status.message.parts).toEqual([{ kind: 'text', text: 'echo: two' }]);
    expect(second.nextPageToken).toBe('');
    // Every context of the agent: these three among them; a state none of them is in: none of them.
    const all = await list({ pageSize: 100, contextId: '' });
    expect(all.tasks.map((t) => t.id)).toEqual(expect.arrayContaining(ids));
    const waiting = await list({ pageSize: 100, status: TaskState.TASK_STATE_INPUT_REQUIRED });
    expect(waiting.tasks).toEqual([]);
    // A token it never gave out is the caller's error, named.
    const bad = await raw({ jsonrpc: '2.0', id: 'l', method: 'ListTasks', params: { pageToken: 'nope' } });
    expect(JSON.parse(bad.text)).toMatchObject({ id: 'l', error: { code: -32602 } });
    expect(JSON.parse(bad.text).error.message).toContain('pageToken');
  });

  it('raw 0.3 JSON-RPC as the hosted platform clients send it: kind fields, lowercase states, errors keep the id', async () => {
    const sent = await raw(
      {
        jsonrpc: '2.0',
        id: 'r1',
        method: 'message/send',
        params: {
          message: {
            kind: 'message',
            messageId: randomUUID(),
            role: 'user',
            parts: [{ kind: 'data', data: { count: 2 } }],
          },
        },
      },
      counterId,
    );
    const body = JSON.parse(sent.text);
    expect(body).toMatchObject({
      jsonrpc: '2.0',
      id: 'r1',
      result: {
        kind: 'task',
        status: { state: 'completed' },
        artifacts: [{ parts: [{ kind: 'data', data: { count: 13, steps: ['first', 'second'] } }] }],
      },
    });
    const got = JSON.parse(
      (await raw({ jsonrpc: '2.0', id: 2, method: 'tasks/get', params: { id: body.result.id } }, counterId)).text,
    );
    expect(got.result).toMatchObject({ kind: 'task', id: body.result.id, status: { state: 'completed' } });

    // Text to an agent whose input has no messages: the protocol's content-type error, with the request's id.
    const text = JSON.parse(
      (
        await raw(
          {
            jsonrpc: '2.0',
            id: 'r3',
            method: 'message/send',
            params: {
              message: { kind: 'message', messageId: 'm', role: 'user', parts: [{ kind: 'text', text: 'hi' }] },
            },
          },
          counterId,
        )
      ).text,
    );
    expect(text).toMatchObject({ id: 'r3', error: { code: -32005 } });

    const unknownTask = JSON.parse(
      (await raw({ jsonrpc: '2.0', id: 4, method: 'GetTask', params: { id: `${randomUUID()}:${randomUUID()}` } })).text,
    );
    expect(unknownTask).toMatchObject({ id: 4, error: { code: -32001 } });
    const badParams = JSON.parse((await raw({ jsonrpc: '2.0', id: 5, method: 'message/send', params: {} })).text);
    expect(badParams).toMatchObject({ id: 5, error: { code: -32602 } });
    expect(badParams.error.message).toContain('params.message');
    const push = JSON.parse(
      (await raw({ jsonrpc: '2.0', id: 6, method: 'tasks/pushNotificationConfig/set', params: {} })).text,
    );
    expect(push).toMatchObject({ id: 6, error: { code: -32602 } });
    expect(push.error.message).toContain('params.taskId');
    const unknownMethod = JSON.parse((await raw({ jsonrpc: '2.0', id: 7, method: 'nope' })).text);
    expect(unknownMethod).toMatchObject({ id: 7, error: { code: -32601 } });
    // An assistant that is not there (or hidden from the caller): the request's error, naming it.
    for (const parts of [[{ kind: 'data', data: {} }], [{ kind: 'text', text: 'hi' }]]) {
      const missing = await raw(
        { jsonrpc: '2.0', id: 8, method: 'message/send', params: { message: { messageId: 'm', role: 'user', parts } } },
        'no-such-assistant',
      );
      expect(JSON.parse(missing.text)).toMatchObject({ id: 8, error: { code: -32602 } });
      expect(JSON.parse(missing.text).error.message).toContain('no-such-assistant');
    }

    // Bad input is the caller's error (never a 500), worded with the field or the rule.
    const msg = (m: Record<string, unknown>) => ({ message: { messageId: 'm', role: 'user', ...m } });
    for (const [params, code, words] of [
      [msg({ parts: [{}] }), -32602, 'params.message.parts.0'],
      [msg({ role: 'bot', parts: [{ kind: 'text', text: 'x' }] }), -32602, 'params.message.role'],
      [msg({ contextId: 'c'.repeat(5000), parts: [{ kind: 'text', text: 'x' }] }), -32602, 'contextId'],
      [msg({ taskId: 'nope', parts: [{ kind: 'text', text: 'x' }] }), -32001, 'Task not found'],
      [msg({ role: 'agent', parts: [{ kind: 'text', text: 'x' }] }), -32602, 'user messages'],
      [msg({ parts: [{ kind: 'data', data: [1, 2] }] }), -32005, 'JSON object'],
      [msg({ parts: [{ kind: 'file', file: { uri: 'https://x.example/f.pdf' } }] }), -32005, 'File parts'],
    ] as const) {
      const res = await raw({ jsonrpc: '2.0', id: 'b', method: 'message/send', params });
      expect(res.status).toBeLessThan(500);
      expect(JSON.parse(res.text)).toMatchObject({ id: 'b', error: { code } });
      expect(JSON.parse(res.text).error.message).toContain(words);
    }

    // message/stream over raw 0.3: SSE of JSON-RPC responses, the last status-update final.
    const streamed = await raw({
      jsonrpc: '2.0',
      id: 's',
      method: 'message/stream',
      params: { message: { kind: 'message', messageId: 'x', role: 'user', parts: [{ kind: 'text', text: 'hey' }] } },
    });
    expect(streamed.type).toContain('text/event-stream');
    const frames = streamed.text
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map(
        (l) =>
          JSON.parse(l.slice(6)) as {
            id: string;
            result: { kind: string; final?: boolean; status?: { state: string } };
          },
      );
    expect(frames.every((f) => f.id === 's')).toBe(true);
    // The reply as the graph wrote it (one piece: the echo graph returns a whole message), then the result.
    expect(frames.map((f) => f.result.kind)).toEqual(['task', 'artifact-update', 'artifact-update', 'status-update']);
    expect(frames[1]!.result).toMatchObject({
      append: false,
      lastChunk: false,
      artifact: { parts: [{ kind: 'text', text: 'echo: hey' }] },
    });
    expect(frames[2]!.result).toMatchObject({ append: false, lastChunk: true });
    expect(frames.at(-1)!.result).toMatchObject({ final: true, status: { state: 'completed' } });
  });

  // The listing is the same code on both stores (it reads through the API); seeding a thousand threads into
  // Postgres would only make the suite slower.
  it.runIf(store === 'embedded')(
    'ListTasks pages past a thousand contexts: a cursor over the store, every task once, newest first',
    async () => {
      // 1005 finished A2A tasks of the counter agent, each on its own thread, written straight into the store: the
      // listing sees them as it sees tasks that ran (a thread whose metadata names the agent, a run with a context).
      const seeded: string[] = [];
      for (let i = 0; i < 1005; i++) {
        const [threadId, runId] = [randomUUID(), randomUUID()];
        await h.storage.queue.create(
          {
            run_id: runId,
            thread_id: threadId,
            assistant_id: counterId,
            metadata: { a2a_context_id: `seeded-${i}` },
            kwargs: { input: { count: i } },
            multitask_strategy: 'reject',
            if_not_exists: 'create',
            thread_metadata: { assistant_id: counterId, graph_id: 'counter' },
          },
          { workerId: 'seed', leaseMs: 600_000 },
        );
        await h.storage.queue.finish(runId, 'seed', { status: 'success', values: { count: i } });
        seeded.push(`${threadId}:${runId}`);
      }
      const listed: string[] = [];
      let token = '';
      let last: { totalSize: number; nextPageToken: string } | undefined;
      for (let page = 0; page < 20; page++) {
        const res = JSON.parse(
          (
            await raw(
              { jsonrpc: '2.0', id: page, method: 'ListTasks', params: { pageSize: 100, pageToken: token } },
              counterId,
            )
          ).text,
        ) as { result: { tasks: Array<{ id: string; contextId: string }>; nextPageToken: string; totalSize: number } };
        listed.push(...res.result.tasks.map((t) => t.id));
        last = res.result;
        token = res.result.nextPageToken;
        if (!token) break;
      }
      // Newest first, each once, down to the oldest (the counter task the raw 0.3 test made may come after them).
      expect(listed.slice(0, seeded.length)).toEqual([...seeded].reverse());
      expect(new Set(listed).size).toBe(listed.length);
      expect(last).toMatchObject({ nextPageToken: '', totalSize: listed.length });
    },
    120_000,
  );
});

it('names the configured public URL (--public-url) in the card, whatever host the request came to', async () => {
  const h = await startHarness({
    store: 'embedded',
    configPath: CONFIG,
    publicUrl: 'https://agents.example.com/team/',
  });
  try {
    const card = (await h.app
      .inject({
        url: '/a2a/echo/.well-known/agent-card.json',
        headers: { host: 'evil.example', 'x-forwarded-host': 'evil.example' },
      })
      .then((r) => r.json())) as { url: string; supportedInterfaces: Array<{ url: string }> };
    expect(card.url).toMatch(/^https:\/\/agents\.example\.com\/team\/a2a\/[0-9a-f-]{36}$/);
    expect(card.supportedInterfaces.map((i) => i.url)).toEqual([card.url, card.url]);
  } finally {
    await h.close();
  }
});
