// `agentplane operator` flags: a namespace per workspace (tenant in code): its name, its RBAC bindings and its limits.
import { runtimeOptions } from './runtime.ts';
import { bool, json } from '../../lib/option-readers.ts';
import { objectRef } from './read.ts';

export const tenantsOptions = runtimeOptions({
  'namespace-per-tenant': {
    type: 'string',
    description: "true: run each workspace's agents in a namespace of its own, created by the operator",
    default: 'false',
    env: ['AGENTPLANE_NAMESPACE_PER_TENANT'],
    path: 'runtime.tenantNamespaces.enabled',
    read: bool,
  },
  'tenant-namespace-prefix': {
    type: 'string',
    description: 'Prefix of workspace namespaces (<prefix><workspace id>)',
    default: 'agentplane-t-',
    env: ['AGENTPLANE_TENANT_NAMESPACE_PREFIX'],
    path: 'runtime.tenantNamespaces.prefix',
  },
  'tenant-keys-writer': {
    type: 'string',
    description:
      'namespace/serviceaccount of the control plane, bound in each workspace namespace to --tenant-keys-role',
    env: ['AGENTPLANE_TENANT_KEYS_WRITER'],
    path: 'runtime.tenantNamespaces.keysWriter',
    read: objectRef,
  },
  'tenant-keys-role': {
    type: 'string',
    description: 'ClusterRole (Secrets only) the control plane gets in workspace namespaces',
    env: ['AGENTPLANE_TENANT_KEYS_ROLE'],
    path: 'runtime.tenantNamespaces.keysRole',
  },
  'tenant-operator-account': {
    type: 'string',
    description:
      "namespace/serviceaccount of the operator itself, bound in each workspace namespace to --tenant-operator-role (the operator's rights there)",
    env: ['AGENTPLANE_TENANT_OPERATOR_ACCOUNT'],
    path: 'runtime.tenantNamespaces.operatorAccount',
    read: objectRef,
  },
  'tenant-operator-role': {
    type: 'string',
    description: 'ClusterRole of what the operator does in a workspace namespace, bound there only',
    env: ['AGENTPLANE_TENANT_OPERATOR_ROLE'],
    path: 'runtime.tenantNamespaces.operatorRole',
  },
  'tenant-pod-security': {
    type: 'string',
    description:
      'Pod Security level (restricted, baseline, privileged, or none: no label) new workspace namespaces enforce, warn and audit at',
    default: 'restricted',
    env: ['AGENTPLANE_TENANT_POD_SECURITY'],
    path: 'runtime.tenantNamespaces.podSecurity',
  },
  'tenant-resource-quota': {
    type: 'string',
    description: 'JSON map, the hard limits of the ResourceQuota agentplane-tenant in each workspace namespace',
    env: ['AGENTPLANE_TENANT_RESOURCE_QUOTA'],
    path: 'runtime.tenantNamespaces.resourceQuota',
    read: json,
  },
  'tenant-limit-range': {
    type: 'string',
    description:
      'JSON {default, defaultRequest, max, min} of the Container LimitRange agentplane-tenant in each workspace namespace',
    env: ['AGENTPLANE_TENANT_LIMIT_RANGE'],
    path: 'runtime.tenantNamespaces.limitRange',
    read: json,
  },
});
