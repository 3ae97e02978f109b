// Server-side apply without needless writes. The operator owns the fields its builders set, as the field manager
// FIELD_MANAGER: each child is sent whole as an apply patch, so the API server itself removes a field we applied
// before and no longer apply, and keeps every field another manager (a person's kubectl, an autoscaler, a mutating
// webhook) set. A write is skipped when the live object already holds every field we apply (server defaults and
// other managers' fields do not count; keyed lists such as containers match by key, so an injected sidecar is no
// difference) and carries the digest of the same configuration (ANNOTATION_APPLIED: a field dropped from the
// configuration changes it, which the live values alone cannot show).
import { createHash } from 'node:crypto';
import { ApiException } from '@kubernetes/client-node';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- Kubernetes objects of any kind, walked field by field
type Json = Record<string, any>;

export type ObjectOps<T> = {
  read(namespace: string, name: string): Promise<T>;
  /**
   * The object as a watch-fed cache holds it (cached-reads.ts), or undefined when the cache does not know it (not
   * synced, not in the watched namespaces, absent): apply() then reads it from the server.
   */
  cached?(namespace: string, name: string): T | undefined;
  /** Drops an object this process deleted from that cache, so no read meanwhile takes the deleted copy for live. */
  forget?(namespace: string, name: string): void;
  /** Server-side apply of the whole configuration as FIELD_MANAGER, forced (see applyOptions); creates if absent. */
  apply(namespace: string, name: string, body: T): Promise<T>;
  /** Compare-and-swap update (resourceVersion) of an object as read: edits outside our configuration. */
  replace(namespace: string, name: string, body: T): Promise<T>;
};

/** The field manager of everything the operator applies (what `kubectl get -o yaml --show-managed-fields` shows). */
export const FIELD_MANAGER = 'agentplane-operator';

/**
 * The query of every apply. `force`: the children are the operator's, built from the AgentDeployment; a field
 * another manager changed under it (a `kubectl edit` of the image, a scale by hand) is taken back rather than
 * left to fail every reconcile with a conflict no one would read. Fields the operator never sets stay theirs.
 */
export const applyOptions = { fieldManager: FIELD_MANAGER, force: true } as const;

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
 * The key of a list the API server merges by key (containers, env, volumes by `name`; volumeMounts by
 * `mountPath`; ownerReferences by `uid`): undefined for the lists it replaces whole (args, command, tolerations).
 */
function listKey(desired: unknown[]): string | undefined {
  for (const k of ['name', 'mountPath', 'uid']) {
    if (desired.length && desired.every((d) => d && typeof d === 'object' && typeof (d as Json)[k] === 'string'))
      return k;
  }
  return undefined;
}

/**
 * True when every field of `desired` is present and equal in `current`, as the server would store it: an empty map
 * or list equals an absent one, quantities compare by value; keyed lists match element by key (other elements, a
 * sidecar another manager added, do not count), other lists have the same length and match element-wise.
 */
