// Watch of the embedded state's resources: a replay (the whole list for resourceVersion "" or "0", otherwise the
// change log after the given version, 410-like ResourceExpiredError when it was compacted away), then every change
// as it is published. Events are delivered asynchronously and in order, so handlers may write to the store.
import { ResourceExpiredError } from '../errors.ts';
import type { Kind, KindMap, WatchEventType } from '../resources.ts';
import type { Change, EmbeddedContext } from './context.ts';
import type { ResourceRows } from './resource-writes.ts';

export async function embeddedWatch<K extends Kind>(
  ctx: EmbeddedContext,
  listSync: ResourceRows['listSync'],
  kind: K,
  namespace: string | undefined,
  resourceVersion: string,
  onEvent: (type: WatchEventType, obj: KindMap[K]) => void,
  onError: (err: unknown) => void,
): Promise<() => void> {
  let stopped = false;
  let seen = 0;
  const queue: Change[] = [];
  let draining = false;
  // Delivered asynchronously and in order, so handlers may write to the store without re-entering a write.
  const drain = () => {
    draining = false;
    while (!stopped && queue.length) {
      const c = queue.shift()!;
      onEvent(c.type, structuredClone(c.obj) as KindMap[K]);
    }
  };
  const schedule = () => {
    if (!draining) {
      draining = true;
      queueMicrotask(drain);
    }
  };
  const push = (c: Change) => {
    // `seen` drops what the replay already delivered when the change feed catches up with it.
    if (stopped || c.rv <= seen || c.kind !== kind || (namespace !== undefined && c.namespace !== namespace)) return;
    seen = c.rv;
    queue.push(c);
    schedule();
  };
  const listener = (c: Change | ResourceExpiredError) => {
    if (stopped) return;
    if (c instanceof ResourceExpiredError) {
      stopped = true;
      ctx.events.off('change', listener);
      queueMicrotask(() => onError(c));
      return;
    }
    push(c);
  };
  // better-sqlite3 is synchronous: replay and subscription happen in one tick, so no change falls between them.
  if (resourceVersion === '' || resourceVersion === '0') {
    const { items, resourceVersion: rv } = listSync(kind, namespace);
    for (const obj of items) {
      queue.push({ rv: Number(rv), kind, namespace: obj.metadata.namespace!, type: 'ADDED', obj });
    }
    seen = Number(rv);
    schedule();
  } else {
    const from = Number(resourceVersion);
    const compacted = ctx.counter('compacted');
    if (!Number.isInteger(from) || from < compacted) {
      queueMicrotask(() =>
        onError(new ResourceExpiredError(`too old resource version: ${resourceVersion} (${compacted})`)),
      );
      return () => {};
    }
    seen = from;
    for (const c of ctx.changesSince(from)) push(c);
  }
  ctx.events.on('change', listener);
  ctx.startPolling();
  return () => {
    stopped = true;
    ctx.events.off('change', listener);
  };
}
