// AgentDeployments and AgentRevisions of the embedded state: a JSON row each in `objects`. resourceVersion is a
// single global counter; each change is also appended to a bounded change log, which lets a watch resume from any
// recent resourceVersion (older ones answer 410, like the API server). Removing an object garbage-collects what it
// owns (dependent objects, secret sets, claims, revision logs), as Kubernetes does.
import { randomUUID } from 'node:crypto';
import { NotFoundError, ValidationError } from '../../lib/errors.ts';
import { AlreadyExistsError, ResourceExpiredError, StaleResourceVersionError } from '../errors.ts';
import {
  labelSelectorMatcher,
  type AnyResource,
  type Kind,
  type KindMap,
  type ListOptions,
  type ResourceStore,
  type WatchEventType,
} from '../resources.ts';
import { canonicalJson, validateResource } from '../validate.ts';
import type { Change, EmbeddedContext } from './context.ts';

export function embeddedResources(ctx: EmbeddedContext, historyLimit: number): ResourceStore {
  const { db } = ctx;

  const listSync = <K extends Kind>(kind: K, namespace?: string, opts: ListOptions = {}) => {
    const match = labelSelectorMatcher(opts.labelSelector);
    const read = db.transaction(() => {
      const rows = (
        namespace === undefined
          ? db.prepare('SELECT json FROM objects WHERE kind = ? ORDER BY namespace, name').all(kind)
          : db.prepare('SELECT json FROM objects WHERE kind = ? AND namespace = ? ORDER BY name').all(kind, namespace)
      ) as { json: string }[];
      return { rows, rv: ctx.counter('rv') };
    });
    const { rows, rv } = read();
    const items = rows.map((r) => JSON.parse(r.json) as KindMap[K]).filter((o) => match(o.metadata.labels));
    return { items, resourceVersion: String(rv) };
  };

  const nextRv = (): number => {
    const row = db.prepare("UPDATE counters SET value = value + 1 WHERE name = 'rv' RETURNING value").get() as {
      value: number;
    };
    return row.value;
  };

  const recordChange = (rv: number, kind: Kind, type: WatchEventType, obj: AnyResource): void => {
    const namespace = obj.metadata.namespace ?? ctx.namespace;
    db.prepare('INSERT INTO changes (rv, kind, namespace, type, json) VALUES (?, ?, ?, ?, ?)').run(
      rv,
      kind,
      namespace,
      type,
      JSON.stringify(obj),
    );
    if (rv % 100 === 0) {
      const cutoff = rv - historyLimit;
      if (cutoff > ctx.counter('compacted')) {
        db.prepare('DELETE FROM changes WHERE rv <= ?').run(cutoff);
        db.prepare("UPDATE counters SET value = ? WHERE name = 'compacted'").run(cutoff);
      }
    }
  };

  const writeOwners = (kind: Kind, obj: AnyResource): void => {
    const m = obj.metadata;
    db.prepare('DELETE FROM owners WHERE kind = ? AND namespace = ? AND name = ?').run(kind, m.namespace, m.name);
    const ins = db.prepare('INSERT OR IGNORE INTO owners (owner_uid, kind, namespace, name) VALUES (?, ?, ?, ?)');
    for (const o of m.ownerReferences ?? []) ins.run(o.uid, kind, m.namespace, m.name);
  };

  /** Marks for deletion while finalizers remain; otherwise removes and garbage-collects dependents. */
  const deleteObject = (kind: Kind, obj: AnyResource): void => {
    const m = obj.metadata;
    if (m.finalizers?.length) {
      if (m.deletionTimestamp) return;
      const rv = nextRv();
      const next = {
        ...obj,
        metadata: { ...m, deletionTimestamp: new Date().toISOString(), resourceVersion: String(rv) },
      };
      db.prepare('UPDATE objects SET rv = ?, json = ? WHERE kind = ? AND namespace = ? AND name = ?').run(
        rv,
        JSON.stringify(next),
        kind,
        m.namespace,
        m.name,
      );
      recordChange(rv, kind, 'MODIFIED', next as AnyResource);
      return;
    }
    const rv = nextRv();
    db.prepare('DELETE FROM objects WHERE kind = ? AND namespace = ? AND name = ?').run(kind, m.namespace, m.name);
    db.prepare('DELETE FROM owners WHERE kind = ? AND namespace = ? AND name = ?').run(kind, m.namespace, m.name);
    recordChange(rv, kind, 'DELETED', { ...obj, metadata: { ...m, resourceVersion: String(rv) } } as AnyResource);
    if (kind === 'AgentRevision') {
      db.prepare('DELETE FROM revision_logs WHERE namespace = ? AND revision = ?').run(m.namespace, m.name);
    }
    db.prepare('DELETE FROM secrets WHERE owner_uid = ?').run(m.uid);
    db.prepare('DELETE FROM name_claims WHERE owner_uid = ?').run(m.uid);
    db.prepare('DELETE FROM host_claims WHERE owner_uid = ?').run(m.uid);
    const dependents = db.prepare('SELECT kind, namespace, name FROM owners WHERE owner_uid = ?').all(m.uid) as {
      kind: Kind;
      namespace: string;
      name: string;
    }[];
    db.prepare('DELETE FROM owners WHERE owner_uid = ?').run(m.uid);
    for (const d of dependents) {
      const row = db
        .prepare('SELECT json FROM objects WHERE kind = ? AND namespace = ? AND name = ?')
        .get(d.kind, d.namespace, d.name) as { json: string } | undefined;
      if (row) deleteObject(d.kind, JSON.parse(row.json) as AnyResource);
    }
  };

  const current = <K extends Kind>(kind: K, input: KindMap[K]): KindMap[K] => {
    const namespace = input.metadata.namespace ?? ctx.namespace;
    const row = db
      .prepare('SELECT json FROM objects WHERE kind = ? AND namespace = ? AND name = ?')
      .get(kind, namespace, input.metadata.name) as { json: string } | undefined;
    if (!row) throw notFound(kind, input.metadata.name);
    const found = JSON.parse(row.json) as KindMap[K];
    if (input.metadata.uid && input.metadata.uid !== found.metadata.uid) {
      throw new StaleResourceVersionError(`${kind} "${input.metadata.name}": uid precondition failed`);
    }
    if (input.metadata.resourceVersion && input.metadata.resourceVersion !== found.metadata.resourceVersion) {
      throw new StaleResourceVersionError(
        `Operation cannot be fulfilled on ${kind} "${input.metadata.name}": the object has been modified; ` +
          'please apply your changes to the latest version and try again',
      );
    }
    return found;
  };

  const replace = <K extends Kind>(kind: K, was: KindMap[K], next: KindMap[K]): KindMap[K] => {
    if (canonicalJson(next) === canonicalJson(was)) return was;
    if (next.metadata.deletionTimestamp && !next.metadata.finalizers?.length) {
      deleteObject(kind, next);
      return next;
    }
    const rv = nextRv();
    next.metadata.resourceVersion = String(rv);
    db.prepare('UPDATE objects SET rv = ?, json = ? WHERE kind = ? AND namespace = ? AND name = ?').run(
      rv,
      JSON.stringify(next),
      kind,
      next.metadata.namespace,
      next.metadata.name,
    );
    writeOwners(kind, next);
    recordChange(rv, kind, 'MODIFIED', next);
    return next;
  };

  return {
    async get<K extends Kind>(kind: K, namespace: string, name: string): Promise<KindMap[K]> {
      const row = db
        .prepare('SELECT json FROM objects WHERE kind = ? AND namespace = ? AND name = ?')
        .get(kind, namespace, name) as { json: string } | undefined;
      if (!row) throw notFound(kind, name);
      return JSON.parse(row.json) as KindMap[K];
    },

    async list<K extends Kind>(kind: K, namespace?: string, opts: ListOptions = {}) {
      return listSync(kind, namespace, opts);
    },

    async create<K extends Kind>(kind: K, input: KindMap[K]): Promise<KindMap[K]> {
      const obj = validateResource(kind, { ...structuredClone(input), status: undefined });
      const namespace = obj.metadata.namespace ?? ctx.namespace;
      return ctx.write(() => {
        const exists = db
          .prepare('SELECT 1 FROM objects WHERE kind = ? AND namespace = ? AND name = ?')
          .get(kind, namespace, obj.metadata.name);
        if (exists) throw new AlreadyExistsError(`${kind} "${obj.metadata.name}" already exists`);
        const rv = nextRv();
        const { resourceVersion: _rv, deletionTimestamp: _dt, uid: _uid, generation: _g, ...meta } = obj.metadata;
        const stored = {
          ...obj,
          metadata: {
            ...meta,
            namespace,
            uid: randomUUID(),
            resourceVersion: String(rv),
            generation: 1,
            creationTimestamp: new Date().toISOString(),
          },
        } as KindMap[K];
        delete (stored as { status?: unknown }).status;
        db.prepare('INSERT INTO objects (kind, namespace, name, uid, rv, json) VALUES (?, ?, ?, ?, ?, ?)').run(
          kind,
          namespace,
          stored.metadata.name,
          stored.metadata.uid,
          rv,
          JSON.stringify(stored),
        );
        writeOwners(kind, stored);
        recordChange(rv, kind, 'ADDED', stored);
        return stored;
      });
    },

    async update<K extends Kind>(kind: K, input: KindMap[K]): Promise<KindMap[K]> {
      return ctx.write(() => {
        const was = current(kind, input);
        const obj = validateResource(kind, { ...structuredClone(input), status: was.status });
        if (kind === 'AgentRevision' && canonicalJson(obj.spec) !== canonicalJson(was.spec)) {
          throw new ValidationError('AgentRevision spec is immutable', [
            { loc: ['spec'], msg: 'spec is immutable', type: 'immutable' },
          ]);
        }
        const specChanged = canonicalJson(obj.spec) !== canonicalJson(was.spec);
        const m = obj.metadata;
        // A deleting object may lose finalizers but not gain new ones (as on the API server).
        const finalizers = was.metadata.deletionTimestamp
          ? (m.finalizers ?? []).filter((f) => was.metadata.finalizers?.includes(f))
          : m.finalizers;
        const next = {
          ...obj,
          metadata: {
            ...was.metadata,
            labels: m.labels,
            annotations: m.annotations,
            finalizers: finalizers?.length ? finalizers : undefined,
            ownerReferences: m.ownerReferences,
            generation: (was.metadata.generation ?? 1) + (specChanged ? 1 : 0),
          },
        } as KindMap[K];
        return replace(kind, was, next);
      });
    },

    async updateStatus<K extends Kind>(kind: K, input: KindMap[K]): Promise<KindMap[K]> {
      return ctx.write(() => {
        const was = current(kind, input);
        const next = validateResource(kind, { ...was, status: structuredClone(input.status) });
        return replace(kind, was, next);
      });
    },

    async delete(kind: Kind, namespace: string, name: string): Promise<void> {
      ctx.write(() => {
        const row = db
          .prepare('SELECT json FROM objects WHERE kind = ? AND namespace = ? AND name = ?')
          .get(kind, namespace, name) as { json: string } | undefined;
        if (!row) throw notFound(kind, name);
        deleteObject(kind, JSON.parse(row.json) as AnyResource);
      });
    },

    async watch<K extends Kind>(
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
        if (stopped || c.rv <= seen || c.kind !== kind || (namespace !== undefined && c.namespace !== namespace))
          return;
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
    },
  };
}

function notFound(kind: Kind, name: string): NotFoundError {
  return new NotFoundError(`${kind} "${name}" not found`);
}
