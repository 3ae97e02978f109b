// The object-metadata rules of the real API server (apimachinery's ValidateObjectMeta and the per-kind name
// validators): which name format each kind takes, label and annotation keys and values, the 256 KiB annotation
// budget, and the keys a Secret's or ConfigMap's data may have. Messages follow the server's wording.
import type { Cause } from './registry.ts';

type Json = Record<string, any>;

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const CONFIG_KEY = /^[-._a-zA-Z0-9]+$/;
export const TOTAL_ANNOTATION_BYTES = 256 * 1024;

/** How a kind's names are checked: most kinds take a DNS-1123 subdomain. */
export type NameRule = 'dns1123Subdomain' | 'dns1123Label' | 'dns1035Label' | 'pathSegment';

/** The name format of each kind whose validator differs from the DNS-1123 subdomain most kinds use. */
export const NAME_RULES: Record<string, NameRule> = {
  Namespace: 'dns1123Label',
  Service: 'dns1035Label',
  Role: 'pathSegment',
  ClusterRole: 'pathSegment',
  RoleBinding: 'pathSegment',
  ClusterRoleBinding: 'pathSegment',
};

/** Problems with a name under `rule`, in the server's words (empty when it is valid). */
export function nameProblems(name: string, rule: NameRule): string[] {
  switch (rule) {
    case 'dns1123Label':
      return [
        ...(name.length > 63 ? ['must be no more than 63 characters'] : []),
        ...(DNS1123_LABEL.test(name)
          ? []
          : [
              "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            ]),
      ];
    case 'dns1035Label':
      return [
        ...(name.length > 63 ? ['must be no more than 63 characters'] : []),
        ...(DNS1035_LABEL.test(name)
          ? []
          : [
              "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
            ]),
      ];
    case 'pathSegment':
      if (name === '.' || name === '..') return [`may not be '${name}'`];
      return name.includes('/') ? ["may not contain '/'"] : name.includes('%') ? ["may not contain '%'"] : [];
    default:
      return subdomainProblems(name);
  }
}

function subdomainProblems(name: string): string[] {
  return [
    ...(name.length > 253 ? ['must be no more than 253 characters'] : []),
    ...(DNS1123_SUBDOMAIN.test(name)
      ? []
      : [
          "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ]),
  ];
}

/** A qualified name (label or annotation key): an optional DNS subdomain prefix and a 63-character name part. */
export function qualifiedNameProblems(key: string): string[] {
  const parts = key.split('/');
  if (parts.length > 2)
    return [
      "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
    ];
  const [prefix, name] = parts.length === 2 ? [parts[0]!, parts[1]!] : ['', parts[0]!];
  const out: string[] = [];
  if (parts.length === 2) {
    if (!prefix) out.push('prefix part must be non-empty');
    else out.push(...subdomainProblems(prefix).map((p) => `prefix part ${p}`));
  }
  if (!name) out.push('name part must be non-empty');
  else {
    if (name.length > 63) out.push('name part must be no more than 63 characters');
    if (!QUALIFIED_NAME.test(name))
      out.push(
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
      );
  }
  return out;
}

export function labelValueProblems(value: unknown): string[] {
  if (typeof value !== 'string') return ['must be a string'];
  return [
    ...(value.length > 63 ? ['must be no more than 63 characters'] : []),
    ...(LABEL_VALUE.test(value)
      ? []
      : [
          "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ]),
  ];
}

const invalid = (field: string, value: string, message: string): Cause => ({
  field,
  message: `Invalid value: "${value}": ${message}`,
  reason: 'FieldValueInvalid',
});

/** Causes for a label map at `field` (metadata.labels, a template's labels, a selector's matchLabels). */
export function labelCauses(labels: unknown, field: string): Cause[] {
  if (!labels || typeof labels !== 'object') return [];
  const causes: Cause[] = [];
  for (const [k, v] of Object.entries(labels as Json)) {
    for (const p of qualifiedNameProblems(k)) causes.push(invalid(field, k, p));
    for (const p of labelValueProblems(v)) causes.push(invalid(field, String(v), p));
  }
  return causes;
}

/** Causes for annotations: qualified keys (lower-case prefix) and at most 256 KiB of keys and values together. */
export function annotationCauses(annotations: unknown, field: string): Cause[] {
  if (!annotations || typeof annotations !== 'object') return [];
  const causes: Cause[] = [];
  let total = 0;
  for (const [k, v] of Object.entries(annotations as Json)) {
    for (const p of qualifiedNameProblems(k.toLowerCase())) causes.push(invalid(field, k, p));
    total += Buffer.byteLength(k) + Buffer.byteLength(String(v));
  }
  if (total > TOTAL_ANNOTATION_BYTES)
    causes.push({
      field,
      message: `Too long: must have at most ${TOTAL_ANNOTATION_BYTES} bytes`,
      reason: 'FieldValueTooLong',
    });
  return causes;
}

/** The metadata rules every kind shares, with the kind's own name format. */
export function metaCauses(obj: Json, rule: NameRule = 'dns1123Subdomain'): Cause[] {
  const causes: Cause[] = [];
  const m = obj.metadata ?? {};
  if (typeof m.name !== 'string' || !m.name) {
    causes.push({
      field: 'metadata.name',
      message: 'Required value: name or generateName is required',
      reason: 'FieldValueRequired',
    });
  } else {
    for (const p of nameProblems(m.name, rule)) causes.push(invalid('metadata.name', m.name, p));
  }
  if (typeof m.generateName === 'string' && m.generateName.length > 0) {
    // generateName is checked as a name with a random suffix to come (the server masks its trailing '-').
    for (const p of nameProblems(`${m.generateName.replace(/-$/, '')}`, rule))
      causes.push(invalid('metadata.generateName', m.generateName, p));
  }
  causes.push(...labelCauses(m.labels, 'metadata.labels'));
  causes.push(...annotationCauses(m.annotations, 'metadata.annotations'));
  for (const [i, f] of ((m.finalizers ?? []) as unknown[]).entries()) {
    for (const p of qualifiedNameProblems(String(f))) causes.push(invalid(`metadata.finalizers[${i}]`, String(f), p));
  }
  return causes;
}

/** Keys of a Secret's or ConfigMap's data and binaryData: `[-._a-zA-Z0-9]+`, at most 253, not `.`/`..`. */
export function configKeyCauses(obj: Json): Cause[] {
  const causes: Cause[] = [];
  const seen = new Set<string>();
  for (const field of ['data', 'binaryData', 'stringData']) {
    for (const key of Object.keys(obj[field] ?? {})) {
      const problems: string[] = [];
      if (key.length > 253) problems.push('must be no more than 253 characters');
      if (!CONFIG_KEY.test(key))
        problems.push(
          "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
        );
      if (key === '.' || key === '..') problems.push(`must not be '${key}'`);
      else if (key.startsWith('..')) problems.push("must not start with '..'");
      for (const p of problems) causes.push(invalid(`${field}[${key}]`, key, p));
      if (obj.kind === 'ConfigMap' && field === 'binaryData' && seen.has(key))
        causes.push(invalid(`binaryData[${key}]`, key, 'duplicate of key present in data'));
      seen.add(key);
    }
  }
  return causes;
}
