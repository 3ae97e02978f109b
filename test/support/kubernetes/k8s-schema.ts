// Validates built-in objects against the official Kubernetes OpenAPI schemas (kubernetes-models validators).
import { Job } from 'kubernetes-models/batch/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import {
  ConfigMap,
  Namespace,
  Secret,
  Service,
  ServiceAccount,
  PersistentVolumeClaim,
  Pod,
} from 'kubernetes-models/v1';
import { CustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { Lease } from 'kubernetes-models/coordination.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ClusterRole, ClusterRoleBinding, Role, RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';

type Validatable = { validate(): void };
const MODELS: Record<string, new (data: never) => Validatable> = {
  'batch/v1/Job': Job,
  'apps/v1/Deployment': Deployment,
  'apps/v1/StatefulSet': StatefulSet,
  'v1/Secret': Secret,
  'v1/ConfigMap': ConfigMap,
  'v1/Pod': Pod,
  'apiextensions.k8s.io/v1/CustomResourceDefinition': CustomResourceDefinition,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'v1/Namespace': Namespace,
  'v1/PersistentVolumeClaim': PersistentVolumeClaim,
  'networking.k8s.io/v1/Ingress': Ingress,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'coordination.k8s.io/v1/Lease': Lease,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'rbac.authorization.k8s.io/v1/Role': Role,
  'rbac.authorization.k8s.io/v1/ClusterRole': ClusterRole,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding,
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': ClusterRoleBinding,
};

/** Throws with the schema's message when `obj` is not a valid object of its apiVersion/kind. */
export function validateK8s(obj: unknown): void {
  const o = obj as { apiVersion?: string; kind?: string };
  const Model = MODELS[`${o.apiVersion}/${o.kind}`];
  if (!Model) throw new Error(`no schema registered for ${o.apiVersion}/${o.kind}`);
  // Round-trip through JSON: what goes on the wire is what gets validated (with client-node's `_from` renamed to
  // the `from` its serializer sends).
  new Model(
    JSON.parse(
      JSON.stringify(obj, (k, v: unknown) =>
        v && typeof v === 'object' && !Array.isArray(v) && '_from' in v ? renameFrom(v as Record<string, unknown>) : v,
      ),
    ) as never,
  ).validate();
}

function renameFrom(rule: Record<string, unknown>): Record<string, unknown> {
  const { _from, ...rest } = rule;
  return { from: _from, ...rest };
}
