// A namespace per tenant (optional): its name, the Namespace object (labelled for Pod Security), its ResourceQuota
// and LimitRange, and the RoleBinding that lets the control plane keep the tenant's data-plane keys Secret there
// (the agents mount it from their own namespace). The runtime creates the namespace on first use and keeps the
// quota, limits and pull secret copies in it current.
import type { V1LimitRange, V1Namespace, V1ResourceQuota, V1RoleBinding } from '@kubernetes/client-node';
import { isLabelValue, LABEL_TENANT } from '../../../resources/names.ts';
import { apply, isStatus } from './apply.ts';
import type { KubernetesRuntimeConfig } from './config.ts';
import { orUndefined, type RuntimeContext } from './context.ts';
import type { Target } from './labels.ts';
import { LABEL_PULL_SECRET_COPY, makePullSecretCopy } from './pull-secrets.ts';

const MANAGED = { 'app.kubernetes.io/part-of': 'agentplane', 'app.kubernetes.io/managed-by': 'agentplane-operator' };

export { tenantNamespaceName } from '../../../resources/names.ts';

/** The ResourceQuota and LimitRange of every tenant namespace. */
export const TENANT_POLICY_NAME = 'agentplane-tenant';

export function makeTenantNamespace(
  name: string,
  tenantId: string,
  podSecurity: KubernetesRuntimeConfig['tenantNamespaces']['podSecurity'] = 'restricted',
): V1Namespace {
  // Enforced, and warned and audited at the same level, so `kubectl apply` of a pod that breaks it says why.
  const security =
    podSecurity === 'none'
      ? {}
      : Object.fromEntries(['enforce', 'warn', 'audit'].map((m) => [`pod-security.kubernetes.io/${m}`, podSecurity]));
  return {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: {
      name,
      labels: {
        ...MANAGED,
        ...security,
        ...(isLabelValue(tenantId) ? { [LABEL_TENANT]: tenantId } : {}),
      },
    },
  };
}

/** The tenant namespace's ResourceQuota, when the configuration sets one. */
export function makeTenantQuota(namespace: string, config: KubernetesRuntimeConfig): V1ResourceQuota | undefined {
  const hard = config.tenantNamespaces.resourceQuota;
  if (Object.keys(hard).length === 0) return undefined;
  return {
    apiVersion: 'v1',
    kind: 'ResourceQuota',
    metadata: { name: TENANT_POLICY_NAME, namespace, labels: { ...MANAGED } },
    spec: { hard: { ...hard } },
  };
}

/** The tenant namespace's LimitRange (per container), when the configuration sets any limit. */
export function makeTenantLimitRange(namespace: string, config: KubernetesRuntimeConfig): V1LimitRange | undefined {
  const { max = {}, min = {}, ...given } = config.tenantNamespaces.limitRange;
  // Written as the API server stores it (its defaulting: a missing default limit is the max, a missing default
  // request the default limit, else the min), so a later pass finds nothing to change.
  const dflt = { ...max, ...given.default };
  const defaultRequest = { ...min, ...dflt, ...given.defaultRequest };
  const limits = Object.fromEntries(
    Object.entries({ default: dflt, defaultRequest, max, min }).filter(([, v]) => Object.keys(v).length > 0),
  );
  if (Object.keys(limits).length === 0) return undefined;
  return {
    apiVersion: 'v1',
    kind: 'LimitRange',
    metadata: { name: TENANT_POLICY_NAME, namespace, labels: { ...MANAGED } },
    spec: { limits: [{ type: 'Container', ...limits }] },
  };
}

type Account = { namespace: string; name: string };

function binding(name: string, namespace: string, account: Account, role: string): V1RoleBinding {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name, namespace, labels: { ...MANAGED } },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
    subjects: [{ kind: 'ServiceAccount', name: account.name, namespace: account.namespace }],
  };
}

/** Binds `writer` (the control plane's ServiceAccount) to `role` (Secrets only) in the tenant namespace. */
export function makeKeysWriterBinding(namespace: string, writer: Account, role: string): V1RoleBinding {
  return binding('agentplane-tenant-keys', namespace, writer, role);
}

/** Binds the operator's own ServiceAccount to `role`, what it does in a tenant namespace, in that namespace only. */
export function makeOperatorBinding(namespace: string, operator: Account, role: string): V1RoleBinding {
  return binding('agentplane-operator', namespace, operator, role);
}

