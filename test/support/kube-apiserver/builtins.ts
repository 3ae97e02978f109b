// Built-in kinds the Kubernetes runtime uses, registered on the API-server double through its KindRegistry.
// Every object is admitted only if it is valid against the official Kubernetes OpenAPI schema (kubernetes-models
// validators), the way a real API server would refuse it.
import { Deployment, ReplicaSet, StatefulSet } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { Job } from 'kubernetes-models/batch/v1';
import { Lease } from 'kubernetes-models/coordination.k8s.io/v1';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PersistentVolumeClaim, Pod, Service, ServiceAccount } from 'kubernetes-models/v1';
import { ClusterRole, ClusterRoleBinding, Role, RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { validateMeta, type Cause, type KindRegistry, type KindSpec } from './registry.ts';

type Json = Record<string, any>;
type Model = new (data: never) => { validate(): void };

type Builtin = {
  group: string;
  version: string;
  plural: string;
  kind: string;
  model: Model;
  status: boolean;
  generation: boolean;
  /** Cluster-scoped kinds set false (default: namespaced). */
  namespaced?: boolean;
  /** What a DELETE without propagationPolicy does to dependents (default Background). */
  defaultPropagation?: 'Background' | 'Orphan';
  /** Fields the real server refuses to change after creation. */
  immutable?: (obj: Json, old: Json) => Cause[];
};

const immutableSelector = (obj: Json, old: Json): Cause[] =>
  JSON.stringify(obj.spec?.selector) === JSON.stringify(old.spec?.selector)
    ? []
    : [{ field: 'spec.selector', message: 'Invalid value: field is immutable', reason: 'FieldValueInvalid' }];

const immutableJobTemplate = (obj: Json, old: Json): Cause[] =>
  JSON.stringify(obj.spec?.template) === JSON.stringify(old.spec?.template)
    ? []
    : [{ field: 'spec.template', message: 'Invalid value: field is immutable', reason: 'FieldValueInvalid' }];

// A StatefulSet's spec may change only in these fields; anything else is refused as on the real server.
const STATEFULSET_MUTABLE = [
  'replicas',
  'template',
  'updateStrategy',
  'persistentVolumeClaimRetentionPolicy',
  'minReadySeconds',
  'ordinals',
];
const immutableStatefulSet = (obj: Json, old: Json): Cause[] => {
  const rest = (o: Json) =>
    JSON.stringify(
      Object.fromEntries(
        Object.entries(o.spec ?? {})
          .filter(([k]) => !STATEFULSET_MUTABLE.includes(k))
          .sort(([a], [b]) => (a < b ? -1 : 1)),
      ),
    );
  return rest(obj) === rest(old)
    ? []
    : [
        {
          field: 'spec',
          message: `Forbidden: updates to statefulset spec for fields other than ${STATEFULSET_MUTABLE.map((f) => `'${f}'`).join(', ')} are forbidden`,
          reason: 'FieldValueForbidden',
        },
      ];
};

// clusterIP is kept when an update leaves it out (the server fills it back in), refused when changed.
const immutableClusterIp = (obj: Json, old: Json): Cause[] => {
  const ip = obj.spec?.clusterIP;
  return ip === undefined || ip === '' || ip === old.spec?.clusterIP
    ? []
    : [{ field: 'spec.clusterIP', message: 'Invalid value: field is immutable', reason: 'FieldValueInvalid' }];
};

const BUILTINS: Builtin[] = [
  {
    group: 'batch',
    version: 'v1',
    plural: 'jobs',
    kind: 'Job',
    model: Job,
    status: true,
    generation: true,
    immutable: immutableJobTemplate,
    defaultPropagation: 'Orphan',
  },
  {
    group: 'apps',
    version: 'v1',
    plural: 'deployments',
    kind: 'Deployment',
    model: Deployment,
    status: true,
    generation: true,
    immutable: immutableSelector,
  },
  {
    group: 'apps',
    version: 'v1',
    plural: 'replicasets',
    kind: 'ReplicaSet',
    model: ReplicaSet,
    status: true,
    generation: true,
    immutable: immutableSelector,
  },
  {
    group: 'apps',
    version: 'v1',
    plural: 'statefulsets',
    kind: 'StatefulSet',
    model: StatefulSet,
    status: true,
    generation: true,
    immutable: (o, p) => [...immutableSelector(o, p), ...immutableStatefulSet(o, p)],
  },
  { group: '', version: 'v1', plural: 'pods', kind: 'Pod', model: Pod, status: true, generation: false },
  {
    group: '',
    version: 'v1',
    plural: 'services',
    kind: 'Service',
    model: Service,
    status: true,
    generation: false,
    immutable: immutableClusterIp,
  },
  {
    group: '',
    version: 'v1',
    plural: 'persistentvolumeclaims',
    kind: 'PersistentVolumeClaim',
    model: PersistentVolumeClaim,
    status: true,
    generation: false,
  },
  {
    group: 'networking.k8s.io',
    version: 'v1',
    plural: 'ingresses',
    kind: 'Ingress',
    model: Ingress,
    status: true,
    generation: true,
  },
  {
    group: 'networking.k8s.io',
    version: 'v1',
    plural: 'networkpolicies',
    kind: 'NetworkPolicy',
    model: NetworkPolicy,
    status: false,
    generation: true,
  },
  {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    plural: 'rolebindings',
    kind: 'RoleBinding',
    model: RoleBinding,
    status: false,
    generation: false,
  },
  {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    plural: 'roles',
    kind: 'Role',
    model: Role,
    status: false,
    generation: false,
  },
  {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    plural: 'clusterroles',
    kind: 'ClusterRole',
    model: ClusterRole,
    status: false,
    generation: false,
    namespaced: false,
  },
  {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    plural: 'clusterrolebindings',
    kind: 'ClusterRoleBinding',
    model: ClusterRoleBinding,
    status: false,
    generation: false,
    namespaced: false,
  },
  {
    group: '',
    version: 'v1',
    plural: 'serviceaccounts',
    kind: 'ServiceAccount',
    model: ServiceAccount,
    status: false,
    generation: false,
  },
  {
    group: 'coordination.k8s.io',
    version: 'v1',
    plural: 'leases',
    kind: 'Lease',
    model: Lease,
    status: false,
    generation: false,
  },
  {
    group: 'autoscaling',
    version: 'v2',
    plural: 'horizontalpodautoscalers',
    kind: 'HorizontalPodAutoscaler',
    model: HorizontalPodAutoscaler,
    status: true,
    generation: true,
  },
];

function schemaCauses(model: Model, obj: Json): Cause[] {
  try {
    new model(structuredClone(obj) as never).validate();
    return [];
  } catch (err) {
    return [{ field: '<root>', message: (err as Error).message, reason: 'FieldValueInvalid' }];
  }
}

/** Admits built-in objects the way the real server does for the fields the runtime relies on. */
export function registerBuiltinKinds(registry: KindRegistry): void {
  for (const b of BUILTINS) {
    const spec: KindSpec = {
      group: b.group,
      version: b.version,
      plural: b.plural,
      kind: b.kind,
      namespaced: b.namespaced ?? true,
      statusSubresource: b.status,
      requireResourceVersionOnUpdate: false,
      tracksGeneration: b.generation,
      ...(b.defaultPropagation ? { defaultPropagation: b.defaultPropagation } : {}),
      admit(obj, old) {
        const causes = [...validateMeta(obj), ...schemaCauses(b.model, obj)];
        if (old && b.immutable) causes.push(...b.immutable(obj, old));
        return causes.length ? { causes } : { object: obj };
      },
    };
    registry.register(spec);
  }
}
