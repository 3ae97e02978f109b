// The row work under the embedded state's AgentDeployment / AgentRevision operations (resources.ts): listing, the
// global resourceVersion counter and its change log, owner references, and removal with the garbage collection of
// what an object owns (dependent objects, secret sets, claims, revision logs), as Kubernetes does. Each helper runs
// inside the caller's write transaction (EmbeddedContext.write) or, for a list, a read transaction of its own.
import { NotFoundError } from '../../lib/errors.ts';
import { StaleResourceVersionError } from '../errors.ts';
import {
  labelSelectorMatcher,
  type AnyResource,
  type Kind,
  type KindMap,
  type ListOptions,
  type WatchEventType,
} from '../resources.ts';
import { canonicalJson } from '../validate.ts';
import type { EmbeddedContext } from './context.ts';

export type ResourceRows = ReturnType<typeof resourceRows>;

export function resourceRows(ctx: EmbeddedContext, historyLimit: number) {
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

  return { listSync, nextRv, recordChange, writeOwners, deleteObject, current, replace };
}

export function notFound(kind: Kind, name: string): NotFoundError {
  return new NotFoundError(`${kind} "${name}" not found`);
}
