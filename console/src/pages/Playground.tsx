// Talks to a deployed agent with the official SDK, from the browser, at the deployment's URL (the same URL an app
// of the workspace uses), with a short-lived access token for that deployment, never the signed-in key. Chat view
// for graphs whose state has `messages`; a JSON input and the streamed values for the others.
import { Client } from '@langchain/langgraph-sdk';
import { useCallback, useEffect, useMemo, useRef, useState, type FormEvent } from 'react';
import { agentCredential, type Api, type Deployment } from '../api.ts';
import { href } from '../router.ts';
import { ErrorBanner, JsonTree, time } from '../ui.tsx';
import { hasMessages, kindOf, textOf, upsert, type Msg } from './playground-messages.ts';

type Assistant = { assistant_id: string; graph_id: string; name?: string };
type ThreadRow = { thread_id: string; status: string; updated_at: string; values?: unknown };
type StateSnapshot = {
  values: unknown;
  next: string[];
  checkpoint?: { checkpoint_id?: string };
  metadata?: Record<string, unknown> | null;
  created_at?: string | null;
  tasks?: { id: string; name: string; interrupts?: { value?: unknown }[] }[];
};

export function Playground({ api, id }: { api: Api; id: string }) {
  const [dep, setDep] = useState<Deployment | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    api.getDeployment(id).then(setDep, (err: Error) => setError(err.message));
  }, [api, id]);
  if (!dep) return error ? <ErrorBanner error={error} /> : <p className="muted">Loading…</p>;
  if (!dep.url) {
    return (
      <section>
        <h1>{dep.name}: playground</h1>
        <p className="muted">This deployment has no URL yet.</p>
      </section>
    );
  }
  return <Chat dep={dep} url={dep.url} api={api} />;
}

