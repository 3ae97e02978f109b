// The checkpointer handed to graphs. LangGraph 1.x stores only {source, step, parents} as checkpoint metadata;
// clients (and the seed's thread state) expect the run's metadata too (run_id, graph_id, assistant_id, user_id,
// created_by, ...). The run config carries it, so put() merges it in. Having run_id in checkpoint metadata also
// lets a retried run resume from its last checkpoint and lets rollback find the checkpoints a run wrote.
import type { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';

const DROP = /^(ls_|langgraph_|checkpoint_|__)/;

function runMetadata(config: { metadata?: Record<string, unknown> } | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(config?.metadata ?? {})) if (!DROP.test(k)) out[k] = v;
  return out;
}

export function withRunMetadata(inner: BaseCheckpointSaver): BaseCheckpointSaver {
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === 'put') {
        return (config: Parameters<BaseCheckpointSaver['put']>[0], ...rest: unknown[]) => {
          const [checkpoint, metadata, versions] = rest as [never, Record<string, unknown>, never];
          return target.put(config, checkpoint, { ...runMetadata(config), ...metadata } as never, versions);
        };
      }
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}
