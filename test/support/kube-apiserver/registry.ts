// Kinds the test API server serves. Custom kinds come from the CRD files in crds/ (validated with their
// openAPIV3Schema); built-in kinds register with their own validator. H5 adds more built-ins with `register`.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv, type ValidateFunction } from 'ajv';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { Secret } from 'kubernetes-models/v1/Secret';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { parse } from 'yaml';
import { admitBuiltin, type Admission, type ModelClass } from './admit.ts';
import { configKeyCauses, metaCauses } from './meta.ts';
import { RULES } from './workloads.ts';

export type Cause = { field: string; message: string; reason: string };
type Json = Record<string, any>;

export type KindSpec = {
  /** '' for the core group (served under /api/v1). */
  group: string;
  version: string;
  plural: string;
  kind: string;
  namespaced: boolean;
  /** Has a /status subresource: create drops status, PUT keeps it, PUT .../status writes only it. */
  statusSubresource: boolean;
  /** Custom resources need metadata.resourceVersion on update; built-ins allow unconditional updates. */
  requireResourceVersionOnUpdate: boolean;
  /** Bumps metadata.generation on changes outside metadata and status. */
  tracksGeneration: boolean;
  /**
   * What a DELETE without propagationPolicy does to the object's dependents: Background for most kinds; batch/v1
   * Jobs (and ReplicationControllers) keep the old default, Orphan.
   */
  defaultPropagation?: 'Background' | 'Orphan';
  /**
   * Returns the object after decoding (unknown fields dropped and listed), defaulting and validation, or causes
   * (422), or a decoder refusal (400). `old` is set on update.
   */
  admit(obj: Json, old?: Json): Admission;
};

export class KindRegistry {
  private readonly kinds = new Map<string, KindSpec>();

  register(spec: KindSpec): void {
    this.kinds.set(`${spec.group}/${spec.version}/${spec.plural}`, spec);
  }

  lookup(group: string, version: string, plural: string): KindSpec | undefined {
    return this.kinds.get(`${group}/${version}/${plural}`);
  }

  all(): KindSpec[] {
    return [...this.kinds.values()];
  }
}

/** Drops fields the structural schema does not know (the API server prunes instead of rejecting). */
function prune(value: unknown, schema: Json | undefined, path = '', unknown: string[] = []): unknown {
  if (!schema || value === null || typeof value !== 'object') return value;
  if (schema['x-kubernetes-preserve-unknown-fields']) return value;
  if (Array.isArray(value)) return value.map((v, i) => prune(v, schema.items, `${path}[${i}]`, unknown));
  const out: Json = {};
  for (const [k, v] of Object.entries(value as Json)) {
    const field = path ? `${path}.${k}` : k;
    if (schema.properties?.[k]) out[k] = prune(v, schema.properties[k], field, unknown);
    else if (schema.additionalProperties && typeof schema.additionalProperties === 'object')
      out[k] = prune(v, schema.additionalProperties, `${path}[${k}]`, unknown);
    else if (schema.additionalProperties === true) out[k] = v;
    else unknown.push(field);
  }
  return out;
}

/**
 * The transition rules this server evaluates (CEL in a real cluster); others are refused, unless `otherCel` says
 * to pass over them (CRDs of other projects: the kube tier's real API server runs their rules).
 */
function transitionCauses(schema: Json, obj: unknown, old: unknown, path: string, otherCel: CelPolicy): Cause[] {
  const causes: Cause[] = [];
  for (const rule of (schema['x-kubernetes-validations'] ?? []) as { rule: string; message?: string }[]) {
    if (rule.rule !== 'self == oldSelf') {
      if (otherCel === 'skip') continue;
      throw new Error(`kube-apiserver double: unsupported CEL rule ${rule.rule}`);
    }
    if (old !== undefined && JSON.stringify(canon(obj)) !== JSON.stringify(canon(old))) {
      causes.push({
        field: path,
        message: `Invalid value: "object": ${rule.message ?? 'failed rule'}`,
        reason: 'FieldValueInvalid',
      });
    }
  }
  if (schema.properties && obj && typeof obj === 'object') {
    for (const [k, s] of Object.entries<Json>(schema.properties)) {
      const o = (obj as Json)[k];
      const p = old && typeof old === 'object' ? (old as Json)[k] : undefined;
      if (o !== undefined && p !== undefined) causes.push(...transitionCauses(s, o, p, `${path}.${k}`, otherCel));
    }
  }
  return causes;
}

function canon(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canon);
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.entries(v)
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([k, x]) => [k, canon(x)]),
    );
  return v;
}

// Formats of Kubernetes OpenAPI that ajv does not know: accepted as the type alone says (the API server checks
// int32/int64 ranges and timestamps too, which no test relies on).
const ajv = new Ajv({ allErrors: true, strict: false, formats: { int32: true, int64: true, 'date-time': true } });

