// The admission path of a built-in kind, in the real server's order: decode (unknown fields dropped and reported,
// quantities parsed — a bad one is a 400 before anything else), defaulting, then validation (metadata with the
// kind's name format, the kind's own rules, the official OpenAPI schema) and, on update, the immutable fields.
import type { Cause } from './registry.ts';
import { decode, modelName } from './fields.ts';
import { metaCauses, NAME_RULES } from './meta.ts';
import { QuantityError } from './quantity.ts';
import type { KindRules } from './workloads.ts';

type Json = Record<string, any>;
/** A kubernetes-models class: validates against the official Kubernetes OpenAPI schema. */
export type ModelClass = new (data: never) => { validate(): void };

export type Admission =
  | { object: Json; unknown?: string[] }
  | { causes: Cause[] }
  /** Refused by the decoder (400 BadRequest), e.g. a malformed quantity. */
  | { badRequest: string };

export type BuiltinAdmission = {
  version: string;
  kind: string;
  model: ModelClass;
  rules?: KindRules;
  /** Kind-specific rewriting before defaults (Secret stringData folded into data...). */
  normalize?: (obj: Json, old?: Json) => Json;
  /** Kind-specific validation besides the rules (data limits...). */
  extra?: (obj: Json, old?: Json) => Cause[];
};

export function schemaCauses(Model: ModelClass, object: Json): Cause[] {
  try {
    new Model(structuredClone(object) as never).validate();
    return [];
  } catch (err) {
    type SchemaError = {
      instancePath: string;
      message?: string;
      keyword: string;
      params?: { missingProperty?: string };
    };
    const errors = (err as { errors?: SchemaError[] }).errors ?? [];
    if (!errors.length) return [{ field: '<root>', message: (err as Error).message, reason: 'FieldValueInvalid' }];
    return errors.map((e) => {
      const path = e.instancePath.split('/').filter(Boolean);
      // The real server names the missing field itself ("spec.selector: Required value"), not the object holding it.
      if (e.keyword === 'required' && e.params?.missingProperty) path.push(e.params.missingProperty);
      return {
        field: path.join('.') || '<root>',
        message: e.keyword === 'required' ? 'Required value' : (e.message ?? 'invalid'),
        reason: e.keyword === 'required' ? 'FieldValueRequired' : 'FieldValueInvalid',
      };
    });
  }
}

export function admitBuiltin(a: BuiltinAdmission, obj: Json, old?: Json): Admission {
  const type = modelName(a.version, a.kind);
  const decoded = type ? decode(obj, type) : { object: obj, unknown: [] };
  let object: Json;
  try {
    object = a.normalize ? a.normalize(decoded.object, old) : decoded.object;
    if (a.rules?.defaults) object = a.rules.defaults(object, old);
  } catch (err) {
    if (err instanceof QuantityError)
      return {
        badRequest: `${a.kind} in version "${a.version}" cannot be handled as a ${a.kind}: ${err.message}`,
      };
    throw err;
  }
  // The kind's own rules assume the shapes the schema promises, so they run only on a schema-valid object.
  const schema = schemaCauses(a.model, object);
  const causes = [...metaCauses(object, NAME_RULES[a.kind]), ...(a.extra?.(object, old) ?? []), ...schema];
  if (!schema.length) {
    causes.push(...(a.rules?.validate?.(object) ?? []));
    if (old && a.rules?.immutable) causes.push(...a.rules.immutable(object, old));
  }
  return causes.length ? { causes } : { object, unknown: decoded.unknown };
}
