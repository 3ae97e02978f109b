// Emptying the server between the files of an API test suite (POST /internal/truncate, only with --test-truncate).
// The reference servers' own HTTP suite resets its server this way before groups of tests that count threads or
// store items. It goes through the storage port, so both stores empty the same way and nothing is left half-deleted:
// threads go as POST /threads/prune deletes them (runs told to stop, runs and checkpoints with them).
import type { Storage } from '../storage/types.ts';

export interface TruncateParts {
  threads?: boolean;
  /** Runs and checkpoints belong to their thread here: either empties the threads. */
  runs?: boolean;
  checkpointer?: boolean;
  /** Assistants created through the API; the system assistant of each graph stays. */
  assistants?: boolean;
  store?: boolean;
}

const PAGE = 500;

export type TruncateService = ReturnType<typeof createTruncateService>;

export function createTruncateService({ storage }: { storage: Storage }) {
  async function truncateThreads(): Promise<number> {
    let deleted = 0;
    for (;;) {
      const page = await storage.threads.search({ limit: PAGE, offset: 0 });
      if (!page.length) return deleted;
      deleted += (
        await storage.threads.prune(
          page.map((t) => t.thread_id),
          'delete',
        )
      ).length;
    }
  }

  async function truncateAssistants(): Promise<number> {
    // Collected first: deleting while paging would shift the offsets.
    const doomed: string[] = [];
    for (let offset = 0; ; offset += PAGE) {
      const page = await storage.assistants.search({ limit: PAGE, offset });
      for (const a of page) if (a.metadata.created_by !== 'system') doomed.push(a.assistant_id);
      if (page.length < PAGE) break;
    }
    for (const id of doomed) await storage.assistants.delete(id);
    return doomed.length;
  }

  async function truncateStore(): Promise<number> {
    let deleted = 0;
    for (;;) {
      const page = await storage.items.search({ namespace_prefix: [], limit: PAGE, offset: 0, refresh_ttl: false });
      if (!page.length) return deleted;
      for (const item of page) await storage.items.delete(item.namespace, item.key);
      deleted += page.length;
    }
  }

  return {
    /** Empties what `parts` names; returns how many of each went. */
    async truncate(parts: TruncateParts): Promise<{ threads: number; assistants: number; store: number }> {
      const threads = parts.threads || parts.runs || parts.checkpointer ? await truncateThreads() : 0;
      const assistants = parts.assistants ? await truncateAssistants() : 0;
      const store = parts.store ? await truncateStore() : 0;
      return { threads, assistants, store };
    },
  };
}
