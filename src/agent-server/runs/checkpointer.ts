// The checkpointer handed to graphs, wrapping the store's saver:
// - LangGraph 1.x stores only {source, step, parents} as checkpoint metadata; clients (and the seed's thread
//   state) expect the run's metadata too (run_id, graph_id, assistant_id, user_id, created_by, ...). The run
//   config carries it, so put() merges it in. run_id in checkpoint metadata also lets a retried run resume from
//   its last checkpoint and lets rollback find the checkpoints a run wrote.
// - A run cancelled with rollback must leave nothing behind, but an aborted graph may still have a checkpoint
//   write in flight: writes of such runs are dropped, and rollback waits for the ones already started.
import type { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';

const DROP = /^(ls_|langgraph_|checkpoint_|__)/;

type Cfg = { metadata?: Record<string, unknown>; configurable?: Record<string, unknown> };

function runMetadata(config: Cfg | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(config?.metadata ?? {})) if (!DROP.test(k)) out[k] = v;
  return out;
}

const runIdOf = (config: Cfg | undefined): string | undefined =>
  (config?.configurable?.run_id ?? config?.metadata?.run_id) as string | undefined;

export class RunCheckpointer {
  readonly saver: BaseCheckpointSaver;
  private readonly discarded = new Set<string>();
  private readonly inflight = new Map<string, Set<Promise<unknown>>>();

  constructor(inner: BaseCheckpointSaver) {
    const track = <T>(runId: string | undefined, p: Promise<T>): Promise<T> => {
      if (!runId) return p;
      let set = this.inflight.get(runId);
      if (!set) this.inflight.set(runId, (set = new Set()));
      set.add(p);
      void p.catch(() => undefined).finally(() => set.delete(p));
      return p;
    };
    this.saver = new Proxy(inner, {
      get: (target, prop) => {
        if (prop === 'put') {
          return (config: Cfg, checkpoint: { id: string }, metadata: Record<string, unknown>, versions: unknown) => {
            const runId = runIdOf(config);
            if (runId && this.discarded.has(runId)) {
              const c = config.configurable ?? {};
              return Promise.resolve({
                configurable: {
                  thread_id: c.thread_id,
                  checkpoint_ns: c.checkpoint_ns ?? '',
                  checkpoint_id: checkpoint.id,
                },
              });
            }
            return track(
              runId,
              target.put(
                config as never,
                checkpoint as never,
                { ...runMetadata(config), ...metadata } as never,
                versions as never,
              ),
            );
          };
        }
        if (prop === 'putWrites') {
          return (config: Cfg, writes: unknown, taskId: string) => {
            const runId = runIdOf(config);
            if (runId && this.discarded.has(runId)) return Promise.resolve();
            return track(runId, target.putWrites(config as never, writes as never, taskId));
          };
        }
        const v = Reflect.get(target, prop, target) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
  }

  /** From now on, drop this run's checkpoint writes. */
  discard(runId: string): void {
    this.discarded.add(runId);
  }

  /** Resolves once every write of the run that had already started has landed (or failed). */
  async settle(runId: string): Promise<void> {
    await Promise.allSettled([...(this.inflight.get(runId) ?? [])]);
  }

  forget(runId: string): void {
    this.discarded.delete(runId);
    this.inflight.delete(runId);
  }
}
