// Per-kind defaults, validation and immutable fields of the built-in kinds an operator writes, as the real server
// applies them (pkg/apis/*/v1/defaults.go, pkg/apis/*/validation, the registries' update strategies).
import type { Cause } from './registry.ts';
import { labelCauses, nameProblems } from './meta.ts';
import { canonicalResources, defaultPodSpec, podSpecCauses } from './podspec.ts';
import { canonicalQuantity } from './quantity.ts';

type Json = Record<string, any>;
export type KindRules = {
  defaults?: (obj: Json, old?: Json) => Json;
  validate?: (obj: Json) => Cause[];
  immutable?: (obj: Json, old: Json) => Cause[];
};

const same = (a: unknown, b: unknown) => JSON.stringify(canon(a)) === JSON.stringify(canon(b));
function canon(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canon);
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.entries(v)
        .filter(([, x]) => x !== undefined)
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([k, x]) => [k, canon(x)]),
    );
  return v;
}

const immutable = (field: string, value: unknown): Cause => ({
  field,
  message: `Invalid value: ${JSON.stringify(value ?? null)}: field is immutable`,
  reason: 'FieldValueInvalid',
});

/** A pod template (`spec.template`) with its pod spec defaulted. */
function defaultTemplate(t: Json | undefined): Json | undefined {
  if (!t || typeof t !== 'object') return t;
  return { ...t, ...(t.spec ? { spec: defaultPodSpec(t.spec, false) } : {}) };
}

function templateCauses(t: Json | undefined, path: string, restartPolicies?: string[], claims: string[] = []): Cause[] {
  if (!t) return [{ field: path, message: 'Required value', reason: 'FieldValueRequired' }];
  const causes = [
    ...labelCauses(t.metadata?.labels, `${path}.metadata.labels`),
    ...podSpecCauses(t.spec, `${path}.spec`, claims),
  ];
  const rp = t.spec?.restartPolicy;
  if (restartPolicies && !restartPolicies.includes(rp))
    causes.push({
      field: `${path}.spec.restartPolicy`,
      message: `Unsupported value: "${rp}": supported values: ${restartPolicies.map((p) => `"${p}"`).join(', ')}`,
      reason: 'FieldValueNotSupported',
    });
  return causes;
}

/** matchLabels/matchExpressions selecting `labels`. */
function selects(selector: Json, labels: Json): boolean {
  const ok = Object.entries<string>(selector.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
  return (
    ok &&
    ((selector.matchExpressions ?? []) as Json[]).every((e) => {
      const has = e.key in labels;
      const v = labels[e.key];
      if (e.operator === 'In') return has && e.values.includes(v);
      if (e.operator === 'NotIn') return !has || !e.values.includes(v);
      if (e.operator === 'Exists') return has;
      if (e.operator === 'DoesNotExist') return !has;
      return false;
    })
  );
}

function selectorCauses(obj: Json, what: string): Cause[] {
  const sel = obj.spec?.selector;
  if (!sel) return [{ field: 'spec.selector', message: 'Required value', reason: 'FieldValueRequired' }];
  const causes = labelCauses(sel.matchLabels, 'spec.selector.matchLabels');
  if (!Object.keys(sel.matchLabels ?? {}).length && !(sel.matchExpressions ?? []).length)
    causes.push({
      field: 'spec.selector',
      message: `Invalid value: "null": empty selector is invalid for ${what}`,
      reason: 'FieldValueInvalid',
    });
  else if (!selects(sel, obj.spec?.template?.metadata?.labels ?? {}))
    causes.push({
      field: 'spec.template.metadata.labels',
      message: `Invalid value: ${JSON.stringify(obj.spec?.template?.metadata?.labels ?? {})}: \`selector\` does not match template \`labels\``,
      reason: 'FieldValueInvalid',
    });
  return causes;
}

function defaultClaimTemplate(c: Json): Json {
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    ...c,
    spec: defaultClaimSpec(c.spec ?? {}),
    status: { phase: 'Pending', ...(c.status ?? {}) },
  };
}

function defaultClaimSpec(spec: Json): Json {
  const out: Json = { volumeMode: 'Filesystem', ...spec };
  if (spec.resources)
    out.resources = {
      ...spec.resources,
      ...(spec.resources.requests ? { requests: canonicalResources(spec.resources.requests) } : {}),
      ...(spec.resources.limits ? { limits: canonicalResources(spec.resources.limits) } : {}),
    };
  return out;
}