/**
 * The tenant's namespace, created on first use and labelled with the tenant (what admins select by), with the
 * control plane allowed to keep the tenant's keys Secret in it.
 */
export async function ensureTenantNamespace(ctx: RuntimeContext, target: Target): Promise<void> {
  const name = target.namespace;
  const existing = await orUndefined(() => ctx.core.readNamespace({ name }));
  // A terminating namespace refuses new content (403) until its controller has emptied and removed it; then it
  // is created afresh. Failing the reconcile retries it with backoff meanwhile.
  if (existing?.metadata?.deletionTimestamp)
    throw new Error(`workspace namespace ${name} is being deleted; its deployments wait until it is gone`);
  if (!existing) {
    try {
      await ctx.core.createNamespace({
        body: makeTenantNamespace(name, target.tenantId, ctx.opts.config.tenantNamespaces.podSecurity),
      });
      ctx.log.info({ namespace: name }, 'tenant namespace created');
    } catch (err) {
      if (!isStatus(err, 409)) throw err;
    }
  }
  const { keysWriter, keysRole } = ctx.opts.config.tenantNamespaces;
  // First: every other write below is the operator's own right in this namespace (the API server's authorizer
  // sees the binding within moments; a write refused meanwhile fails this pass, which is retried).
  await bindOperator(ctx, name);
  if (keysWriter && keysRole) await apply(ctx.ops.roleBinding, makeKeysWriterBinding(name, keysWriter, keysRole));
  // Before any pod: a LimitRange fills in the requests a quota on cpu or memory needs every pod to have.
  const limitRange = makeTenantLimitRange(name, ctx.opts.config);
  if (limitRange) await apply(ctx.ops.limitRange, limitRange);
  const quota = makeTenantQuota(name, ctx.opts.config);
  if (quota) await apply(ctx.ops.resourceQuota, quota);
  await syncPullSecrets(ctx, name);
}

/** Binds the operator's tenant role to itself in `namespace` (when configured: the chart does with a namespace per tenant). */
async function bindOperator(ctx: RuntimeContext, namespace: string): Promise<void> {
  const { operatorAccount, operatorRole } = ctx.opts.config.tenantNamespaces;
  if (operatorAccount && operatorRole)
    await apply(ctx.ops.roleBinding, makeOperatorBinding(namespace, operatorAccount, operatorRole));
}

/**
 * Makes the tenant namespace hold exactly the configured image pull secrets, as copies of ours: written when the
 * source differs, removed when the source is gone or no longer configured.
 */
async function syncPullSecrets(ctx: RuntimeContext, namespace: string): Promise<void> {
  const wanted = new Set(ctx.opts.config.imagePullSecrets);
  // Each source is read once per pass: the copies below are kept or removed by what this read found.
  const present = new Set<string>();
  for (const name of wanted) {
    const source = await orUndefined(() => ctx.core.readNamespacedSecret({ name, namespace: ctx.opts.namespace }));
    if (source) {
      present.add(name);
      await apply(ctx.ops.secret, makePullSecretCopy(source, namespace));
    } else
      ctx.log.warn(
        { secret: name, namespace: ctx.opts.namespace },
        'image pull secret not found; agent pods cannot use it',
      );
  }
  const copies = (await ctx.core.listNamespacedSecret({ namespace, labelSelector: `${LABEL_PULL_SECRET_COPY}=true` }))
    .items;
  for (const copy of copies) {
    const name = copy.metadata!.name!;
    if (present.has(name)) continue;
    try {
      await ctx.core.deleteNamespacedSecret({ name, namespace });
      ctx.log.info({ namespace, secret: name }, 'removed image pull secret copy');
    } catch (err) {
      if (!isStatus(err, 404)) throw err;
    }
  }
}

/** Re-syncs the pull secret copies of every tenant namespace that runs an agent (the caller runs one pass at a time). */
export async function resyncPullSecrets(ctx: RuntimeContext): Promise<void> {
  const namespaces = new Set(
    ctx.deployments
      .list()
      .map((d) => d.metadata.namespace)
      .filter((ns): ns is string => Boolean(ns) && ns !== ctx.opts.namespace),
  );
  for (const ns of namespaces) {
    try {
      const current = await orUndefined(() => ctx.core.readNamespace({ name: ns }));
      if (current && !current.metadata?.deletionTimestamp) await syncPullSecrets(ctx, ns);
    } catch (err) {
      ctx.log.warn({ err, namespace: ns }, 'syncing image pull secrets failed; the next deploy retries');
    }
  }
}