/** OpenAPI v3.0 (what CRDs use) to the JSON Schema ajv validates: boolean exclusive bounds become numeric. */
function toJsonSchema(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(toJsonSchema);
  if (!node || typeof node !== 'object') return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node as Json)) out[k] = k === 'enum' || k === 'default' ? v : toJsonSchema(v);
  for (const [flag, bound] of [
    ['exclusiveMinimum', 'minimum'],
    ['exclusiveMaximum', 'maximum'],
  ] as const) {
    if (typeof out[flag] === 'boolean') {
      if (out[flag]) out[flag] = out[bound];
      else delete out[flag];
      if (out[flag] !== undefined) delete out[bound];
    }
  }
  return out;
}

/**
 * The structural-schema rules the real server enforces when a CRD is created: every node has a type (unless it
 * preserves unknown fields), no $ref, no additionalProperties next to properties, no additionalProperties: false.
 */
export function structuralProblems(node: Json, path = ''): string[] {
  const problems: string[] = [];
  if (!node.type && !node['x-kubernetes-preserve-unknown-fields'] && !node['x-kubernetes-int-or-string'])
    problems.push(`${path || '<root>'}: type is required`);
  if ('$ref' in node) problems.push(`${path}: $ref is not allowed`);
  if (node.properties && node.additionalProperties !== undefined)
    problems.push(`${path}: properties and additionalProperties are mutually exclusive`);
  if (node.additionalProperties === false) problems.push(`${path}: additionalProperties: false is not allowed`);
  for (const [k, v] of Object.entries<Json>(node.properties ?? {}))
    problems.push(...structuralProblems(v, `${path}.${k}`));
  if (node.items) problems.push(...structuralProblems(node.items, `${path}[]`));
  if (node.additionalProperties && typeof node.additionalProperties === 'object')
    problems.push(...structuralProblems(node.additionalProperties, `${path}{}`));
  return problems;
}

type CelPolicy = 'refuse' | 'skip';

/**
 * Registers every CRD found in `dir` (apiextensions.k8s.io/v1, one per file), or only the `files` named; refuses
 * non-structural ones. `otherCel: 'skip'` admits objects without the CEL rules this server cannot evaluate (the
 * OpenAPI schema still applies): for CRDs of other projects, whose rules only a real API server runs.
 */
export function registerCrds(
  registry: KindRegistry,
  dir: string,
  { files, otherCel = 'refuse' }: { files?: string[]; otherCel?: CelPolicy } = {},
): void {
  const names = files ?? readdirSync(dir).filter((f) => f.endsWith('.yaml'));
  for (const file of names) {
    const crd = parse(readFileSync(join(dir, file), 'utf8')) as Json;
    if (crd.kind !== 'CustomResourceDefinition') continue;
    for (const v of crd.spec.versions as Json[]) {
      const schema = v.schema.openAPIV3Schema as Json;
      const problems = structuralProblems(schema);
      if (problems.length) throw new Error(`${file}: CRD schema is not structural: ${problems.join('; ')}`);
      const validate: ValidateFunction = ajv.compile(toJsonSchema(schema) as Json);
      registry.register({
        group: crd.spec.group,
        version: v.name,
        plural: crd.spec.names.plural,
        kind: crd.spec.names.kind,
        namespaced: crd.spec.scope === 'Namespaced',
        statusSubresource: Boolean(v.subresources?.status),
        requireResourceVersionOnUpdate: true,
        tracksGeneration: true,
        admit(obj, old) {
          const { metadata, apiVersion, kind, ...rest } = obj;
          const unknown: string[] = [];
          const pruned = { ...(prune(rest, schema, '', unknown) as Json), apiVersion, kind, metadata };
          const causes = metaCauses(pruned);
          if (!validate(pruned)) {
            for (const e of validate.errors ?? []) {
              const path = e.instancePath.split('/').filter(Boolean);
              // As the real server: the missing field itself, not the object holding it.
              const missing =
                e.keyword === 'required' ? (e.params as { missingProperty?: string }).missingProperty : '';
              if (missing) path.push(missing);
              causes.push({
                field: path.join('.') || '<root>',
                message: missing ? 'Required value' : `${e.message ?? 'invalid'}`,
                reason: e.keyword === 'required' ? 'FieldValueRequired' : 'FieldValueInvalid',
              });
            }
          }
          causes.push(...transitionCauses(schema, pruned, old, '<root>', otherCel));
          return causes.length ? { causes } : { object: pruned, unknown };
        },
      });
    }
  }
}

/**
 * A built-in kind validated with the official schema (kubernetes-models), the metadata rules and the kind's own
 * rules (workloads.ts), as admitBuiltin runs them: `registry.register(builtinKind({...}, Deployment))`.
 */
export function builtinKind(
  spec: Omit<KindSpec, 'admit' | 'requireResourceVersionOnUpdate'> & { requireResourceVersionOnUpdate?: boolean },
  Model: ModelClass,
  normalize: (obj: Json) => Json = (o) => o,
  extra: (obj: Json) => Cause[] = () => [],
): KindSpec {
  return {
    requireResourceVersionOnUpdate: false,
    ...spec,
    admit(obj, old) {
      return admitBuiltin(
        {
          version: spec.version,
          kind: spec.kind,
          model: Model,
          rules: RULES[spec.kind],
          normalize,
          extra: (object) => [...extra(object), ...immutableData(object, old)],
        },
        obj,
        old,
      );
    },
  };
}

