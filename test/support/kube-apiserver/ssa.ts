// Server-side apply as the real API server does it, for the lists and fields the operator and the tests use:
// field sets per manager in metadata.managedFields (FieldsV1: `f:<field>`, `k:{<keys>}` for keyed list elements,
// `v:<value>` for set elements, `.` for an element that also has owned fields), keyed lists merged by key, a field
// the applier owned before and no longer applies removed unless another manager owns it, and conflicts when the
// applied value of a field another manager owns differs (refused unless force, which takes the field over).
// The list types come from the official OpenAPI extensions (x-kubernetes-list-type / list-map-keys) of the kinds we
// serve, written out here because kubernetes-models' schemas do not carry them.

type Json = Record<string, any>;
type Path = string[];

/** Keys of the keyed (map) lists by field name; a key missing from an element takes its default. */
const LIST_MAP_KEYS: Record<string, { keys: string[]; defaults?: Json }> = {
  containers: { keys: ['name'] },
  initContainers: { keys: ['name'] },
  ephemeralContainers: { keys: ['name'] },
  volumes: { keys: ['name'] },
  env: { keys: ['name'] },
  volumeMounts: { keys: ['mountPath'] },
  imagePullSecrets: { keys: ['name'] },
  ownerReferences: { keys: ['uid'] },
  conditions: { keys: ['type'] },
  volumeClaimTemplates: { keys: [] },
};
/** Lists of scalars merged as sets. */
const SET_LISTS = new Set(['finalizers']);
/** Fields the server keeps out of every field set. */
const STRIPPED: Path[] = [
  ['apiVersion'],
  ['kind'],
  ['metadata', 'name'],
  ['metadata', 'namespace'],
  ['metadata', 'uid'],
  ['metadata', 'resourceVersion'],
  ['metadata', 'generation'],
  ['metadata', 'creationTimestamp'],
  ['metadata', 'managedFields'],
];

/** How a list under `field` merges: by keys, as a set, or whole (atomic). */
function listKind(field: string, items: unknown[]): { keys: string[]; defaults?: Json } | 'set' | 'atomic' {
  if (SET_LISTS.has(field)) return 'set';
  if (field === 'ports' && items.every((i) => i && typeof i === 'object')) {
    // Container ports are keyed by containerPort and protocol, Service ports by port and protocol.
    const container = items.some((i) => 'containerPort' in (i as Json));
    return { keys: [container ? 'containerPort' : 'port', 'protocol'], defaults: { protocol: 'TCP' } };
  }
  const k = LIST_MAP_KEYS[field];
  return k && k.keys.length && items.every((i) => i && typeof i === 'object') ? k : 'atomic';
}

function keyOf(item: Json, kind: { keys: string[]; defaults?: Json }): string {
  const key = Object.fromEntries(kind.keys.map((k) => [k, item[k] ?? kind.defaults?.[k]]));
  return `k:${JSON.stringify(key)}`;
}

const isMap = (v: unknown): v is Json => !!v && typeof v === 'object' && !Array.isArray(v);

/** The fields `obj` sets, as member paths (leaves and list elements). */
export function fieldSet(obj: Json): Set<string> {
  const out = new Set<string>();
  const walk = (v: unknown, path: Path, field: string) => {
    if (STRIPPED.some((s) => s.length === path.length && s.every((x, i) => path[i] === `f:${x}`))) return;
    if (isMap(v) && Object.keys(v).length && path.length >= 0) {
      for (const [k, x] of Object.entries(v)) if (x !== undefined) walk(x, [...path, `f:${k}`], k);
      return;
    }
    if (Array.isArray(v) && v.length) {
      const kind = listKind(field, v);
      if (kind === 'set') {
        for (const x of v) out.add(JSON.stringify([...path, `v:${JSON.stringify(x)}`]));
        return;
      }
      if (kind !== 'atomic') {
        for (const x of v as Json[]) {
          const p = [...path, keyOf(x, kind)];
          out.add(JSON.stringify(p));
          for (const [k, y] of Object.entries(x)) if (y !== undefined) walk(y, [...p, `f:${k}`], k);
        }
        return;
      }
    }
    if (path.length) out.add(JSON.stringify(path));
  };
  walk(obj, [], '');
  return out;
}

