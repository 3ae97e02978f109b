// Create-or-update without needless writes: an object is written only when some field we set differs from what
// the server holds (server defaults do not count), and updates are compare-and-swap on resourceVersion with a
// retry on conflict. The fields we set are recorded on the object (their paths, never their values, in the
// ANNOTATION_OWNED annotation, like kubectl's last-applied but without values), so a field we set before and no
// longer want is removed while fields the server or other controllers set stay. Hand-written because
// @kubernetes/client-node's generic object API needs API discovery and the double has no server-side apply.
import { ApiException } from '@kubernetes/client-node';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- Kubernetes objects of any kind, walked field by field
type Json = Record<string, any>;

export type ObjectOps<T> = {
  read(namespace: string, name: string): Promise<T>;
  create(namespace: string, body: T): Promise<T>;
  replace(namespace: string, name: string, body: T): Promise<T>;
};

export function isStatus(err: unknown, code: number): boolean {
  return err instanceof ApiException && err.code === code;
}

/** True when every field of `desired` is present and equal in `current` (arrays: same length, element-wise). */
export function contains(current: unknown, desired: unknown): boolean {
  if (desired === undefined) return true;
  if (Array.isArray(desired)) {
    return (
      Array.isArray(current) && current.length === desired.length && desired.every((d, i) => contains(current[i], d))
    );
  }
  if (desired && typeof desired === 'object') {
    if (!current || typeof current !== 'object') return false;
    return Object.entries(desired).every(([k, v]) => contains((current as Json)[k], v));
  }
  // Quantities and ports may come back as numbers or strings.
  return current === desired || (current !== undefined && current !== null && String(current) === String(desired));
}

/** `desired` laid over `current`: our fields win, fields only the server set (clusterIP, defaults) stay. */
export function overlay(current: unknown, desired: unknown): unknown {
  if (desired === undefined) return current;
  if (Array.isArray(desired) || !desired || typeof desired !== 'object') return desired;
  const base: Json = current && typeof current === 'object' && !Array.isArray(current) ? { ...(current as Json) } : {};
  for (const [k, v] of Object.entries(desired)) base[k] = overlay(base[k], v);
  return base;
}

export type ApplyResult<T> = { object: T; wrote: boolean };

/** apply() met the object with a deletionTimestamp: the caller retries later. */
export class BeingDeletedError extends Error {}

export const ANNOTATION_OWNED = 'agentplane.dev/owned-fields';

/** The paths of a value: objects keep their keys, anything else (arrays included, replaced whole) becomes 1. */
export function fieldPaths(value: unknown): unknown {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return 1;
  return Object.fromEntries(
    Object.entries(value as Json)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => [k, fieldPaths(v)]),
  );
}

/** Deletes from `target` the paths present in `before` and absent from `now`. */
export function removeDropped(target: Json, before: Json, now: unknown): void {
  for (const [k, b] of Object.entries(before)) {
    const n = now && typeof now === 'object' ? (now as Json)[k] : undefined;
    if (n === undefined) delete target[k];
    else if (
      b &&
      typeof b === 'object' &&
      n &&
      typeof n === 'object' &&
      target[k] &&
      typeof target[k] === 'object' &&
      !Array.isArray(target[k])
    ) {
      removeDropped(target[k] as Json, b as Json, n);
    }
  }
}

function parseOwned(text: string | undefined): Json | undefined {
  if (!text) return undefined;
  try {
    const v = JSON.parse(text) as unknown;
    return v && typeof v === 'object' ? (v as Json) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Makes the object match `desired` (metadata labels/annotations/ownerReferences and spec-like fields). With
 * `owned` (the default, for objects from the builders) fields set by an earlier apply and absent from `desired` are
 * removed; `owned: false` only lays `desired` over the object (edits of a read object, which keep its record).
 */
export async function apply<T extends { metadata?: Json }>(
  ops: ObjectOps<T>,
  desired: T,
  opts: { createOnly?: boolean; owned?: boolean } = {},
): Promise<ApplyResult<T>> {
  const namespace = desired.metadata!.namespace as string;
  const name = desired.metadata!.name as string;
  const owned = opts.owned ?? true;
  const { metadata: rawMeta, apiVersion: _a, kind: _k, ...dRest } = desired as Json;
  const { [ANNOTATION_OWNED]: _o, ...userAnnotations } = (rawMeta.annotations ?? {}) as Record<string, string>;
  const paths = owned
    ? (fieldPaths({ ...dRest, metadata: { labels: rawMeta.labels ?? {}, annotations: userAnnotations } }) as Json)
    : undefined;
  const dMeta: Json = paths
    ? { ...rawMeta, annotations: { ...userAnnotations, [ANNOTATION_OWNED]: JSON.stringify(paths) } }
    : rawMeta;
  desired = { ...desired, metadata: dMeta };
  for (let attempt = 0; ; attempt++) {
    let current: T | undefined;
    try {
      current = await ops.read(namespace, name);
    } catch (err) {
      if (!isStatus(err, 404)) throw err;
    }
    if (!current) {
      try {
        return { object: await ops.create(namespace, desired), wrote: true };
      } catch (err) {
        if (isStatus(err, 409) && attempt < 3) continue; // created meanwhile: compare against it
        throw err;
      }
    }
    const cur = current as Json;
    // An object being deleted (a foreground deletion waiting for its dependents, a finalizer) is never written:
    // it is going away whatever we write. Failing lets the reconcile retry and create it afresh once it is gone.
    if (cur.metadata?.deletionTimestamp)
      throw new BeingDeletedError(`${name} in ${namespace} is being deleted; it is recreated once it is gone`);
    const same =
      contains(cur.metadata?.labels ?? {}, dMeta.labels ?? {}) &&
      contains(cur.metadata?.annotations ?? {}, dMeta.annotations ?? {}) &&
      contains(cur.metadata?.ownerReferences ?? [], dMeta.ownerReferences ?? []) &&
      contains(cur, dRest);
    if (same || opts.createOnly) return { object: current, wrote: false };
    const body = overlay(cur, {
      ...dRest,
      metadata: { ...dMeta, resourceVersion: cur.metadata?.resourceVersion },
    }) as Json;
    const before = paths ? parseOwned(cur.metadata?.annotations?.[ANNOTATION_OWNED]) : undefined;
    if (before && paths) removeDropped(body, before, paths);
    try {
      return { object: await ops.replace(namespace, name, body as T), wrote: true };
    } catch (err) {
      if (isStatus(err, 409) && attempt < 3) continue;
      throw err;
    }
  }
}