function Chat({ dep, url, api }: { dep: Deployment; url: string; api: Api }) {
  const client = useMemo(() => {
    const credential = agentCredential(api, dep.id);
    return new Client({
      apiUrl: url,
      apiKey: null,
      onRequest: async (_url, init) => {
        const headers = new Headers(init.headers);
        headers.set('x-api-key', await credential());
        return { ...init, headers };
      },
    });
  }, [api, dep.id, url]);
  const [assistants, setAssistants] = useState<Assistant[]>([]);
  const [assistantId, setAssistantId] = useState('');
  const [chatMode, setChatMode] = useState(true);
  const [threads, setThreads] = useState<ThreadRow[]>([]);
  const [threadId, setThreadId] = useState<string | null>(null);
  const [messages, setMessages] = useState<Msg[]>([]);
  const [values, setValues] = useState<unknown>(null);
  const [streamed, setStreamed] = useState<unknown[]>([]);
  const [state, setState] = useState<StateSnapshot | null>(null);
  const [history, setHistory] = useState<StateSnapshot[]>([]);
  const [input, setInput] = useState('');
  const [jsonInput, setJsonInput] = useState('{}');
  const [resumeValue, setResumeValue] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const bottom = useRef<HTMLDivElement>(null);

  const loadThreads = useCallback(async () => {
    const rows = (await client.threads.search({
      limit: 30,
      sortBy: 'updated_at',
      sortOrder: 'desc',
    })) as unknown as ThreadRow[];
    setThreads(rows);
  }, [client]);

  useEffect(() => {
    (async () => {
      try {
        const list = ((await client.assistants.search({ limit: 100 })) as unknown as Assistant[]).sort(
          (a, b) => a.graph_id.localeCompare(b.graph_id) || (a.name ?? '').localeCompare(b.name ?? ''),
        );
        setAssistants(list);
        setAssistantId((cur) => cur || list[0]?.assistant_id || '');
        await loadThreads();
      } catch (err) {
        setError(`The agent did not answer: ${(err as Error).message}`);
      }
    })();
  }, [client, loadThreads]);

  // Chat view when the graph's state schema has `messages`; JSON in and out otherwise.
  useEffect(() => {
    if (!assistantId) return;
    client.assistants.getSchemas(assistantId).then(
      (s) => {
        const props = (s.state_schema as { properties?: Record<string, unknown> } | undefined)?.properties;
        setChatMode(props ? 'messages' in props : true);
      },
      () => setChatMode(true),
    );
  }, [client, assistantId]);

  const loadThread = useCallback(
    async (tid: string) => {
      const [st, hist] = await Promise.all([
        client.threads.getState(tid),
        client.threads.getHistory(tid, { limit: 20 }),
      ]);
      setState(st as unknown as StateSnapshot);
      setHistory(hist as unknown as StateSnapshot[]);
      setValues(st.values);
      if (hasMessages(st.values)) setMessages(st.values.messages);
    },
    [client],
  );

  useEffect(() => {
    bottom.current?.scrollIntoView({ block: 'end' });
  }, [messages]);

  function newThread() {
    setThreadId(null);
    setMessages([]);
    setValues(null);
    setStreamed([]);
    setState(null);
    setHistory([]);
    setError(null);
  }

  async function openThread(tid: string) {
    newThread();
    setThreadId(tid);
    try {
      await loadThread(tid);
    } catch (err) {
      setError((err as Error).message);
    }
  }

  async function run(payload: { input?: unknown; command?: { resume: unknown } }) {
    if (!assistantId) return setError('Pick an assistant first.');
    setBusy(true);
    setError(null);
    try {
      let tid = threadId;
      if (!tid) {
        tid = (await client.threads.create()).thread_id;
        setThreadId(tid);
      }
      const stream = client.runs.stream(tid, assistantId, {
        ...payload,
        streamMode: ['messages-tuple', 'values'],
      } as never);
      for await (const part of stream as AsyncIterable<{ event: string; data: unknown }>) {
        if (part.event === 'messages') {
          const [chunk] = part.data as [Msg, unknown];
          if (chunk) setMessages((list) => upsert(list, chunk));
        } else if (part.event === 'values') {
          setValues(part.data);
          setStreamed((s) => [...s, part.data]);
          if (hasMessages(part.data)) {
            // The state's list is the truth (it also replaces the optimistic human message).
            setMessages(part.data.messages);
          }
        } else if (part.event === 'error') {
          const d = part.data as { message?: string; error?: string };
          setError(`Run failed: ${d?.message ?? d?.error ?? JSON.stringify(d)}`);
        }
      }
      await loadThread(tid);
      await loadThreads();
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  }

  function send(e: FormEvent) {
    e.preventDefault();
    if (chatMode) {
      const text = input.trim();
      if (!text) return;
      setInput('');
      setMessages((list) => [...list, { type: 'human', content: text, id: `local-${Date.now()}` }]);
      void run({ input: { messages: [{ role: 'human', content: text }] } });
    } else {
      try {
        void run({ input: JSON.parse(jsonInput) });
      } catch (err) {
        setError(`Input is not JSON: ${(err as Error).message}`);
      }
    }
  }

  function resume(e: FormEvent) {
    e.preventDefault();
    let value: unknown = resumeValue;
    try {
      value = JSON.parse(resumeValue);
    } catch {
      // plain text resumes as a string
    }
    setResumeValue('');
    void run({ command: { resume: value } });
  }

  const interrupts = (state?.tasks ?? []).flatMap((t) =>
    (t.interrupts ?? []).map((i) => ({ task: t.name, value: i.value })),
  );
  const toolNames = new Map<string, string>();
  for (const m of messages) for (const c of m.tool_calls ?? []) if (c.id) toolNames.set(c.id, c.name);

  return (
    <section className="playground">
      <div className="heading">
        <h1>
          <span>
            <a href={href({ page: 'deployment', id: dep.id })}>{dep.name}</a>: playground
          </span>
        </h1>
        <p className="muted" data-testid="agent-origin">
          Agent at <code>{url}</code>, called with a short-lived token for this deployment only.
        </p>
        <label className="inline">
          Assistant
          <select
            value={assistantId}
            onChange={(e) => {
              setAssistantId(e.target.value);
              newThread();
            }}
            aria-label="Assistant"
          >
            {assistants.map((a) => (
              <option key={a.assistant_id} value={a.assistant_id}>
                {a.graph_id}
                {a.name && a.name !== a.graph_id ? ` (${a.name})` : ''}
              </option>
            ))}
          </select>
        </label>
      </div>
      <ErrorBanner error={error} />
      <div className="pg-grid">
        <aside className="card threads">
          <button type="button" onClick={newThread}>
            New thread
          </button>
          <h2>Threads</h2>
          <ul>
            {threads.map((t) => (
              <li key={t.thread_id}>
                <button
                  type="button"
                  className={`link ${t.thread_id === threadId ? 'current' : ''}`}
                  onClick={() => void openThread(t.thread_id)}
                >
                  {t.thread_id.slice(0, 8)} <span className="muted">{t.status}</span>
                  <br />
                  <small className="muted">{time(t.updated_at)}</small>
                </button>
              </li>
            ))}
            {threads.length === 0 && <li className="muted">none yet</li>}
          </ul>
        </aside>

        <div className="card chat">
          {chatMode ? (
            <div className="messages" aria-live="polite">
              {messages.length === 0 && <p className="muted">Say something to start a thread.</p>}
              {messages.map((m, i) => {
                const kind = kindOf(m);
                const text = textOf(m.content);
                return (
                  <div key={m.id ?? i} className={`msg ${kind}`} data-role={kind}>
                    {kind === 'tool' ? (
                      <div className="tool-result">
                        <span className="tag">tool result</span>{' '}
                        <strong>{m.name ?? toolNames.get(m.tool_call_id ?? '') ?? 'tool'}</strong>
                        {m.status && m.status !== 'success' ? <span className="badge bad">{m.status}</span> : null}
                        <pre>{text}</pre>
                      </div>
                    ) : (
                      <>
                        {text && <div className="text">{text}</div>}
                        {(m.tool_calls ?? []).map((c, j) => (
                          <div key={c.id ?? j} className="tool-call">
                            <span className="tag">tool call</span> <strong>{c.name}</strong>
                            <pre>{JSON.stringify(c.args, null, 2)}</pre>
                          </div>
                        ))}
                      </>
                    )}
                  </div>
                );
              })}
              {busy && <p className="muted typing">streaming…</p>}
              <div ref={bottom} />
            </div>
          ) : (
            <div className="values">
              <h2>Streamed values</h2>
              {streamed.length === 0 && <p className="muted">Send an input to see the graph's values.</p>}
              {streamed.map((v, i) => (
                <details key={i} open={i === streamed.length - 1}>
                  <summary>values #{i + 1}</summary>
                  <JsonTree value={v} />
                </details>
              ))}
            </div>
          )}

          {interrupts.length > 0 && !busy && (
            <form className="interrupt" onSubmit={resume}>
              <h2>Waiting for you</h2>
              {interrupts.map((it, i) => (
                <div key={i}>
                  <span className="muted">{it.task} asks:</span>
                  <JsonTree value={it.value} />
                </div>
              ))}
              <label>
                Resume with (JSON, or plain text)
                <input name="resume" value={resumeValue} onChange={(e) => setResumeValue(e.target.value)} />
              </label>
              <button type="submit">Resume</button>
            </form>
          )}

          <form className="composer" onSubmit={send}>
            {chatMode ? (
              <textarea
                name="message"
                aria-label="Message"
                rows={2}
                value={input}
                placeholder="Message (Enter sends, Shift+Enter for a new line)"
                onChange={(e) => setInput(e.target.value)}
                onKeyDown={(e) => {
                  if (e.key === 'Enter' && !e.shiftKey) {
                    e.preventDefault();
                    e.currentTarget.form?.requestSubmit();
                  }
                }}
              />
            ) : (
              <textarea
                name="json"
                aria-label="JSON input"
                rows={4}
                value={jsonInput}
                onChange={(e) => setJsonInput(e.target.value)}
              />
            )}
            <button type="submit" disabled={busy}>
              Send
            </button>
          </form>
        </div>

        <aside className="card state">
          <h2>State</h2>
          {state ? (
            <>
              <p className="muted">next: {state.next.length ? state.next.join(', ') : '(done)'}</p>
              <JsonTree value={values} />
            </>
          ) : (
            <p className="muted">No thread selected.</p>
          )}
          <h2>Checkpoints</h2>
          <ol className="history">
            {history.map((h, i) => (
              <li key={h.checkpoint?.checkpoint_id ?? i}>
                <details>
                  <summary>
                    step {String(h.metadata?.step ?? '?')} · {String(h.metadata?.source ?? '')}
                    {h.next.length ? ` → ${h.next.join(', ')}` : ''}{' '}
                    <small className="muted">{time(h.created_at)}</small>
                  </summary>
                  <JsonTree value={h.values} />
                </details>
              </li>
            ))}
          </ol>
        </aside>
      </div>
    </section>
  );
}
