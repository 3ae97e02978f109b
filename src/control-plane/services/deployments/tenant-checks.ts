// Input rules that depend on this control plane's settings (bounds, custom domains) or on the store (custom host
// claims, tenant-labelled cluster objects). All of them run before the deployment service writes anything.
import { ConflictError, ValidationError, type ValidationIssue } from '../../../lib/errors.ts';
import type { Logger } from '../../../lib/logger.ts';
import { LABEL_TENANT, type AgentDeployment } from '../../../resources/index.ts';
import type { ResourceSpecApi } from '../../../api/schemas/deployments.ts';
import { AlreadyExistsError } from '../../../state/errors.ts';
import { type PlatformState } from '../../../state/types.ts';
import {
  DEFAULT_INPUT_POLICY,
  customHostProblem,
  resourceBoundProblems,
  type InputPolicy,
} from '../../../api/input-rules.ts';
import { customUrlHost } from '../../../resources/index.ts';

type Issue = ValidationIssue;

/** 422 with every issue, when there are any. */
export function refuse(issues: Issue[]): void {
  if (issues.length)
    throw new ValidationError(issues.map((i) => `${i.loc.slice(1).join('.')}: ${i.msg}`).join('; '), issues);
}

/** The host of a custom_url (its shape was checked by the schema), or undefined for none. */
export function hostOf(customUrl: string | null | undefined): string | undefined {
  if (!customUrl) return undefined;
  const r = customUrlHost(customUrl);
  return 'host' in r ? r.host : undefined;
}

export function createTenantChecks(deps: {
  store: PlatformState;
  logger: Logger;
  policy?: InputPolicy;
  /** The namespace a tenant's pods run in, where what they reference must be (default: the store's). */
  referenceNamespace?: (tenant: string) => string;
}) {
  const { store, logger } = deps;
  const policy = deps.policy ?? DEFAULT_INPUT_POLICY;
  const ns = store.namespace;
  const podNamespace = deps.referenceNamespace ?? (() => ns);

  function policyIssues(
    resourceSpec: ResourceSpecApi | null | undefined,
    customUrl: string | null | undefined,
  ): Issue[] {
    const issues: Issue[] = [];
    const at = ['body', 'source_config'];
    if (resourceSpec) {
      for (const [field, msg] of resourceBoundProblems(resourceSpec, policy)) {
        const type = msg.includes('at least') ? 'greater_than_equal' : 'less_than_equal';
        issues.push({ loc: [...at, 'resource_spec', field], msg, type });
      }
    }
    const host = hostOf(customUrl);
    const problem = host && customHostProblem(host, policy);
    if (problem) issues.push({ loc: [...at, 'custom_url'], msg: problem, type: 'value_error' });
    return issues;
  }

  /** Service accounts and Secrets must be the tenant's own (kubernetes store); elsewhere they mean nothing. */
  async function referenceIssues(
    tenant: string,
    resourceSpec: ResourceSpecApi | null | undefined,
    secretReferences: { secret_name: string }[] | undefined,
  ): Promise<Issue[]> {
    const spec = resourceSpec ?? {};
    const wanted: [Issue['loc'], 'ServiceAccount' | 'Secret', string][] = [];
    if (spec.service_account_name)
      wanted.push([
        ['body', 'source_config', 'resource_spec', 'service_account_name'],
        'ServiceAccount',
        spec.service_account_name,
      ]);
    for (const [i, n] of (spec.image_pull_secrets ?? []).entries()) {
      wanted.push([['body', 'source_config', 'resource_spec', 'image_pull_secrets', i], 'Secret', n]);
    }
    for (const [i, r] of (secretReferences ?? []).entries()) {
      wanted.push([['body', 'secret_references', i, 'secret_name'], 'Secret', r.secret_name]);
    }
    if (!wanted.length) return [];
    if (!store.checkTenantReferences) {
      return wanted.map(([loc, kind, name]) => ({
        loc,
        msg: `${kind} "${name}": references to Kubernetes ${kind}s need the kubernetes store (--store kubernetes); this control plane runs on the embedded store`,
        type: 'value_error',
      }));
    }
    // Checked where the pods will run: with a namespace per tenant, that is the tenant's namespace.
    const where = podNamespace(tenant);
    const refused = await store.checkTenantReferences(where, tenant, {
      serviceAccounts: wanted.filter(([, k]) => k === 'ServiceAccount').map(([, , n]) => n),
      secrets: wanted.filter(([, k]) => k === 'Secret').map(([, , n]) => n),
    });
    const bad = new Set(refused.map((r) => `${r.kind}/${r.name}`));
    return wanted
      .filter(([, kind, name]) => bad.has(`${kind}/${name}`))
      .map(([loc, kind, name]) => ({
        loc,
        msg: `${kind} "${name}" does not exist in namespace ${where} with the label ${LABEL_TENANT}=${tenant}`,
        type: 'value_error',
      }));
  }

  function hostTaken(host: string): ConflictError {
    return new ConflictError(`The custom host "${host}" is already used by another deployment.`);
  }

  /** Refuses a host another live deployment holds before anything is written (claimHost decides races). */
  async function assertHostFree(host: string, exceptUid?: string): Promise<void> {
    const holder = await store.hostHolder(ns, host);
    if (holder && holder.uid !== exceptUid) throw hostTaken(host);
  }

  async function claimHost(host: string, dep: AgentDeployment): Promise<void> {
    try {
      await store.claimHost(ns, host, { name: dep.metadata.name, uid: dep.metadata.uid! });
    } catch (err) {
      if (err instanceof AlreadyExistsError) throw hostTaken(host);
      throw err;
    }
  }

  async function releaseHostQuietly(host: string, owner: { name: string; uid: string }) {
    await store
      .releaseHost(ns, host, owner)
      .catch((err: unknown) => logger.warn({ err, deployment: owner.name, host }, 'releasing a host claim failed'));
  }

  return { policyIssues, referenceIssues, assertHostFree, claimHost, releaseHostQuietly };
}
