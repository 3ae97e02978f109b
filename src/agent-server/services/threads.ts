// Threads: reads that answer with the platform's 404 text, CRUD, search and prune, and the config a thread's graph
// is built with outside a run.
import { NotFoundError } from '../../lib/errors.ts';
import type {
  IfExists,
  Json,
  NewThread,
  PruneStrategy,
  Storage,
  Thread,
  ThreadHead,
  ThreadQuery,
} from '../storage/types.ts';
import { threadNotFound, UUID_RE } from './context.ts';

export type ThreadService = ReturnType<typeof createThreadService>;

export function createThreadService({ storage }: { storage: Storage }) {
  async function requireThread(threadId: string): Promise<Thread> {
    const t = await storage.threads.get(threadId);
    if (!t) throw new NotFoundError(threadNotFound(threadId));
    return t;
  }

  /** A store call on one thread whose only NotFoundError is that thread missing: answered with the platform text. */
  async function onThread<T>(threadId: string, op: () => Promise<T>): Promise<T> {
    try {
      return await op();
    } catch (err) {
      if (err instanceof NotFoundError) throw new NotFoundError(threadNotFound(threadId));
      throw err;
    }
  }

  /**
   * The config a thread's graph is built with when it is read or updated outside a run: that of the thread's
   * latest run (the assistant's config merged with the run's), else that of the assistant named in its metadata.
   * Factory graphs (`(config) => graph`) may have nodes that exist only under that config.
   */
  async function graphConfig(thread: ThreadHead): Promise<Json> {
    const [latest] = await storage.runs.list(thread.thread_id, { limit: 1, offset: 0 });
    const cfg = latest?.kwargs.config as Json | undefined;
    if (cfg) {
      const { checkpoint_id: _c, run_id: _r, ...configurable } = (cfg.configurable as Json | undefined) ?? {};
      return { ...cfg, configurable };
    }
    const assistantId = thread.metadata.assistant_id;
    const assistant =
      typeof assistantId === 'string' && UUID_RE.test(assistantId) ? await storage.assistants.get(assistantId) : null;
    return {
      ...(assistant?.config ?? {}),
      configurable: { ...((assistant?.config.configurable as Json | undefined) ?? {}) },
    };
  }

  return {
    require: requireThread,
    onThread,
    graphConfig,
    get: (id: string): Promise<Thread | null> => storage.threads.get(id),
    create: (t: NewThread, ifExists: IfExists): Promise<Thread> => storage.threads.create(t, ifExists),
    search: (q: ThreadQuery): Promise<Thread[]> => storage.threads.search(q),
    count: (q: ThreadQuery): Promise<number> => storage.threads.count(q),
    prune: (ids: string[], strategy: PruneStrategy): Promise<string[]> => storage.threads.prune(ids, strategy),
    /** The thread's metadata merged and its TTL set; the platform's 404 text when it is missing. */
    patch: (id: string, patch: { metadata?: Json; ttl_minutes?: number }): Promise<Thread> =>
      onThread(id, () => storage.threads.patch(id, patch)),
    /** The platform's 404 text when it is missing. */
    delete: (id: string): Promise<void> => onThread(id, () => storage.threads.delete(id)),
    /** A copy under `newId`; the platform's 404 text when the thread is missing. */
    copy: (id: string, newId: string): Promise<Thread> => onThread(id, () => storage.threads.copy(id, newId)),
  };
}