export function contains(current: unknown, desired: unknown, key = '', parent = ''): boolean {
  if (desired === undefined) return true;
  if ((current === undefined || current === null) && isEmpty(desired)) return true;
  if (Array.isArray(desired)) {
    if (!Array.isArray(current)) return false;
    const k = listKey(desired);
    if (k) {
      return desired.every((d) => {
        const match = current.find((c) => c && typeof c === 'object' && (c as Json)[k] === (d as Json)[k]);
        return match !== undefined && contains(match, d, key, parent);
      });
    }
    return current.length === desired.length && desired.every((d, i) => contains(current[i], d, key, parent));
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
  /** Written once, never changed (immutable Secrets, Jobs): an existing object is left as it is. */
  createOnly?: boolean;
  /**
   * false: `desired` is an object as read with some fields edited (a rollback of a Deployment's template, results
   * recorded on a Job), written by a compare-and-swap update instead of an apply, so the configuration the operator
   * applies stays the builders' alone.
   */
  owned?: boolean;
  /**
   * Fields the server refuses to change once set (a StatefulSet's volumeClaimTemplates): an existing object keeps
   * its own; the difference is reported in `unchanged` rather than sent (the server would answer 422 forever).
   */
  immutable?: string[][];
  /**
   * Fields we applied before and no longer set but which must not be removed until another manager owns them (a
   * Deployment's replicas when an autoscaler takes over: dropping them from the apply would scale to 1 until the
   * autoscaler acts). Their live value is applied until then.
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

/** Digest of the configuration the operator last applied (see the file header). */
export const ANNOTATION_APPLIED = 'agentplane.dev/applied';
/** Where earlier operator versions recorded the paths they set; removed once, when an object is first applied. */
export const ANNOTATION_OWNED_BEFORE = 'agentplane.dev/owned-fields';

/** Keys in a stable order, so the digest depends on the configuration, not on how a builder spelt it. */
function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (!v || typeof v !== 'object') return v;
  return Object.fromEntries(
    Object.keys(v as Json)
      .filter((k) => (v as Json)[k] !== undefined)
      .sort()
      .map((k) => [k, canonical((v as Json)[k])]),
  );
}

export function appliedDigest(body: Json): string {
  const { [ANNOTATION_APPLIED]: _d, ...annotations } = (body.metadata?.annotations ?? {}) as Json;
  const bare = { ...body, metadata: { ...body.metadata, annotations } };
  return createHash('sha256')
    .update(JSON.stringify(canonical(bare)))
    .digest('base64url')
    .slice(0, 22);
}

/** The managers that own the field at `path` (plain object keys) on `obj`, from its managedFields. */
function fieldOwners(obj: Json, path: string[]): string[] {
  const entries = (obj.metadata?.managedFields ?? []) as Json[];
  const fieldPath = path.map((k) => `f:${k}`);
  return entries.filter((e) => getPath(e.fieldsV1, fieldPath) !== undefined).map((e) => String(e.manager));
}

/**
 * True when ours is the only manager of the field at `path`: a value we applied before. A value the server
 * defaulted (a Deployment's replicas created without them) has no manager, and is not ours to keep.
 */
function ownedOnlyByUs(obj: Json, path: string[]): boolean {
  const owners = fieldOwners(obj, path);
  return owners.length > 0 && owners.every((m) => m === FIELD_MANAGER);
}

async function readOrUndefined<T>(ops: ObjectOps<T>, namespace: string, name: string): Promise<T | undefined> {
  try {
    return await ops.read(namespace, name);
  } catch (err) {
    if (isStatus(err, 404)) return undefined;
    throw err;
  }
}

/**
 * Makes the object hold `desired` (an object from the builders, with apiVersion and kind): one server-side apply
 * when some field differs or the configuration changed, nothing otherwise. `owned: false` updates an object as read
 * with some fields edited instead (see ApplyOptions).
 */
export async function apply<T extends { metadata?: Json }>(
  ops: ObjectOps<T>,
  desired: T,
  opts: ApplyOptions = {},
): Promise<ApplyResult<T>> {
  const namespace = desired.metadata!.namespace as string;
  const name = desired.metadata!.name as string;
  if (opts.owned === false) return update(ops, namespace, name, desired);
  const body = structuredClone(desired) as Json;
  if (!body.apiVersion || !body.kind) throw new Error(`apply of ${name}: apiVersion and kind are required`);
  const current = (ops.cached?.(namespace, name) ?? (await readOrUndefined(ops, namespace, name))) as Json | undefined;
  // An object being deleted (a foreground deletion waiting for its dependents, a finalizer) is never written:
  // it is going away whatever we write. Failing lets the reconcile retry and create it afresh once it is gone.
  if (current?.metadata?.deletionTimestamp)
    throw new BeingDeletedError(`${name} in ${namespace} is being deleted; it is recreated once it is gone`);
  if (current && opts.createOnly) return { object: current as T, wrote: false };
  const unchanged: string[] = [];
  if (current) {
    for (const path of opts.immutable ?? []) {
      const now = getPath(current, path);
      if (now === undefined || contains(now, getPath(body, path))) continue;
      unchanged.push(path.join('.'));
      setPath(body, path, structuredClone(now));
    }
    for (const path of opts.retain ?? []) {
      const now = getPath(current, path);
      if (getPath(body, path) === undefined && now !== undefined && ownedOnlyByUs(current, path))
        setPath(body, path, structuredClone(now));
    }
  }
  body.metadata = { ...body.metadata, annotations: { ...body.metadata.annotations } };
  body.metadata.annotations[ANNOTATION_APPLIED] = appliedDigest(body);
  const done = (object: T, wrote: boolean): ApplyResult<T> => ({
    object,
    wrote,
    ...(unchanged.length ? { unchanged } : {}),
  });
  if (current && contains(current, body)) return done(current as T, false);
  if (current?.metadata?.annotations?.[ANNOTATION_OWNED_BEFORE] !== undefined)
    await forgetOwnership(ops, current, body);
  return done(await ops.apply(namespace, name, body as T), true);
}

/** Deletes from `target` the paths present in `before` (an earlier version's record) and absent from `now`. */
function removeDropped(target: Json, before: Json, now: unknown): void {
  for (const [k, b] of Object.entries(before)) {
    const n = now && typeof now === 'object' ? (now as Json)[k] : undefined;
    if (n === undefined) delete target[k];
    else if (isObject(b) && isObject(n) && isObject(target[k]) && !Array.isArray(target[k]))
      removeDropped(target[k] as Json, b as Json, n);
  }
}

const isObject = (v: unknown): v is Json => !!v && typeof v === 'object';

/**
 * An object written by an earlier operator version (whole-object updates, the paths it set in an annotation): what
 * that version set and this one does not is removed, the annotation dropped and the field ownership reset
 * (`managedFields: [{}]`, the API server's documented reset), so the apply that follows makes the operator the only
 * owner of what it sets and later applies remove what it stops setting.
 */
async function forgetOwnership<T>(ops: ObjectOps<T>, current: Json, body: Json): Promise<void> {
  const { [ANNOTATION_OWNED_BEFORE]: record, ...annotations } = current.metadata.annotations as Json;
  const next = structuredClone({ ...current, metadata: { ...current.metadata, annotations, managedFields: [{}] } });
  try {
    const before = JSON.parse(String(record)) as unknown;
    if (isObject(before)) {
      const { metadata: bMeta, ...bRest } = before;
      const { metadata: nowMeta, ...nowRest } = body;
      removeDropped(next, bRest, nowRest);
      if (isObject(bMeta)) removeDropped(next.metadata, bMeta, nowMeta);
    }
  } catch {
    // An unreadable record: nothing to remove, ownership is still reset.
  }
  try {
    await ops.replace(current.metadata.namespace, current.metadata.name, next as T);
  } catch (err) {
    if (!isStatus(err, 409)) throw err; // changed meanwhile: the next reconcile tries again
  }
}

/** `desired` laid over what the server holds, written compare-and-swap, retried on a conflict. */
async function update<T extends { metadata?: Json }>(
  ops: ObjectOps<T>,
  namespace: string,
  name: string,
  desired: T,
): Promise<ApplyResult<T>> {
  const { metadata: dMeta, apiVersion: _a, kind: _k, ...dRest } = structuredClone(desired) as Json;
  for (let attempt = 0; ; attempt++) {
    const cur = (await ops.read(namespace, name)) as Json;
    if (cur.metadata?.deletionTimestamp)
      throw new BeingDeletedError(`${name} in ${namespace} is being deleted; it is recreated once it is gone`);
    const same =
      contains(cur.metadata?.labels ?? {}, dMeta.labels ?? {}) &&
      contains(cur.metadata?.annotations ?? {}, dMeta.annotations ?? {}) &&
      contains(cur, dRest);
    if (same) return { object: cur as T, wrote: false };
    const body = overlay(cur, {
      ...dRest,
      metadata: {
        labels: dMeta.labels,
        annotations: dMeta.annotations,
        resourceVersion: cur.metadata?.resourceVersion,
      },
    }) as T;
    try {
      return { object: await ops.replace(namespace, name, body), wrote: true };
    } catch (err) {
      if (isStatus(err, 409) && attempt < 3) continue;
      throw err;
    }
  }
}
