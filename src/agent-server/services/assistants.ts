// Assistants: resolution of an id or graph name, CRUD and search, versions, and deletion with their threads.
import { NotFoundError } from '../../lib/errors.ts';
import { equalityPart, matchesFilters, type AuthFilters } from '../auth/custom.ts';
import { isSystemAssistant, systemAssistantId } from '../graphs/index.ts';
import type {
  Assistant,
  AssistantPatch,
  AssistantQuery,
  AssistantVersion,
  IfExists,
  Json,
  NewAssistant,
  Storage,
} from '../storage/types.ts';
import { ignoreNotFound, UUID_RE, type AssistantReadFilter, type ServiceDeps } from './context.ts';

/**
 * Assistant versions: every create and PATCH records one; `setLatest` makes an earlier one current again. The stores
 * keep them (written in the same transaction as create/patch).
 */
interface AssistantVersions {
  /** Newest first; metadata filters by containment. NotFoundError when the assistant is unknown. */
  list(assistantId: string, q: { limit: number; offset: number; metadata?: Json }): Promise<AssistantVersion[]>;
  /** Copies the version's fields onto the assistant (its `version` becomes that number) and returns it. */
  setLatest(assistantId: string, version: number): Promise<Assistant>;
}

/** The versions the store keeps. */
function storedVersions(storage: Storage): AssistantVersions {
  // The platform's texts, which clients match on.
  const requireAssistant = async (id: string) => {
    if (!(await storage.assistants.get(id))) throw new NotFoundError(`Assistant not found: ${id}`);
  };
  return {
    async list(assistantId, q) {
      await requireAssistant(assistantId);
      return storage.assistants.listVersions(assistantId, q);
    },
    async setLatest(assistantId, version) {
      await requireAssistant(assistantId);
      try {
        return await storage.assistants.setLatest(assistantId, version);
      } catch (err) {
        if (err instanceof NotFoundError)
          throw new NotFoundError(`Assistant version not found: ${assistantId} version ${version}`);
        throw err;
      }
    },
  };
}

export type AssistantService = ReturnType<typeof createAssistantService>;

export function createAssistantService({ storage, graphs }: Pick<ServiceDeps, 'storage' | 'graphs'>) {
  const graphIds = new Set(graphs.specs.map((s) => s.graphId));

  function requireGraph(graphId: string): void {
    if (!graphIds.has(graphId)) throw new NotFoundError(`Graph "${graphId}" not found`);
  }

  /**
   * A graph name maps to its system assistant; anything else must be an assistant UUID. The 404 texts are the
   * platform's ("Assistant not found", "No assistant found for graph ..."): clients match on them. With
   * `readFilter` (custom auth), the caller's assistants:read handler runs before the read, and an assistant its
   * filter hides is the same 404 as a missing one; a graph's system assistant is never hidden (isSystemAssistant).
   */
  async function resolve(idOrGraph: string, readFilter?: AssistantReadFilter): Promise<Assistant> {
    const id = assistantIdOf(idOrGraph);
    const filters = readFilter ? await readFilter(id) : undefined;
    const found = await storage.assistants.get(id);
    if (!found || !(isSystemAssistant(found) || matchesFilters(found.metadata, filters))) throw notFound(idOrGraph);
    return found;
  }

  /** The assistant id a request names (a graph name: its system assistant's); 404 for anything else. */
  function assistantIdOf(idOrGraph: string): string {
    const id = graphIds.has(idOrGraph) ? systemAssistantId(idOrGraph) : idOrGraph;
    if (!UUID_RE.test(id)) throw new NotFoundError(`No assistant found for graph ${idOrGraph} (assistant not found)`);
    return id;
  }

  const notFound = (idOrGraph: string) => new NotFoundError(`Assistant not found: ${idOrGraph}`);

  /**
   * Assistants as run creates read them, by id, with the store's token (AssistantStore.getVersioned): a create
   * that names the token is stored only while the assistant is unchanged, so the copy here saves a read per run
   * and is never used stale (a create that finds it changed reads it again: resolveForRun with `fresh`).
   */
  const forRuns = new Map<string, { assistant: Assistant; token: string }>();
  const FOR_RUNS_MAX = 1_000;

  /**
   * resolve() for a run create: the assistant and the token the create must check (NewRun.assistant_token). Under a
   * custom-auth read filter it is resolve().
   */
  async function resolveForRun(
    idOrGraph: string,
    readFilter: AssistantReadFilter | undefined,
    fresh: boolean,
  ): Promise<{ assistant: Assistant; token?: string }> {
    if (readFilter) return { assistant: await resolve(idOrGraph, readFilter) };
    const id = assistantIdOf(idOrGraph);
    const known = fresh ? undefined : forRuns.get(id);
    if (known) return known;
    const found = await storage.assistants.getVersioned(id);
    if (!found) {
      forRuns.delete(id);
      throw notFound(idOrGraph);
    }
    if (forRuns.size >= FOR_RUNS_MAX) forRuns.delete(forRuns.keys().next().value!);
    forRuns.set(id, found);
    return found;
  }

  /**
   * DELETE /assistants/{id}; with deleteThreads also the threads whose metadata.assistant_id names it. Under custom
   * auth `threadFilter` gives the caller's threads:delete filter (a denial throws before anything is deleted): only
   * the threads it lets the caller delete go, never another user's that ran the same assistant.
   */
  async function remove(
    idOrGraph: string,
    deleteThreads: boolean,
    threadFilter?: () => Promise<AuthFilters | undefined>,
  ): Promise<void> {
    const assistant = await resolve(idOrGraph);
    if (deleteThreads) {
      const filters = threadFilter ? await threadFilter() : undefined;
      const metadata = { ...equalityPart(filters), assistant_id: assistant.assistant_id };
      const page = 500;
      let skipped = 0;
      for (;;) {
        const threads = await storage.threads.search({ metadata, limit: page, offset: skipped });
        for (const t of threads) {
          if (matchesFilters(t.metadata, filters)) await storage.threads.delete(t.thread_id).catch(ignoreNotFound);
          else skipped += 1;
        }
        if (threads.length < page) break;
      }
    }
    await storage.assistants.delete(assistant.assistant_id);
  }

  return {
    graphIds,
    requireGraph,
    resolve,
    resolveForRun,
    delete: remove,
    versions: storedVersions(storage),
    get: (id: string): Promise<Assistant | null> => storage.assistants.get(id),
    create: (a: NewAssistant, ifExists: IfExists): Promise<Assistant> => storage.assistants.create(a, ifExists),
    patch: (id: string, patch: AssistantPatch): Promise<Assistant> => storage.assistants.patch(id, patch),
    search: (q: AssistantQuery): Promise<Assistant[]> => storage.assistants.search(q),
    count: (q: AssistantQuery): Promise<number> => storage.assistants.count(q),
  };
}
