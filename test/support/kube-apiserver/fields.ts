// What the real server's decoder does with the JSON of a built-in object before validation, driven by the type
// maps of the official client's generated models (@kubernetes/client-node, from the Kubernetes OpenAPI): fields
// the schema does not declare are dropped and reported (`unknown field "spec.foo"`, the field validation "Warn"
// default; "Strict" refuses them), and what Go's encoder would omit on read back is omitted — null fields, empty
// maps and empty lists. Empty structs stay (`resources: {}`), as the server returns them.
import * as models from '@kubernetes/client-node';

type Json = Record<string, any>;
type Attribute = { name: string; baseName: string; type: string };
type Model = { attributeTypeMap?: Attribute[] };

const registry = models as unknown as Record<string, Model | undefined>;
const ARRAY = /^Array<(.+)>$/;
const MAP = /^\{ \[key: string\]: (.+); \}$/;

/** The client model class of a built-in kind (`V1Deployment`, `V2HorizontalPodAutoscaler`), if there is one. */
export function modelName(version: string, kind: string): string | undefined {
  const name = `${version[0]!.toUpperCase()}${version.slice(1)}${kind}`;
  return registry[name]?.attributeTypeMap ? name : undefined;
}

export type Decoded = { object: Json; unknown: string[] };

/** Decodes `obj` as the model `type`: unknown fields dropped (and listed), omitempty fields omitted. */
export function decode(obj: Json, type: string): Decoded {
  const unknown: string[] = [];
  const object = walk(obj, type, '', unknown) as Json;
  return { object, unknown };
}

function walk(value: unknown, type: string, path: string, unknown: string[]): unknown {
  if (value === null || value === undefined) return undefined;
  const list = ARRAY.exec(type);
  if (list) {
    if (!Array.isArray(value)) return value;
    return value.map((v, i) => walk(v, list[1]!, `${path}[${i}]`, unknown) ?? null);
  }
  const map = MAP.exec(type);
  if (map) {
    if (typeof value !== 'object' || Array.isArray(value)) return value;
    const out: Json = {};
    for (const [k, v] of Object.entries(value as Json)) {
      const w = walk(v, map[1]!, `${path}[${k}]`, unknown);
      if (w !== undefined) out[k] = w;
    }
    return out;
  }
  const model = registry[type];
  if (!model?.attributeTypeMap || typeof value !== 'object' || Array.isArray(value)) return value;
  const attrs = new Map(model.attributeTypeMap.map((a) => [a.baseName, a]));
  const out: Json = {};
  for (const [k, v] of Object.entries(value as Json)) {
    const field = path ? `${path}.${k}` : k;
    const a = attrs.get(k);
    if (!a) {
      unknown.push(field);
      continue;
    }
    const w = walk(v, a.type, field, unknown);
    if (w === undefined) continue;
    if ((ARRAY.test(a.type) || MAP.test(a.type)) && isEmpty(w)) continue;
    out[k] = w;
  }
  return out;
}

function isEmpty(v: unknown): boolean {
  return Array.isArray(v) ? v.length === 0 : Boolean(v) && typeof v === 'object' && !Object.keys(v as Json).length;
}
