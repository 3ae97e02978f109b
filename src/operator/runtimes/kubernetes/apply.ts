// Create-or-update without needless writes: an object is written only when some field we set differs from what
// the server holds (server defaults do not count), and updates are compare-and-swap on resourceVersion with a
// retry on conflict. Hand-written because @kubernetes/client-node's generic object API needs API discovery.
import { ApiException } from '@kubernetes/client-node';

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
    return Array.isArray(current) && current.length === desired.length && desired.every((d, i) => contains(current[i], d));
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

/** Makes the object match `desired` (metadata labels/annotations/ownerReferences and spec-like fields). */
export async function apply<T extends { metadata?: Json }>(ops: ObjectOps<T>, desired: T, opts: { createOnly?: boolean } = {}): Promise<ApplyResult<T>> {
  const namespace = desired.metadata!.namespace as string;
  const name = desired.metadata!.name as string;
  const { metadata: dMeta, apiVersion: _a, kind: _k, ...dRest } = desired as Json;
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
    const same =
      contains(cur.metadata?.labels ?? {}, dMeta.labels ?? {}) &&
      contains(cur.metadata?.annotations ?? {}, dMeta.annotations ?? {}) &&
      contains(cur.metadata?.ownerReferences ?? [], dMeta.ownerReferences ?? []) &&
      contains(cur, dRest);
    if (same || opts.createOnly) return { object: current, wrote: false };
    const body = overlay(cur, { ...dRest, metadata: { ...dMeta, resourceVersion: cur.metadata?.resourceVersion } }) as T;
    try {
      return { object: await ops.replace(namespace, name, body), wrote: true };
    } catch (err) {
      if (isStatus(err, 409) && attempt < 3) continue;
      throw err;
    }
  }
}
