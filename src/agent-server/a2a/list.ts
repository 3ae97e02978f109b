// A2A ListTasks (tasks/list): the caller's tasks of one agent, found through the API's threads search and each
// thread's runs as the caller, so a listing shows no more than the caller could read there; paged by a cursor over
// that search, so it goes on past any number of threads.
import { INVALID_PARAMS, RpcError } from '../http/jsonrpc.ts';
import type { Task, TaskState } from './dialects.ts';
import { refused, threadOfContext, viewTask, type AgentContext } from './tasks.ts';
import type { RunRow } from './view.ts';

export interface ListQuery {
  contextId?: string;
  state?: TaskState;
  pageSize: number;
  pageToken?: string;
  /** ISO time: only tasks whose status changed at or after it. */
  statusTimestampAfter?: string;
  includeArtifacts: boolean;
  historyLength?: number;
}

/** Threads read per search while a listing fills its page, and runs per read of a thread's runs. */
const THREADS_PER_READ = 100;
const RUNS_PER_READ = 1000;

/**
 * Where a listing goes on: the position of a thread in the threads search's order (newest first), the tasks of
 * that thread already given, and how many tasks the pages before this one gave (for totalSize).
 */
interface ListCursor {
  thread: number;
  skip: number;
  before: number;
}

const pageTokenOf = (c: ListCursor) => Buffer.from(`c${c.thread}.${c.skip}.${c.before}`, 'utf8').toString('base64url');
function cursorOf(token: string | undefined): ListCursor {
  if (!token) return { thread: 0, skip: 0, before: 0 };
  const m = /^c(\d{1,9})\.(\d{1,9})\.(\d{1,9})$/.exec(Buffer.from(token, 'base64url').toString('utf8'));
  if (!m) throw new RpcError(INVALID_PARAMS, 'ListTasks: params.pageToken: not a page token this server gave out');
  return { thread: Number(m[1]), skip: Number(m[2]), before: Number(m[3]) };
}

/**
 * The tasks of one thread that a listing shows, newest first, each read as GetTask reads it: the thread's A2A runs
 * of this assistant that started a task (not those that resumed one), each with its latest run. A thread the caller
 * may not see (or that went) has none.
 */
async function* threadTasks(
  ctx: AgentContext,
  threadId: string,
  assistantId: string,
  q: ListQuery,
  after: number | undefined,
): AsyncGenerator<Task> {
  // The runs that resumed a task are newer than the run that started it: seen first, newest first.
  const latest = new Map<string, RunRow>();
  for (let offset = 0; ; offset += RUNS_PER_READ) {
    const res = await ctx.api.call('GET', `/threads/${threadId}/runs?limit=${RUNS_PER_READ}&offset=${offset}`);
    if (res.status === 404) return;
    if (res.status !== 200) refused(res, 'ListTasks');
    const runs = res.body as Array<RunRow & { assistant_id?: string }>;
    for (const run of runs) {
      const resumed = run.metadata?.a2a_task_id;
      if (typeof resumed === 'string') {
        if (!latest.has(resumed)) latest.set(resumed, run);
        continue;
      }
      if (run.assistant_id !== assistantId || typeof run.metadata?.a2a_context_id !== 'string') continue;
      const taskId = `${run.thread_id}:${run.run_id}`;
      const task = await viewTask(ctx, taskId, latest.get(taskId) ?? run);
      if (q.state && task.state !== q.state) continue;
      if (after !== undefined && !(Date.parse(task.timestamp) >= after)) continue;
      yield task;
    }
    if (runs.length < RUNS_PER_READ) return;
  }
}

/**
 * The caller's tasks of this agent, newest first, as the API lets them see them: the threads its threads search
 * finds (the agent's own: their metadata names the assistant), or the one of `contextId`, then each thread's tasks
 * (threadTasks). The page token is a cursor over that search, so a listing goes on past any number of threads;
 * only what the page needs is read (and, when the page is full, up to the next task, to know there is one).
 * totalSize is exact on the last page; on the others it counts the tasks seen so far, the next one included.
 */
export async function listTasks(
  ctx: AgentContext,
  q: ListQuery,
): Promise<{ tasks: Task[]; nextPageToken: string; pageSize: number; totalSize: number }> {
  const cursor = cursorOf(q.pageToken);
  const found = await ctx.api.call('GET', `/assistants/${encodeURIComponent(ctx.assistantId)}`);
  if (found.status === 404 || found.status === 422)
    throw new RpcError(INVALID_PARAMS, `Assistant not found: ${ctx.assistantId}`);
  if (found.status !== 200) refused(found, 'ListTasks');
  const assistantId = (found.body as { assistant_id: string }).assistant_id;
  const after = q.statusTimestampAfter === undefined ? undefined : Date.parse(q.statusTimestampAfter);
  const readThreads = async (offset: number): Promise<string[]> => {
    if (q.contextId) return offset === 0 ? [threadOfContext(q.contextId)] : [];
    const res = await ctx.api.call('POST', '/threads/search', {
      metadata: { assistant_id: assistantId },
      limit: THREADS_PER_READ,
      offset,
      sort_by: 'created_at',
      sort_order: 'desc',
      select: ['thread_id'],
    });
    if (res.status !== 200) refused(res, 'ListTasks');
    return (res.body as Array<{ thread_id: string }>).map((t) => t.thread_id);
  };
  const tasks: Task[] = [];
  let next: ListCursor | undefined;
  let index = cursor.thread;
  let skip = cursor.skip;
  scan: for (;;) {
    const threadIds = await readThreads(index);
    for (const threadId of threadIds) {
      let given = 0;
      for await (const task of threadTasks(ctx, threadId, assistantId, q, after)) {
        if (given++ < skip) continue;
        if (tasks.length === q.pageSize) {
          next = { thread: index, skip: given - 1, before: cursor.before + tasks.length };
          break scan;
        }
        tasks.push(task);
      }
      index++;
      skip = 0;
    }
    if (q.contextId || threadIds.length < THREADS_PER_READ) break;
  }
  const keep = q.historyLength;
  const page = tasks.map((t) => ({
    ...t,
    artifacts: q.includeArtifacts ? t.artifacts : [],
    history: keep === undefined ? t.history : keep === 0 ? [] : t.history.slice(-keep),
  }));
  return {
    tasks: page,
    nextPageToken: next ? pageTokenOf(next) : '',
    pageSize: q.pageSize,
    totalSize: cursor.before + tasks.length + (next ? 1 : 0),
  };
}