export function toFieldsV1(set: Set<string>): Json {
  const root: Json = {};
  const paths = [...set].map((p) => JSON.parse(p) as Path);
  for (const p of paths) {
    let node = root;
    for (const seg of p) node = node[seg] ??= {};
  }
  // An element that also has owned fields is marked itself with `.`.
  for (const p of paths) {
    const last = p[p.length - 1]!;
    if (!/^[kv]:/.test(last)) continue;
    const node = p.reduce<Json>((n, s) => n[s], root);
    if (Object.keys(node).length) node['.'] = {};
  }
  return root;
}

export function fromFieldsV1(fv: Json | undefined): Set<string> {
  const out = new Set<string>();
  const walk = (node: Json, path: Path) => {
    const keys = Object.keys(node);
    if (!keys.length) return void (path.length && out.add(JSON.stringify(path)));
    for (const k of keys) {
      if (k === '.') out.add(JSON.stringify(path));
      else walk(node[k] as Json, [...path, k]);
    }
  };
  if (fv) walk(fv, []);
  return out;
}

/** The element of `list` a `k:`/`v:` segment names, and its index. */
function findElement(list: unknown[], seg: string, field: string): number {
  if (seg.startsWith('v:')) return list.findIndex((x) => JSON.stringify(x) === seg.slice(2));
  const kind = listKind(field, list);
  if (kind === 'set' || kind === 'atomic') return -1;
  return list.findIndex((x) => keyOf(x as Json, kind) === seg);
}

/** The value at a member path, or undefined. */
export function valueAt(obj: unknown, path: Path): unknown {
  let v: unknown = obj;
  let field = '';
  for (const seg of path) {
    if (seg.startsWith('f:')) {
      field = seg.slice(2);
      v = isMap(v) ? v[field] : undefined;
    } else {
      if (!Array.isArray(v)) return undefined;
      const i = findElement(v, seg, field);
      v = i < 0 ? undefined : v[i];
    }
    if (v === undefined) return undefined;
  }
  return v;
}

function removeAt(obj: Json, path: Path): void {
  const parentPath = path.slice(0, -1);
  const parent = valueAt(obj, parentPath);
  const last = path[path.length - 1]!;
  if (last.startsWith('f:')) {
    if (isMap(parent)) delete parent[last.slice(2)];
  } else if (Array.isArray(parent)) {
    const field =
      [...parentPath]
        .reverse()
        .find((s) => s.startsWith('f:'))
        ?.slice(2) ?? '';
    const i = findElement(parent, last, field);
    if (i >= 0) parent.splice(i, 1);
  }
}

/** `applied` merged into `live`: maps recursively, keyed lists by key, sets by value, anything else replaced. */
export function merge(live: unknown, applied: unknown, field = ''): unknown {
  if (isMap(applied)) {
    const out: Json = isMap(live) ? { ...live } : {};
    for (const [k, v] of Object.entries(applied)) out[k] = merge(out[k], v, k);
    return out;
  }
  if (Array.isArray(applied) && Array.isArray(live)) {
    const kind = listKind(field, applied);
    if (kind === 'set')
      return [...live, ...applied.filter((a) => !live.some((l) => JSON.stringify(l) === JSON.stringify(a)))];
    if (kind !== 'atomic' && live.every((l) => isMap(l))) {
      const out = [...live] as Json[];
      for (const a of applied as Json[]) {
        const i = out.findIndex((l) => keyOf(l, kind) === keyOf(a, kind));
        if (i >= 0) out[i] = merge(out[i], a) as Json;
        else out.push(a);
      }
      return out;
    }
  }
  return structuredClone(applied);
}

export type ManagedEntry = {
  manager: string;
  operation: 'Apply' | 'Update';
  apiVersion: string;
  time: string;
  fieldsType: 'FieldsV1';
  fieldsV1: Json;
  subresource?: string;
};

export type ApplyOutcome = { object: Json } | { conflicts: { manager: string; field: string }[] };

/** The field path as the server writes it in a conflict (`.spec.replicas`, `.spec.template.spec.containers[name="agent"].image`). */
function dotted(path: Path): string {
  return path
    .map((s) =>
      s.startsWith('f:')
        ? `.${s.slice(2)}`
        : s.startsWith('v:')
          ? `[${s.slice(2)}]`
          : `[${Object.entries(JSON.parse(s.slice(2)) as Json)
              .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
              .join(',')}]`,
    )
    .join('');
}

/**
 * One apply of `applied` by `manager` onto `live` (undefined: the object is created). Returns the object to store,
 * with its managedFields, or the conflicts that refuse it.
 */
