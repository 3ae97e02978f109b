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

/** Maps whose values are resource quantities: the server stores them canonically (`1024Mi` as `1Gi`). */
const QUANTITY_MAPS = new Set(['requests', 'limits', 'capacity', 'hard']);
const QUANTITY_KEYS = new Set(['sizeLimit']);
const QUANTITY = /^([+-]?(?:\d+\.?\d*|\.\d+))(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+)?$/;
const SUFFIX: Record<string, number> = {
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** The value of a Kubernetes quantity (`500m`, `1Gi`, `1e3`, 2), or undefined when it is not one. */
export function quantityValue(q: unknown): number | undefined {
  if (typeof q === 'number') return q;
  if (typeof q !== 'string') return undefined;
  const m = QUANTITY.exec(q.trim());
  if (!m) return undefined;
  const unit = m[2];
  const scale = !unit ? 1 : /^[eE]/.test(unit) ? 10 ** Number(unit.slice(1)) : SUFFIX[unit]!;
  return Number(m[1]) * scale;
}

function sameQuantity(a: unknown, b: unknown): boolean {
  const x = quantityValue(a);
  const y = quantityValue(b);
  return x !== undefined && y !== undefined && Math.abs(x - y) <= Math.abs(y) * 1e-12;
}

/** What the server drops as `omitempty`: an empty map or list reads back as absent. */
function isEmpty(v: unknown): boolean {
  return Array.isArray(v) ? v.length === 0 : !!v && typeof v === 'object' && Object.keys(v).length === 0;
}

/**
 * True when every field of `desired` is present and equal in `current` (arrays: same length, element-wise), as the
 * server would store it: an empty map or list equals an absent one, quantities compare by value.
 */
export function contains(current: unknown, desired: unknown, key = '', parent = ''): boolean {
  if (desired === undefined) return true;
  if ((current === undefined || current === null) && isEmpty(desired)) return true;
  if (Array.isArray(desired)) {
    return (
      Array.isArray(current) &&
      current.length === desired.length &&
      desired.every((d, i) => contains(current[i], d, key, parent))
    );
  }
  if (desired && typeof desired === 'object') {
    if (!current || typeof current !== 'object') return false;
    return Object.entries(desired).every(([k, v]) => contains((current as Json)[k], v, k, key));
  }
  if ((QUANTITY_MAPS.has(parent) || QUANTITY_KEYS.has(key)) && sameQuantity(current, desired)) return true;
  // Ports may come back as numbers or strings.
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

export type ApplyResult<T> = {
  object: T;
  wrote: boolean;
  /** Paths from `immutable` where the object differs from `desired` and was left as it is. */
  unchanged?: string[];
};

export type ApplyOptions = {
  createOnly?: boolean;
  owned?: boolean;
  /**
   * Fields the server refuses to change once set (a StatefulSet's volumeClaimTemplates): an existing object keeps
   * its own; the difference is reported in `unchanged` rather than sent (the server would answer 422 forever).
   */
  immutable?: string[][];
  /**
   * Fields we set before and no longer set but which must not be removed (a Deployment's replicas when an
   * autoscaler takes over: removing them would scale to 1 until the autoscaler acts).
   */
  retain?: string[][];
};

function getPath(obj: unknown, path: string[]): unknown {
  return path.reduce<unknown>((o, k) => (o && typeof o === 'object' ? (o as Json)[k] : undefined), obj);
}

function setPath(obj: Json, path: string[], value: unknown): void {
  let o = obj;
  for (const k of path.slice(0, -1)) {
    if (!o[k] || typeof o[k] !== 'object') o[k] = {};
    o = o[k] as Json;
  }
  if (value === undefined) delete o[path[path.length - 1]!];
  else o[path[path.length - 1]!] = value;
}

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
  opts: ApplyOptions = {},
): Promise<ApplyResult<T>> {
  const namespace = desired.metadata!.namespace as string;
  const name = desired.metadata!.name as string;
  const owned = opts.owned ?? true;
  const { metadata: rawMeta, apiVersion: _a, kind: _k, ...dRest } = structuredClone(desired) as Json;
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
    const unchanged: string[] = [];
    for (const path of opts.immutable ?? []) {
      const now = getPath(cur, path);
      if (now === undefined) continue;
      if (!contains(now, getPath(dRest, path))) unchanged.push(path.join('.'));
      setPath(dRest, path, structuredClone(now));
    }
    // An object being deleted (a foreground deletion waiting for its dependents, a finalizer) is never written:
    // it is going away whatever we write. Failing lets the reconcile retry and create it afresh once it is gone.
    if (cur.metadata?.deletionTimestamp)
      throw new BeingDeletedError(`${name} in ${namespace} is being deleted; it is recreated once it is gone`);
    const same =
      contains(cur.metadata?.labels ?? {}, dMeta.labels ?? {}) &&
      contains(cur.metadata?.annotations ?? {}, dMeta.annotations ?? {}) &&
      contains(cur.metadata?.ownerReferences ?? [], dMeta.ownerReferences ?? []) &&
      contains(cur, dRest);
    if (same || opts.createOnly) return { object: current, wrote: false, ...(unchanged.length ? { unchanged } : {}) };
    const body = overlay(cur, {
      ...dRest,
      metadata: { ...dMeta, resourceVersion: cur.metadata?.resourceVersion },
    }) as Json;
    const before = paths ? parseOwned(cur.metadata?.annotations?.[ANNOTATION_OWNED]) : undefined;
    if (before && paths) {
      const kept = (opts.retain ?? []).map((p) => [p, getPath(body, p)] as const);
      removeDropped(body, before, paths);
      for (const [p, v] of kept) if (v !== undefined && getPath(body, p) === undefined) setPath(body, p, v);
    }
    try {
      const object = await ops.replace(namespace, name, body as T);
      return { object, wrote: true, ...(unchanged.length ? { unchanged } : {}) };
    } catch (err) {
      if (isStatus(err, 409) && attempt < 3) continue;
      throw err;
    }
  }
}