function claimSpecCauses(spec: Json | undefined, path: string): Cause[] {
  const causes: Cause[] = [];
  if (!spec?.accessModes?.length)
    causes.push({
      field: `${path}.accessModes`,
      message: 'Required value: at least 1 access mode is required',
      reason: 'FieldValueRequired',
    });
  if (spec?.resources?.requests?.storage === undefined)
    causes.push({ field: `${path}.resources[storage]`, message: 'Required value', reason: 'FieldValueRequired' });
  return causes;
}

const STATEFULSET_MUTABLE = [
  'replicas',
  'ordinals',
  'template',
  'updateStrategy',
  'persistentVolumeClaimRetentionPolicy',
  'minReadySeconds',
];
const JOB_IMMUTABLE = [
  'selector',
  'template',
  'completions',
  'completionMode',
  'podFailurePolicy',
  'backoffLimitPerIndex',
  'manualSelector',
];

let nextClusterIp = 1;
function allocateClusterIp(): string {
  const n = nextClusterIp++;
  return `10.96.${(n >> 8) & 255}.${n & 255}`;
}

export const RULES: Record<string, KindRules> = {
  Pod: {
    defaults: (o) => ({ ...o, spec: o.spec && defaultPodSpec(o.spec, true) }),
    validate: (o) => podSpecCauses(o.spec, 'spec'),
    immutable: (o, p) => {
      const strip = (s: Json = {}) => ({
        ...s,
        activeDeadlineSeconds: undefined,
        tolerations: undefined,
        containers: s.containers?.map((c: Json) => ({ ...c, image: undefined })),
        initContainers: s.initContainers?.map((c: Json) => ({ ...c, image: undefined })),
      });
      return same(strip(o.spec), strip(p.spec))
        ? []
        : [
            {
              field: 'spec',
              message:
                'Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)',
              reason: 'FieldValueForbidden',
            },
          ];
    },
  },
  Deployment: {
    defaults: (o) => {
      const s = o.spec ?? {};
      const type = s.strategy?.type ?? 'RollingUpdate';
      const strategy =
        type === 'RollingUpdate'
          ? {
              ...s.strategy,
              type,
              rollingUpdate: { maxUnavailable: '25%', maxSurge: '25%', ...(s.strategy?.rollingUpdate ?? {}) },
            }
          : { ...s.strategy, type };
      return {
        ...o,
        spec: {
          replicas: 1,
          revisionHistoryLimit: 10,
          progressDeadlineSeconds: 600,
          ...s,
          strategy,
          template: defaultTemplate(s.template),
        },
      };
    },
    validate: (o) => {
      const causes = [
        ...selectorCauses(o, 'deployment'),
        ...templateCauses(o.spec?.template, 'spec.template', ['Always']),
      ];
      if (o.spec?.strategy?.type === 'Recreate' && o.spec.strategy.rollingUpdate)
        causes.push({
          field: 'spec.strategy.rollingUpdate',
          message: "Forbidden: may not be specified when strategy `type` is 'Recreate'",
          reason: 'FieldValueForbidden',
        });
      return causes;
    },
    immutable: (o, p) =>
      same(o.spec?.selector, p.spec?.selector) ? [] : [immutable('spec.selector', o.spec?.selector)],
  },
  ReplicaSet: {
    defaults: (o) => ({ ...o, spec: { replicas: 1, ...(o.spec ?? {}), template: defaultTemplate(o.spec?.template) } }),
    validate: (o) => [
      ...selectorCauses(o, 'replicaset'),
      ...templateCauses(o.spec?.template, 'spec.template', ['Always']),
    ],
    immutable: (o, p) =>
      same(o.spec?.selector, p.spec?.selector) ? [] : [immutable('spec.selector', o.spec?.selector)],
  },
  StatefulSet: {
    defaults: (o) => {
      const s = o.spec ?? {};
      const type = s.updateStrategy?.type ?? 'RollingUpdate';
      return {
        ...o,
        spec: {
          replicas: 1,
          podManagementPolicy: 'OrderedReady',
          revisionHistoryLimit: 10,
          ...s,
          updateStrategy:
            type === 'RollingUpdate'
              ? {
                  ...s.updateStrategy,
                  type,
                  rollingUpdate: { partition: 0, ...(s.updateStrategy?.rollingUpdate ?? {}) },
                }
              : { ...s.updateStrategy, type },
          persistentVolumeClaimRetentionPolicy: {
            whenDeleted: 'Retain',
            whenScaled: 'Retain',
            ...(s.persistentVolumeClaimRetentionPolicy ?? {}),
          },
          template: defaultTemplate(s.template),
          ...(s.volumeClaimTemplates ? { volumeClaimTemplates: s.volumeClaimTemplates.map(defaultClaimTemplate) } : {}),
        },
      };
    },
    validate: (o) => [
      ...selectorCauses(o, 'statefulset'),
      ...templateCauses(
        o.spec?.template,
        'spec.template',
        ['Always'],
        ((o.spec?.volumeClaimTemplates ?? []) as Json[]).map((c) => String(c.metadata?.name)),
      ),
      ...((o.spec?.volumeClaimTemplates ?? []) as Json[]).flatMap((c, i) => [
        ...nameProblems(String(c.metadata?.name ?? ''), 'dns1123Subdomain').map((m) => ({
          field: `spec.volumeClaimTemplates[${i}].metadata.name`,
          message: `Invalid value: "${c.metadata?.name ?? ''}": ${m}`,
          reason: 'FieldValueInvalid',
        })),
        ...claimSpecCauses(c.spec, `spec.volumeClaimTemplates[${i}].spec`),
      ]),
    ],
    immutable: (o, p) => {
      const rest = (x: Json) =>
        Object.fromEntries(Object.entries(x.spec ?? {}).filter(([k]) => !STATEFULSET_MUTABLE.includes(k)));
      return same(rest(o), rest(p))
        ? []
        : [
            {
              field: 'spec',
              message: `Forbidden: updates to statefulset spec for fields other than ${STATEFULSET_MUTABLE.map((f) => `'${f}'`).join(', ')} are forbidden`,
              reason: 'FieldValueForbidden',
            },
          ];
    },
  },
  Job: {
    defaults: (o, old) => {
      const s = o.spec ?? {};
      const uid = o.metadata?.uid;
      const name = o.metadata?.name;
      const generated = !s.manualSelector && !old;
      const template = defaultTemplate(s.template) ?? {};
      const labels = generated
        ? {
            ...(template.metadata?.labels ?? {}),
            'batch.kubernetes.io/controller-uid': uid,
            'batch.kubernetes.io/job-name': name,
            'controller-uid': uid,
            'job-name': name,
          }
        : template.metadata?.labels;
      const both = s.parallelism === undefined && s.completions === undefined;
      return {
        ...o,
        spec: {
          backoffLimit: 6,
          completionMode: 'NonIndexed',
          suspend: false,
          ...(s.podFailurePolicy ? {} : { podReplacementPolicy: 'TerminatingOrFailed' }),
          ...(both ? { parallelism: 1, completions: 1 } : { parallelism: 1 }),
          ...s,
          ...(generated && !s.selector
            ? { selector: { matchLabels: { 'batch.kubernetes.io/controller-uid': uid } } }
            : {}),
          template: { ...template, metadata: { ...(template.metadata ?? {}), ...(labels ? { labels } : {}) } },
        },
      };
    },
    validate: (o) => {
      const causes = templateCauses(o.spec?.template, 'spec.template', ['OnFailure', 'Never']);
      return causes.map((c) =>
        c.field === 'spec.template.metadata.labels' ? { ...c, field: 'spec.template.labels' } : c,
      );
    },
    immutable: (o, p) =>
      JOB_IMMUTABLE.filter((k) => !same(o.spec?.[k], p.spec?.[k])).map((k) => immutable(`spec.${k}`, o.spec?.[k])),
  },
  Service: {
    defaults: (o, old) => {
      const s = o.spec ?? {};
      const type = s.type ?? 'ClusterIP';
      const out: Json = { ...s, type, sessionAffinity: s.sessionAffinity ?? 'None' };
      if (type !== 'ExternalName') {
        out.clusterIP = s.clusterIP || old?.spec?.clusterIP || allocateClusterIp();
        out.clusterIPs = s.clusterIPs ?? old?.spec?.clusterIPs ?? [out.clusterIP];
        out.ipFamilies = s.ipFamilies ?? old?.spec?.ipFamilies ?? ['IPv4'];
        out.ipFamilyPolicy = s.ipFamilyPolicy ?? 'SingleStack';
        out.internalTrafficPolicy = s.internalTrafficPolicy ?? 'Cluster';
      }
      if (type === 'NodePort' || type === 'LoadBalancer')
        out.externalTrafficPolicy = s.externalTrafficPolicy ?? 'Cluster';
      if (s.ports)
        out.ports = s.ports.map((p: Json, i: number) => ({
          protocol: 'TCP',
          ...p,
          targetPort: p.targetPort ?? p.port,
          ...(type === 'NodePort' || type === 'LoadBalancer'
            ? { nodePort: p.nodePort ?? old?.spec?.ports?.[i]?.nodePort ?? 30000 + ((nextClusterIp++ * 7) % 2768) }
            : {}),
        }));
      return { ...o, spec: out, ...(type === 'LoadBalancer' ? { status: o.status ?? { loadBalancer: {} } } : {}) };
    },
    validate: (o) => {
      const s = o.spec ?? {};
      const causes: Cause[] = [];
      const ports = (s.ports ?? []) as Json[];
      if (!ports.length && s.clusterIP !== 'None' && s.type !== 'ExternalName')
        causes.push({ field: 'spec.ports', message: 'Required value', reason: 'FieldValueRequired' });
      for (const [i, p] of ports.entries()) {
        if (ports.length > 1 && !p.name)
          causes.push({ field: `spec.ports[${i}].name`, message: 'Required value', reason: 'FieldValueRequired' });
        if (p.name)
          for (const m of nameProblems(p.name, 'dns1123Label'))
            causes.push({
              field: `spec.ports[${i}].name`,
              message: `Invalid value: "${p.name}": ${m}`,
              reason: 'FieldValueInvalid',
            });
        if (!Number.isInteger(p.port) || p.port < 1 || p.port > 65535)
          causes.push({
            field: `spec.ports[${i}].port`,
            message: `Invalid value: ${p.port}: must be between 1 and 65535, inclusive`,
            reason: 'FieldValueInvalid',
          });
      }
      causes.push(...labelCauses(s.selector, 'spec.selector'));
      return causes;
    },
    immutable: (o, p) =>
      o.spec?.clusterIP === p.spec?.clusterIP ? [] : [immutable('spec.clusterIP', o.spec?.clusterIP)],
  },
  PersistentVolumeClaim: {
    defaults: (o) => ({ ...o, spec: defaultClaimSpec(o.spec ?? {}), status: o.status ?? { phase: 'Pending' } }),
    validate: (o) => claimSpecCauses(o.spec, 'spec'),
    immutable: (o, p) => {
      const bound = p.status?.phase === 'Bound';
      const rest = (x: Json) => ({
        ...x.spec,
        volumeAttributesClassName: undefined,
        resources: bound ? { ...x.spec?.resources, requests: undefined } : x.spec?.resources,
      });
      return same(rest(o), rest(p))
        ? []
        : [
            {
              field: 'spec',
              message:
                'Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims',
              reason: 'FieldValueForbidden',
            },
          ];
    },
  },
  HorizontalPodAutoscaler: {
    defaults: (o) => ({
      ...o,
      spec: {
        ...o.spec,
        ...(o.spec?.metrics
          ? {
              metrics: o.spec.metrics.map((m: Json) => {
                const key =
                  m.type === 'Resource'
                    ? 'resource'
                    : m.type === 'Pods'
                      ? 'pods'
                      : m.type === 'Object'
                        ? 'object'
                        : m.type === 'External'
                          ? 'external'
                          : m.type === 'ContainerResource'
                            ? 'containerResource'
                            : '';
                const t = m[key]?.target;
                if (!t) return m;
                const target = { ...t };
                for (const f of ['value', 'averageValue']) if (t[f] !== undefined) target[f] = canonicalQuantity(t[f]);
                return { ...m, [key]: { ...m[key], target } };
              }),
            }
          : {}),
      },
    }),
  },
};