export function serverSideApply(
  live: Json | undefined,
  applied: Json,
  manager: string,
  force: boolean,
  apiVersion: string,
  now: string,
): ApplyOutcome {
  const ours = fieldSet(applied);
  const entries = ((live?.metadata?.managedFields ?? []) as ManagedEntry[]).filter((e) => e && e.manager);
  const mine = entries.find((e) => e.manager === manager && e.operation === 'Apply');
  const before = fromFieldsV1(mine?.fieldsV1);
  const others = entries.filter((e) => e !== mine).map((e) => ({ entry: e, set: fromFieldsV1(e.fieldsV1) }));
  const conflicts: { manager: string; field: string; path: string }[] = [];
  if (live) {
    for (const { entry, set } of others) {
      for (const p of ours) {
        if (!set.has(p)) continue;
        const path = JSON.parse(p) as Path;
        if (/^[kv]:/.test(path[path.length - 1]!)) continue; // an element shared by key is no conflict
        if (JSON.stringify(valueAt(live, path)) !== JSON.stringify(valueAt(applied, path)))
          conflicts.push({ manager: entry.manager, field: dotted(path), path: p });
      }
    }
  }
  if (conflicts.length && !force) return { conflicts };
  const taken = new Set(conflicts.map((c) => c.path));
  const otherSets = others.map(({ entry, set }) => ({
    entry,
    set: new Set([...set].filter((p) => !taken.has(p))),
  }));
  let object = merge(live ?? {}, applied) as Json;
  const removed = [...before]
    .filter((p) => !ours.has(p) && !otherSets.some((o) => o.set.has(p)))
    .map((p) => JSON.parse(p) as Path)
    .sort((a, b) => b.length - a.length);
  object = structuredClone(object);
  for (const p of removed) removeAt(object, p);
  const same = before.size === ours.size && [...ours].every((p) => before.has(p));
  const managedFields: ManagedEntry[] = [];
  for (const e of entries) {
    if (e === mine) continue;
    const o = otherSets.find((x) => x.entry === e)!;
    if (!o.set.size) continue;
    managedFields.push(o.set.size === fromFieldsV1(e.fieldsV1).size ? e : { ...e, fieldsV1: toFieldsV1(o.set) });
  }
  managedFields.push({
    manager,
    operation: 'Apply',
    apiVersion,
    time: same && mine ? mine.time : now,
    fieldsType: 'FieldsV1',
    fieldsV1: toFieldsV1(ours),
  });
  object.metadata = { ...object.metadata, managedFields };
  return { object };
}

/**
 * The field ownership a non-apply write (create, update/PUT, merge or JSON patch) records, as the real API server
 * does: `manager` (the fieldManager query parameter, else the User-Agent up to its first `/`) gets an `Update`
 * entry holding the fields it set or changed, on top of what that entry held; other managers lose the fields this
 * write changed; fields it removed leave every entry; entries left empty go. An update that changes nothing keeps
 * the entries as they were (time included). `old` undefined: a create, every field is the creator's.
 */
export function updateManagedFields(
  old: Json | undefined,
  next: Json,
  manager: string,
  apiVersion: string,
  now: string,
  subresource?: string,
): ManagedEntry[] {
  const entries = ((next.metadata?.managedFields ?? []) as ManagedEntry[]).filter((e) => e && e.operation);
  const before = old ? fieldSet(old) : new Set<string>();
  const after = fieldSet(next);
  const changed = new Set(
    [...after].filter((p) => {
      if (!before.has(p)) return true;
      const path = JSON.parse(p) as Path;
      return JSON.stringify(valueAt(old, path)) !== JSON.stringify(valueAt(next, path));
    }),
  );
  const removed = new Set([...before].filter((p) => !after.has(p)));
  if (!changed.size && !removed.size) return entries;
  const mine = entries.find(
    (e) => e.manager === manager && e.operation === 'Update' && (e.subresource ?? '') === (subresource ?? ''),
  );
  const out: ManagedEntry[] = [];
  for (const e of entries) {
    if (e === mine) continue;
    const set = fromFieldsV1(e.fieldsV1);
    const kept = new Set([...set].filter((p) => !changed.has(p) && !removed.has(p)));
    if (!kept.size) continue;
    out.push(kept.size === set.size ? e : { ...e, fieldsV1: toFieldsV1(kept) });
  }
  const own = new Set([...fromFieldsV1(mine?.fieldsV1), ...changed].filter((p) => !removed.has(p)));
  if (own.size)
    out.push({
      manager,
      operation: 'Update',
      apiVersion,
      time: now,
      fieldsType: 'FieldsV1',
      fieldsV1: toFieldsV1(own),
      ...(subresource ? { subresource } : {}),
    });
  return out;
}
