// AgentDeployments and AgentRevisions of the embedded state: a JSON row each in `objects`. resourceVersion is a
// single global counter; each change is also appended to a bounded change log, which lets a watch resume from any
// recent resourceVersion (older ones answer 410, like the API server). Removing an object garbage-collects what it
// owns (dependent objects, secret sets, claims, revision logs), as Kubernetes does. The operations are here; the row
// work under them is in resource-writes.ts, the watch in resources-watch.ts.
import { randomUUID } from 'node:crypto';
import { ValidationError } from '../../lib/errors.ts';
import { AlreadyExistsError } from '../errors.ts';
import type { AnyResource, Kind, KindMap, ListOptions, ResourceStore } from '../resources.ts';
import { canonicalJson, validateResource } from '../validate.ts';
import type { EmbeddedContext } from './context.ts';
import { notFound, resourceRows } from './resource-writes.ts';
import { embeddedWatch } from './resources-watch.ts';

export function embeddedResources(ctx: EmbeddedContext, historyLimit: number): ResourceStore {
  const { db } = ctx;

  const { listSync, nextRv, recordChange, writeOwners, deleteObject, current, replace } = resourceRows(
    ctx,
    historyLimit,
  );

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

    watch(kind, namespace, resourceVersion, onEvent, onError) {
      return embeddedWatch(ctx, listSync, kind, namespace, resourceVersion, onEvent, onError);
    },
  };
}
