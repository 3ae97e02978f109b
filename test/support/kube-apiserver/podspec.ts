// A pod spec as the real server admits it, wherever it appears (a Pod, a workload's template): quantities in
// canonical form (bad ones refused by the decoder), the defaults the server fills in (SetDefaults_PodSpec and
// SetDefaults_Container), and the validation rules an operator's pod specs are most likely to break.
import type { Cause } from './registry.ts';
import { nameProblems } from './meta.ts';
import { canonicalQuantity, compareQuantities, parseQuantity } from './quantity.ts';

type Json = Record<string, any>;

const CONTAINER_LISTS = ['initContainers', 'containers', 'ephemeralContainers'] as const;
const VOLUME_MODES = ['secret', 'configMap', 'downwardAPI', 'projected'] as const;
const IANA_SVC_NAME = /^[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$/;
const ENV_NAME = /^[-._a-zA-Z][-._a-zA-Z0-9]*$/;

/** Canonical quantities in a resource map (requests/limits); throws QuantityError for a malformed one. */
export function canonicalResources(map: Json | undefined): Json | undefined {
  if (!map || typeof map !== 'object') return map;
  return Object.fromEntries(Object.entries(map).map(([k, v]) => [k, canonicalQuantity(v as string)]));
}

function canonicalRequirements(r: Json | undefined): Json | undefined {
  if (!r || typeof r !== 'object') return r;
  const out = { ...r };
  if (r.requests) out.requests = canonicalResources(r.requests);
  if (r.limits) out.limits = canonicalResources(r.limits);
  return out;
}

/** The image's pull policy default: Always for `:latest` or an untagged image, IfNotPresent otherwise. */
export function defaultPullPolicy(image: string | undefined): string {
  if (!image) return 'IfNotPresent';
  if (image.includes('@')) return 'IfNotPresent';
  const last = image.slice(image.lastIndexOf('/') + 1);
  const tag = last.includes(':') ? last.slice(last.indexOf(':') + 1) : '';
  return !tag || tag === 'latest' ? 'Always' : 'IfNotPresent';
}

function defaultProbe(p: Json | undefined): Json | undefined {
  if (!p) return p;
  return {
    timeoutSeconds: 1,
    periodSeconds: 10,
    successThreshold: 1,
    failureThreshold: 3,
    ...p,
    ...(p.httpGet ? { httpGet: { scheme: 'HTTP', ...p.httpGet } } : {}),
  };
}

function defaultContainer(c: Json, isPod: boolean): Json {
  const out: Json = {
    ...c,
    imagePullPolicy: c.imagePullPolicy ?? defaultPullPolicy(c.image),
    terminationMessagePath: c.terminationMessagePath ?? '/dev/termination-log',
    terminationMessagePolicy: c.terminationMessagePolicy ?? 'File',
    resources: canonicalRequirements(c.resources) ?? {},
  };
  // Only a Pod (not a template) gets requests filled in from limits.
  if (isPod && out.resources.limits) {
    out.resources = { ...out.resources, requests: { ...out.resources.limits, ...(out.resources.requests ?? {}) } };
  }
  if (c.ports) out.ports = c.ports.map((p: Json) => ({ protocol: 'TCP', ...p }));
  if (c.env)
    out.env = c.env.map((e: Json) =>
      e.valueFrom?.fieldRef
        ? { ...e, valueFrom: { ...e.valueFrom, fieldRef: { apiVersion: 'v1', ...e.valueFrom.fieldRef } } }
        : e,
    );
  for (const probe of ['livenessProbe', 'readinessProbe', 'startupProbe']) {
    if (c[probe]) out[probe] = defaultProbe(c[probe]);
  }
  return out;
}

/** The pod spec with the server's defaults; `isPod` adds what only Pods get (not workload templates). */
export function defaultPodSpec(spec: Json, isPod: boolean): Json {
  const out: Json = {
    ...spec,
    restartPolicy: spec.restartPolicy ?? 'Always',
    terminationGracePeriodSeconds: spec.terminationGracePeriodSeconds ?? 30,
    dnsPolicy: spec.dnsPolicy ?? 'ClusterFirst',
    securityContext: spec.securityContext ?? {},
    schedulerName: spec.schedulerName ?? 'default-scheduler',
  };
  for (const list of CONTAINER_LISTS) {
    if (Array.isArray(spec[list])) out[list] = spec[list].map((c: Json) => defaultContainer(c, isPod));
  }
  if (Array.isArray(spec.volumes)) {
    out.volumes = spec.volumes.map((v: Json) => {
      const w = { ...v };
      for (const mode of VOLUME_MODES) if (w[mode]) w[mode] = { defaultMode: 420, ...w[mode] };
      if (w.emptyDir?.sizeLimit !== undefined)
        w.emptyDir = { ...w.emptyDir, sizeLimit: canonicalQuantity(w.emptyDir.sizeLimit) };
      return w;
    });
  }
  if (spec.overhead) out.overhead = canonicalResources(spec.overhead);
  if (spec.resources) out.resources = canonicalRequirements(spec.resources);
  // serviceAccount is the deprecated alias the server keeps equal to serviceAccountName.
  if (isPod) {
    out.serviceAccountName = spec.serviceAccountName ?? spec.serviceAccount ?? 'default';
    out.enableServiceLinks = spec.enableServiceLinks ?? true;
    out.priority = spec.priority ?? 0;
    out.preemptionPolicy = spec.preemptionPolicy ?? 'PreemptLowerPriority';
  }
  if (out.serviceAccountName) out.serviceAccount = out.serviceAccountName;
  return out;
}

const invalid = (field: string, value: unknown, message: string): Cause => ({
  field,
  message: `Invalid value: ${JSON.stringify(value)}: ${message}`,
  reason: 'FieldValueInvalid',
});

/**
 * Validation of a (defaulted) pod spec at `path` (e.g. `spec.template.spec`); `claims` are volume names a
 * StatefulSet's volumeClaimTemplates add.
 */
export function podSpecCauses(spec: Json | undefined, path: string, claims: string[] = []): Cause[] {
  if (!spec || typeof spec !== 'object') return [];
  const causes: Cause[] = [];
  const volumes = new Set<string>(claims);
  for (const [i, v] of ((spec.volumes ?? []) as Json[]).entries()) {
    const f = `${path}.volumes[${i}].name`;
    if (typeof v.name !== 'string' || !v.name)
      causes.push({ field: f, message: 'Required value', reason: 'FieldValueRequired' });
    else {
      for (const p of nameProblems(v.name, 'dns1123Label')) causes.push(invalid(f, v.name, p));
      if (volumes.has(v.name))
        causes.push({ field: f, message: `Duplicate value: "${v.name}"`, reason: 'FieldValueDuplicate' });
      volumes.add(v.name);
    }
  }
  if (!Array.isArray(spec.containers) || !spec.containers.length)
    causes.push({ field: `${path}.containers`, message: 'Required value', reason: 'FieldValueRequired' });
  const names = new Set<string>();
  for (const list of CONTAINER_LISTS) {
    for (const [i, c] of ((spec[list] ?? []) as Json[]).entries()) {
      const at = `${path}.${list}[${i}]`;
      if (typeof c.name !== 'string' || !c.name)
        causes.push({ field: `${at}.name`, message: 'Required value', reason: 'FieldValueRequired' });
      else {
        for (const p of nameProblems(c.name, 'dns1123Label')) causes.push(invalid(`${at}.name`, c.name, p));
        if (names.has(c.name))
          causes.push({ field: `${at}.name`, message: `Duplicate value: "${c.name}"`, reason: 'FieldValueDuplicate' });
        names.add(c.name);
      }
      if (!c.image) causes.push({ field: `${at}.image`, message: 'Required value', reason: 'FieldValueRequired' });
      for (const [j, m] of ((c.volumeMounts ?? []) as Json[]).entries()) {
        if (!volumes.has(m.name))
          causes.push({
            field: `${at}.volumeMounts[${j}].name`,
            message: `Not found: "${m.name}"`,
            reason: 'FieldValueNotFound',
          });
      }
      for (const [j, p] of ((c.ports ?? []) as Json[]).entries()) {
        if (p.name !== undefined && (!IANA_SVC_NAME.test(p.name) || !/[a-z]/.test(p.name)))
          causes.push(
            invalid(`${at}.ports[${j}].name`, p.name, 'must be no more than 15 characters and a valid IANA_SVC_NAME'),
          );
      }
      for (const [j, e] of ((c.env ?? []) as Json[]).entries()) {
        if (!ENV_NAME.test(String(e.name ?? '')))
          causes.push(
            invalid(
              `${at}.env[${j}].name`,
              e.name,
              "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit",
            ),
          );
      }
      causes.push(...resourceCauses(c.resources, `${at}.resources`));
    }
  }
  if (spec.restartPolicy && !['Always', 'OnFailure', 'Never'].includes(spec.restartPolicy))
    causes.push({
      field: `${path}.restartPolicy`,
      message: `Unsupported value: "${spec.restartPolicy}": supported values: "Always", "OnFailure", "Never"`,
      reason: 'FieldValueNotSupported',
    });
  return causes;
}

/** Requests and limits: none negative, and no request above its limit. */
export function resourceCauses(r: Json | undefined, path: string): Cause[] {
  if (!r) return [];
  const causes: Cause[] = [];
  for (const kind of ['requests', 'limits']) {
    for (const [name, q] of Object.entries<string>(r[kind] ?? {})) {
      if (parseQuantity(q).mantissa < 0n)
        causes.push(invalid(`${path}.${kind}[${name}]`, q, 'must be greater than or equal to 0'));
    }
  }
  for (const [name, q] of Object.entries<string>(r.requests ?? {})) {
    const limit = r.limits?.[name];
    if (limit !== undefined && compareQuantities(q, limit) > 0)
      causes.push(invalid(`${path}.requests`, q, `must be less than or equal to ${name} limit of ${limit}`));
  }
  return causes;
}