/** An immutable Secret or ConfigMap keeps its data (and stays immutable) for good. */
function immutableData(object: Json, old: Json | undefined): Cause[] {
  return old?.immutable === true &&
    (object.immutable !== true ||
      JSON.stringify(object.data ?? {}) !== JSON.stringify(old.data ?? {}) ||
      JSON.stringify(object.binaryData ?? {}) !== JSON.stringify(old.binaryData ?? {}))
    ? [
        {
          field: 'data',
          message: 'Forbidden: field is immutable when `immutable` is set',
          reason: 'FieldValueForbidden',
        },
      ]
    : [];
}

/** The API server refuses Secrets and ConfigMaps whose data exceeds 1 MiB (etcd's object limit is near it too). */
export const MAX_DATA_BYTES = 1024 * 1024;

/** Bytes of a ConfigMap's or Secret's data as the server counts them (keys plus values; Secret values decoded). */
function dataSize(obj: Json, base64: boolean): number {
  let n = 0;
  for (const [k, v] of Object.entries<unknown>({ ...(obj.data ?? {}), ...(obj.binaryData ?? {}) })) {
    n +=
      Buffer.byteLength(k) +
      (base64 || k in (obj.binaryData ?? {}) ? Buffer.from(String(v), 'base64').length : Buffer.byteLength(String(v)));
  }
  return n;
}

function withinDataLimit(base64: boolean) {
  return (obj: Json): Cause[] => [
    ...configKeyCauses(obj),
    ...(dataSize(obj, base64) > MAX_DATA_BYTES
      ? [{ field: 'data', message: `Too long: must have at most ${MAX_DATA_BYTES} bytes`, reason: 'FieldValueTooLong' }]
      : []),
  ];
}

/**
 * Namespaces as the real server keeps them: a DNS label name, the `kubernetes.io/metadata.name` label always equal
 * to the name, and the `kubernetes` finalizer in spec (removed by the namespace controller once the namespace is
 * empty) with phase Active from creation.
 */
export const namespaceKind: KindSpec = builtinKind(
  {
    group: '',
    version: 'v1',
    plural: 'namespaces',
    kind: 'Namespace',
    namespaced: false,
    statusSubresource: true,
    tracksGeneration: false,
  },
  Namespace,
  (obj) => ({
    ...obj,
    metadata: {
      ...obj.metadata,
      labels: { ...(obj.metadata?.labels ?? {}), 'kubernetes.io/metadata.name': obj.metadata?.name },
    },
  }),
);
{
  const admit = namespaceKind.admit;
  namespaceKind.admit = (obj, old) => {
    // spec.finalizers changes only through the namespace controller (the finalize subresource), never on update.
    const spec = old
      ? { ...(obj.spec ?? {}), finalizers: old.spec?.finalizers ?? [] }
      : { ...(obj.spec ?? {}), finalizers: ['kubernetes'] };
    const status = old ? obj.status : { phase: 'Active' };
    return admit({ ...obj, spec, ...(status ? { status } : {}) }, old);
  };
}

/** Namespace, Secret, ConfigMap and ServiceAccount, the built-ins the control plane store uses. */
export function registerCoreKinds(registry: KindRegistry): void {
  registry.register(namespaceKind);
  registry.register(
    builtinKind(
      {
        group: '',
        version: 'v1',
        plural: 'secrets',
        kind: 'Secret',
        namespaced: true,
        statusSubresource: false,
        tracksGeneration: false,
      },
      Secret,
      // The server folds stringData into data (base64) and defaults the type.
      (obj) => {
        const data = { ...(obj.data ?? {}) } as Json;
        for (const [k, v] of Object.entries<unknown>(obj.stringData ?? {}))
          data[k] = Buffer.from(String(v)).toString('base64');
        const { stringData: _s, ...rest } = obj;
        return { ...rest, type: obj.type ?? 'Opaque', data };
      },
      withinDataLimit(true),
    ),
  );
  registry.register(
    builtinKind(
      {
        group: '',
        version: 'v1',
        plural: 'configmaps',
        kind: 'ConfigMap',
        namespaced: true,
        statusSubresource: false,
        tracksGeneration: false,
      },
      ConfigMap,
      (o) => o,
      withinDataLimit(false),
    ),
  );
  // Read by the control plane to check that a deployment's service_account_name belongs to its tenant.
  registry.register(
    builtinKind(
      {
        group: '',
        version: 'v1',
        plural: 'serviceaccounts',
        kind: 'ServiceAccount',
        namespaced: true,
        statusSubresource: false,
        tracksGeneration: false,
      },
      ServiceAccount,
    ),
  );
}
