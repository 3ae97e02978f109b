// The task a run is, as A2A shows it: its state from the run's status (and, for a run that stopped, the interrupt
// its thread waits on), the agent's reply from the run's final values, and its history (the user's turn as the run
// received it, then the reply). Pure apart from the reads it is handed, so the caller's reads (a2a/tasks.ts) and
// push notifications sent from inside the server (a2a/push.ts) build the same task.
import { randomUUID } from 'node:crypto';
import type { Artifact, Message, Part, Task, TaskState } from './dialects.ts';

export interface RunRow {
  run_id: string;
  thread_id: string;
  status: string;
  created_at: string;
  updated_at: string;
  metadata?: Record<string, unknown>;
  kwargs?: { input?: unknown; command?: { resume?: unknown } | null };
}

export interface ThreadRow {
  values?: Record<string, unknown> | null;
  interrupts?: Record<string, Array<{ id?: string; value?: unknown }>>;
}

const pending = (t: ThreadRow | undefined) => Object.values(t?.interrupts ?? {}).flat();

/** The text of a message in the API's JSON (content a string, or blocks with text). */
export function textOfMessage(m: unknown): string | null {
  const content = (m as { content?: unknown } | null)?.content;
  if (typeof content === 'string') return content;
  if (Array.isArray(content))
    return content
      .map((b) => (typeof b === 'string' ? b : ((b as { text?: unknown })?.text ?? '')))
      .filter((s) => typeof s === 'string')
      .join('');
  return null;
}

export const isAiMessage = (m: unknown) => {
  const t = (m as { type?: unknown; role?: unknown } | null) ?? {};
  return t.type === 'ai' || t.type === 'AIMessageChunk' || t.role === 'assistant' || t.role === 'ai';
};

/** What the run left: the last AI message as text when the state has messages, else the values as data. */
function resultParts(values: Record<string, unknown> | null | undefined): Part[] {
  const messages = values?.messages;
  if (Array.isArray(messages)) {
    const last = messages[messages.length - 1];
    const text = isAiMessage(last) ? textOfMessage(last) : null;
    if (text !== null) return [{ text }];
  }
  return [{ data: values ?? {} }];
}

function agentMessage(task: { id: string; contextId: string }, parts: Part[]): Message {
  return { messageId: randomUUID(), role: 'agent', parts, contextId: task.contextId, taskId: task.id };
}

/**
 * The user's side of a run's turn, read back from what the run was given: its newest human message, or the data it
 * was started with, or what resumed it. Null when none of these is there to show.
 */
function userTurn(task: { id: string; contextId: string }, run: RunRow): Message | null {
  const kw = run.kwargs;
  const of = (parts: Part[], messageId?: unknown): Message => ({
    messageId: typeof messageId === 'string' && messageId ? messageId : `${run.run_id}:user`,
    role: 'user',
    parts,
    contextId: task.contextId,
    taskId: task.id,
  });
  if (kw?.command && 'resume' in kw.command) {
    const r = kw.command.resume;
    return of([typeof r === 'string' ? { text: r } : { data: r ?? null }]);
  }
  const input = kw?.input as Record<string, unknown> | null | undefined;
  if (!input || typeof input !== 'object') return null;
  const messages = Array.isArray(input.messages) ? (input.messages as unknown[]) : [];
  const { messages: _m, ...data } = input;
  const parts: Part[] = [];
  const last = messages[messages.length - 1] as { id?: unknown } | undefined;
  const text = last ? textOfMessage(last) : null;
  if (text !== null) parts.push({ text });
  if (Object.keys(data).length) parts.push({ data });
  return parts.length ? of(parts, last?.id) : null;
}

/**
 * The task a run is, from its record, its final values when at hand (else `readOwnValues`: those the run left),
 * and its thread (read only when needed): what the API's reads give a caller, and what push notifications send
 * from inside the server.
 */
export async function taskOfRun(
  taskId: string,
  run: RunRow,
  values: unknown,
  readThread: () => Promise<ThreadRow | undefined>,
  readOwnValues?: () => Promise<unknown>,
): Promise<Task> {
  // A finished run's result is its own last values: read only when they are not at hand (a task read later).
  const own = values === undefined && run.status === 'success' && readOwnValues ? await readOwnValues() : values;
  const task = await viewState(readThread, taskId, run, own);
  const user = userTurn(task, run);
  const reply = task.state === 'submitted' || task.state === 'working' ? undefined : task.message;
  return { ...task, history: [...(user ? [user] : []), ...(reply ? [reply] : [])] };
}

async function viewState(
  readThread: () => Promise<ThreadRow | undefined>,
  taskId: string,
  run: RunRow,
  values?: unknown,
): Promise<Task> {
  const contextId = typeof run.metadata?.a2a_context_id === 'string' ? run.metadata.a2a_context_id : run.thread_id;
  const base = {
    id: taskId,
    contextId,
    timestamp: run.updated_at || new Date().toISOString(),
    artifacts: [],
    history: [],
  };
  const state = (s: TaskState, more: Partial<Task> = {}): Task => ({ ...base, state: s, ...more });
  if (run.status === 'pending') return state('submitted');
  if (run.status === 'running') return state('working');
  const error = (values as { __error__?: { error?: string; message?: string } } | null)?.__error__;
  if (run.status === 'error' || run.status === 'timeout' || error) {
    const text = error
      ? `${error.error ?? 'Error'}: ${error.message ?? ''}`
      : `the run ended with status ${run.status}`;
    return state('failed', { message: agentMessage(base, [{ text }]) });
  }
  // A run that paused on an interrupt ends "interrupted" (as a cancelled one does): only then, or when the values
  // are not at hand, is the thread read.
  const row = run.status === 'success' && values !== undefined ? undefined : await readThread();
  const waiting = pending(row);
  if (run.status === 'interrupted') {
    if (!waiting.length) return state('canceled');
    const parts: Part[] = waiting.map((i) =>
      typeof i.value === 'string' ? { text: i.value } : { data: { interrupt_id: i.id ?? null, value: i.value } },
    );
    return state('input-required', { message: agentMessage(base, parts) });
  }
  const finalValues = (values ?? row?.values) as Record<string, unknown> | null | undefined;
  const parts = resultParts(finalValues);
  const artifact: Artifact = { artifactId: run.run_id, name: 'result', parts };
  return state('completed', { message: agentMessage(base, parts), artifacts: [artifact] });
}
