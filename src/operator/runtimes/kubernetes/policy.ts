// What a tenant may ask of the cluster. resource_spec, secret_references and custom_url come from the tenant and
// are treated as hostile: a ServiceAccount or Secret is usable only when an admin labelled it for that tenant,
// sizes stay under the operator's bounds and an Ingress host is never taken from someone else. Pure functions over
// objects the runtime has read; each refusal is one sentence naming what was refused (the revision's message).
import type { V1Ingress, V1Secret, V1ServiceAccount } from '@kubernetes/client-node';
import type { HttpRoute } from './http-route.ts';
import type { ResourceSpec, SecretReference } from '../../../resources/agent-deployment.ts';
import type { KubernetesRuntimeConfig } from './config.ts';
import { ANNOTATION_AUTOMOUNT_TOKEN, LABEL_TENANT, type Target } from './labels.ts';

export type VerifiedServiceAccount = { name: string; automountToken: boolean };

/** resource_spec against the operator's bounds (undefined: within them). */
export function boundsViolation(
  spec: ResourceSpec | null | undefined,
  limits: KubernetesRuntimeConfig['limits'],
): string | undefined {
  if (!spec) return undefined;
  for (const [field, value] of [
    ['min_scale', spec.minScale],
    ['max_scale', spec.maxScale],
  ] as const) {
    if (value !== undefined && value > limits.maxScale)
      return `resource_spec.${field} (${value}) is above the maximum scale of ${limits.maxScale}`;
  }
  for (const [field, value] of [
    ['cpu', spec.cpu],
    ['cpu_limit', spec.cpuLimit],
  ] as const) {
    if (value !== undefined && value > limits.maxCpu)
      return `resource_spec.${field} (${value}) is above the maximum of ${limits.maxCpu} CPU`;
  }
  for (const [field, value] of [
    ['memory_mb', spec.memoryMb],
    ['memory_limit_mb', spec.memoryLimitMb],
  ] as const) {
    if (value !== undefined && value > limits.maxMemoryMb)
      return `resource_spec.${field} (${value}) is above the maximum of ${limits.maxMemoryMb} MB`;
  }
  return undefined;
}

const belongsTo = (labels: Record<string, string> | undefined, tenantId: string) => labels?.[LABEL_TENANT] === tenantId;

/**
 * resource_spec.service_account_name: only a ServiceAccount labelled `agentplane.dev/tenant=<tenant>` (the label
 * is the admin's grant). Its token is mounted only when the account is annotated `agentplane.dev/automount-token:
 * "true"`; an annotation, not a label, because nothing selects by it.
 */
export function verifyServiceAccount(
  name: string,
  account: V1ServiceAccount | undefined,
  tenantId: string,
): { ok: true; serviceAccount: VerifiedServiceAccount } | { ok: false; message: string } {
  // One message whether it is missing or someone else's: a tenant learns nothing about other accounts.
  if (!account || !belongsTo(account.metadata?.labels, tenantId)) {
    return {
      ok: false,
      message: `resource_spec.service_account_name "${name}": no ServiceAccount labelled ${LABEL_TENANT}=${tenantId} has this name`,
    };
  }
  return {
    ok: true,
    serviceAccount: { name, automountToken: account.metadata?.annotations?.[ANNOTATION_AUTOMOUNT_TOKEN] === 'true' },
  };
}

// Secrets agentplane writes itself (revision env, Postgres passwords, secret sets, API keys, name claims).
const MANAGED_LABELS = [
  'agentplane.dev/deployment',
  'agentplane.dev/api-key',
  'agentplane.dev/name-claim-of',
  'agentplane.dev/log-for',
];

/**
 * secret_references: only Secrets labelled `agentplane.dev/tenant=<tenant>`, and never one agentplane manages (even
 * when it carries the tenant's label, like another deployment's `<revision>-env`) nor a credential of the operator.
 */
export function secretReferenceViolation(
  ref: SecretReference,
  secret: V1Secret | undefined,
  tenantId: string,
  config: Pick<
    KubernetesRuntimeConfig,
    'pushSecretName' | 'buildPullSecretName' | 'gitCredentialsSecretPrefix' | 'imagePullSecrets'
  >,
): string | undefined {
  const what = `secret_references ${ref.name}: Secret "${ref.secretName}"`;
  const labels = secret?.metadata?.labels ?? {};
  const reserved =
    /^(ag|agentplane)-/.test(ref.secretName) ||
    ref.secretName === config.pushSecretName ||
    ref.secretName === config.buildPullSecretName ||
    config.imagePullSecrets.includes(ref.secretName) ||
    // Build credentials are for the clone step only, never an agent's environment.
    Boolean(config.gitCredentialsSecretPrefix && ref.secretName.startsWith(config.gitCredentialsSecretPrefix)) ||
    labels['app.kubernetes.io/managed-by'] === 'agentplane-operator' ||
    MANAGED_LABELS.some((l) => l in labels) ||
    secret?.type === 'kubernetes.io/service-account-token';
  if (reserved) return `${what} is managed by agentplane and cannot be referenced`;
  // One message whether it is missing or someone else's: a tenant learns nothing about other Secrets.
  if (!secret || !belongsTo(labels, tenantId))
    return `${what} does not exist or is not labelled ${LABEL_TENANT}=${tenantId}`;
  if (secret.data?.[ref.secretKey] === undefined && secret.stringData?.[ref.secretKey] === undefined) {
    return `${what} has no key "${ref.secretKey}"`;
  }
  return undefined;
}

/** The hosts an agent Ingress or HTTPRoute serves. */
function servedHosts(obj: V1Ingress | HttpRoute): string[] {
  const spec = obj.spec as { rules?: { host?: string }[]; hostnames?: string[] } | undefined;
  return [...(spec?.hostnames ?? []), ...(spec?.rules ?? []).map((r) => r.host ?? '')];
}

/**
 * The deployment (other than `target`) whose Ingress or HTTPRoute already serves `host`, if any: both count, so a
 * switch between the two (or a route written by hand) cannot hand one deployment's host to another.
 */
export function hostOwner(host: string, servers: (V1Ingress | HttpRoute)[], target: Target): string | undefined {
  for (const obj of servers) {
    const mine = obj.metadata?.name === target.name && obj.metadata?.namespace === target.namespace;
    if (!mine && servedHosts(obj).includes(host)) return `${obj.metadata?.namespace}/${obj.metadata?.name}`;
  }
  return undefined;
}
