// Built-in kinds the Kubernetes runtime uses, registered on the API-server double through its KindRegistry.
// Every object is admitted only if it is valid against the official Kubernetes OpenAPI schema (kubernetes-models
// validators), the way a real API server would refuse it.
import { Deployment, ReplicaSet, StatefulSet } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { Job } from 'kubernetes-models/batch/v1';
import { Lease } from 'kubernetes-models/coordination.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { EndpointSlice } from 'kubernetes-models/discovery.k8s.io/v1';
import { Event, PersistentVolumeClaim, Pod, Service, ServiceAccount } from 'kubernetes-models/v1';
import { Event as EventsV1Event } from 'kubernetes-models/events.k8s.io/v1';
import { CustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1';
import { ClusterRole, ClusterRoleBinding, Role, RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { admitBuiltin } from './admit.ts';
import type { KindRegistry, KindSpec } from './registry.ts';
import { RULES } from './workloads.ts';

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
  },
  {
    group: 'apps',
    version: 'v1',
    plural: 'replicasets',
    kind: 'ReplicaSet',
    model: ReplicaSet,
    status: true,
    generation: true,
  },
  {
    group: 'apps',
    version: 'v1',
    plural: 'statefulsets',
    kind: 'StatefulSet',
    model: StatefulSet,
    status: true,
    generation: true,
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
    group: 'discovery.k8s.io',
    version: 'v1',
    plural: 'endpointslices',
    kind: 'EndpointSlice',
    model: EndpointSlice,
    status: false,
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
    group: 'policy',
    version: 'v1',
    plural: 'poddisruptionbudgets',
    kind: 'PodDisruptionBudget',
    model: PodDisruptionBudget,
    status: true,
    generation: true,
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
  { group: '', version: 'v1', plural: 'events', kind: 'Event', model: Event, status: false, generation: false },
  {
    group: 'events.k8s.io',
    version: 'v1',
    plural: 'events',
    kind: 'Event',
    model: EventsV1Event,
    status: false,
    generation: false,
  },
  {
    // Read-only in practice: the CRD files are stored as objects (crd-objects.ts) so clients can read them.
    group: 'apiextensions.k8s.io',
    version: 'v1',
    plural: 'customresourcedefinitions',
    kind: 'CustomResourceDefinition',
    model: CustomResourceDefinition,
    status: true,
    generation: true,
    namespaced: false,
  },
];

/** Admits built-in objects the way the real server does (admit.ts: decoding, defaults, validation, immutability). */
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
      admit: (obj, old) =>
        admitBuiltin({ version: b.version, kind: b.kind, model: b.model, rules: RULES[b.kind] }, obj, old),
    };
    registry.register(spec);
  }
}
