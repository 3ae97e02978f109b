// Deployments and revisions on top of the store port. Tenancy: every object carries its tenant in spec and in the
// agentplane.dev/tenant label; another tenant's deployment is answered exactly like a missing one.
import { createHash, randomUUID } from 'node:crypto';
import { BadRequestError, ConflictError, NotFoundError, ValidationError } from '../../lib/errors.ts';
import type { Logger } from '../../lib/logger.ts';
import { redactUrlsIn } from '../../lib/redact.ts';
import {
  API_VERSION,
  LABEL_DEPLOYMENT,
  LABEL_DEPLOYMENT_ID,
  LABEL_TENANT,
  deploymentName,
  isUuid,
  latestRevisionName,
  makeRevision,
  revisionName,
  secretsName,
  type AgentDeployment,
  type AgentRevision,
  type SourceConfig,
} from '../../resources/index.ts';
import { AlreadyExistsError, StaleResourceVersionError, type ControlPlaneStore } from '../store/types.ts';
import {
  UPDATED_AT_ANNOTATION,
  resourceSpecFromApi,
  secretReferencesFromApi,
  sourceConfigFromApi,
  sourceRevisionConfigFromApi,
  toApiDeployment,
  toApiRevision,
} from './mapping.ts';
import type { Deployment, DeploymentCreate, DeploymentPatch, Revision } from '../routes/v2/schemas.ts';
import { createTenantChecks, hostOf, refuse } from './tenant-checks.ts';
import type { InputPolicy } from './input-rules.ts';
import { integrationIssues } from './integrations.ts';
import { listenerIssues, waitingMessage } from './listeners.ts';
import { createQuotas, type Quotas } from './quotas.ts';
import type { GitHubApp } from './integrations-github.ts';

export const LABEL_NAME_HASH = 'agentplane.dev/name-hash';
/** Comma-separated environment variable names of the current secret set (values live in the set only). */
export const SECRET_NAMES_ANNOTATION = 'agentplane.dev/secret-names';
/** Comma-separated keys (delivery ids, pushed commits) of the last pushes that made a revision (build on push). */
export const PUSH_DELIVERIES_ANNOTATION = 'agentplane.dev/push-deliveries';

/** Thrown inside the revision quota when a push repeats one already handled (so its place is given back). */
const REPEAT = Symbol('repeated push');

const IMMUTABLE_SOURCE_CONFIG = {
  integration_id: 'integrationId',
  repo_url: 'repoUrl',
  deployment_type: 'deploymentType',
  listener_id: 'listenerId',
} as const;

export type DeploymentService = ReturnType<typeof createDeploymentService>;

export function createDeploymentService(deps: {
  store: ControlPlaneStore;
  logger: Logger;
  policy?: InputPolicy;
  github?: GitHubApp;
  /** Per-workspace quotas (default: DEFAULT_QUOTAS on the real clock). */
  quotas?: Quotas;
}) {
  const { store, logger } = deps;
  const ns = store.namespace;
  const quotas = deps.quotas ?? createQuotas({ store });
  const { policyIssues, referenceIssues, assertHostFree, claimHost, releaseHostQuietly } = createTenantChecks(deps);
  // Name uniqueness per tenant: the store's name claims make it atomic across processes (replicas); this lock only
  // keeps one process from racing itself (and from creating deployments that lose the claim and are removed again).
  const tenantLocks = new Map<string, Promise<unknown>>();

  function withTenantLock<T>(tenant: string, fn: () => Promise<T>): Promise<T> {
    const prev = tenantLocks.get(tenant) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => undefined);
    tenantLocks.set(tenant, tail);
    void tail.then(() => {
      if (tenantLocks.get(tenant) === tail) tenantLocks.delete(tenant);
    });
    return next;
  }

  /** The workspace's deployments that are not being deleted (the deployments quota counts these). */
  async function deploymentCount(tenant: string): Promise<number> {
    const { items } = await store.list('AgentDeployment', ns, { labelSelector: `${LABEL_TENANT}=${tenant}` });
    return items.filter((d) => d.spec.tenantId === tenant && !d.metadata.deletionTimestamp).length;
  }

  /** Runs `fn`, which makes one revision, within the hourly revision quota; a failed `fn` gives its place back. */
  async function withRevisionQuota<T>(tenant: string, fn: () => Promise<T>): Promise<T> {
    const giveBack = await quotas.reserveRevision(tenant);
    try {
      return await fn();
    } catch (err) {
      await giveBack().catch((e: unknown) =>
        logger.warn({ err: e, tenant }, 'giving a revision quota place back failed'),
      );
      throw err;
    }
  }

  const nameHash = (name: string) => createHash('sha256').update(name).digest('hex').slice(0, 40);

  async function assertNameFree(tenant: string, name: string, exceptId?: string): Promise<void> {
    const { items } = await store.list('AgentDeployment', ns, {
      labelSelector: `${LABEL_TENANT}=${tenant},${LABEL_NAME_HASH}=${nameHash(name)}`,
    });
    // A deployment being deleted no longer holds its name (its claim is stale and gets taken over).
    if (
      items.some(
        (d) => d.spec.displayName === name && d.spec.deploymentId !== exceptId && !d.metadata.deletionTimestamp,
      )
    ) {
      throw nameTaken(name);
    }
  }

  function nameTaken(name: string): ConflictError {
    return new ConflictError(`A deployment named "${name}" already exists in this tenant.`);
  }

  /** Claims `name` for `dep` in the store (atomic across processes); a live holder -> 409. */
  async function claimName(tenant: string, name: string, dep: AgentDeployment): Promise<void> {
    try {
      await store.claimName(ns, tenant, name, { name: dep.metadata.name, uid: dep.metadata.uid! });
    } catch (err) {
      if (err instanceof AlreadyExistsError) throw nameTaken(name);
      throw err;
    }
  }

  function notFound(id: string): NotFoundError {
    return new NotFoundError(`Deployment ID ${id} not found.`);
  }

  async function requireDeployment(tenant: string, id: string): Promise<AgentDeployment> {
    if (!isUuid(id)) throw notFound(id);
    try {
      const dep = await store.get('AgentDeployment', ns, deploymentName(id));
      if (dep.spec.tenantId !== tenant) throw notFound(id);
      return dep;
    } catch (err) {
      if (err instanceof NotFoundError) throw notFound(id);
      throw err;
    }
  }

  async function revisionsOf(dep: AgentDeployment): Promise<AgentRevision[]> {
    const { items } = await store.list('AgentRevision', ns, {
      labelSelector: `${LABEL_DEPLOYMENT}=${dep.metadata.name}`,
    });
    return items.sort((a, b) => b.spec.revisionNumber - a.spec.revisionNumber);
  }

  async function getOptional(name: string | undefined): Promise<AgentRevision | undefined> {
    if (!name) return undefined;
    try {
      return await store.get('AgentRevision', ns, name);
    } catch (err) {
      if (err instanceof NotFoundError) return undefined;
      throw err;
    }
  }

  /** Secret names are not secret: kept in an annotation so rendering needs no Secret read (older objects: read). */
  async function secretNamesOf(dep: AgentDeployment): Promise<string[]> {
    if (!dep.spec.secretsName) return [];
    const ann = dep.metadata.annotations?.[SECRET_NAMES_ANNOTATION];
    if (ann !== undefined) return ann ? ann.split(',') : [];
    return store.secretNames(ns, dep.spec.secretsName).catch(() => []);
  }

  async function render(dep: AgentDeployment, revisions?: Map<string, AgentRevision>): Promise<Deployment> {
    const rev = (name: string | undefined) =>
      revisions ? Promise.resolve(name ? revisions.get(name) : undefined) : getOptional(name);
    const [latestRevision, activeRevision, secretNames] = await Promise.all([
      rev(latestRevisionName(dep)),
      rev(dep.status?.activeRevisionName),
      secretNamesOf(dep),
    ]);
    return toApiDeployment(dep, { secretNames: [...secretNames].sort(), latestRevision, activeRevision });
  }

  /** Creates revision n of `dep` ("ensure": an operator may have made it already). */
  async function ensureRevision(dep: AgentDeployment): Promise<AgentRevision> {
    const rev = makeRevision(dep);
    try {
      const created = await store.create('AgentRevision', rev);
      const listenerId = dep.spec.sourceConfig.listenerId;
      if (!listenerId) return created;
      // Nobody here builds it: say who will, until that listener reports on it.
      return await store.updateStatus('AgentRevision', {
        ...created,
        status: { phase: 'QUEUED', statusMessage: waitingMessage(listenerId) },
      });
    } catch (err) {
      if (err instanceof AlreadyExistsError) return store.get('AgentRevision', ns, rev.metadata.name);
      throw err;
    }
  }

  /**
   * Drops `owner`'s claim on `name`. A failure only leaves the name reserved for this deployment until it is deleted
   * (the rename itself is done), so it is logged, not answered.
   */
  async function releaseNameQuietly(tenant: string, name: string, owner: { name: string; uid: string }) {
    await store
      .releaseName(ns, tenant, name, owner)
      .catch((err: unknown) => logger.warn({ err, deployment: owner.name, name }, 'releasing a name claim failed'));
  }

  /** Re-reads and re-applies `change` when someone else (the operator) wrote the deployment meanwhile. */
  async function updateDeployment(
    tenant: string,
    id: string,
    change: (dep: AgentDeployment) => Promise<AgentDeployment | undefined>,
  ): Promise<AgentDeployment> {
    for (let attempt = 0; ; attempt++) {
      const dep = await requireDeployment(tenant, id);
      if (dep.metadata.deletionTimestamp) throw new ConflictError(`Deployment ID ${id} is being deleted.`);
      const next = await change(structuredClone(dep));
      if (!next) return dep;
      next.metadata.annotations = { ...next.metadata.annotations, [UPDATED_AT_ANNOTATION]: new Date().toISOString() };
      try {
        return await store.update('AgentDeployment', next);
      } catch (err) {
        if (err instanceof StaleResourceVersionError && attempt < 10) continue;
        throw err;
      }
    }
  }

  /** Stores a new immutable secret set for revision n; returns its name. */
  async function putSecretSet(dep: AgentDeployment, n: number, secrets: { name: string; value: string }[]) {
    const name = secretsName(dep.metadata.name, n);
    const owner = { kind: 'AgentDeployment' as const, name: dep.metadata.name, uid: dep.metadata.uid! };
    try {
      await store.putSecrets(ns, name, owner, Object.fromEntries(secrets.map((s) => [s.name, s.value])));
    } catch (err) {
      // A retry of the same revision number after a lost race: replace the orphaned set.
      if (!(err instanceof AlreadyExistsError)) throw err;
      await store.deleteSecrets(ns, name);
      await store.putSecrets(ns, name, owner, Object.fromEntries(secrets.map((s) => [s.name, s.value])));
    }
    return name;
  }

  /** Creates the deployment, its name (and host) claim, secrets and first revision; all or nothing. */
  async function createNow(tenant: string, body: DeploymentCreate, host: string | undefined): Promise<Deployment> {
    await assertNameFree(tenant, body.name);
    if (host) await assertHostFree(host);
    const id = randomUUID();
    const name = deploymentName(id);
    const sourceConfig: SourceConfig = {
      deploymentType: 'dev',
      buildOnPush: false,
      ...sourceConfigFromApi(body.source_config),
    };
    const src = sourceRevisionConfigFromApi(body.source_revision_config);
    const now = new Date().toISOString();
    const input: AgentDeployment = {
      apiVersion: API_VERSION,
      kind: 'AgentDeployment',
      metadata: {
        name,
        namespace: ns,
        labels: { [LABEL_TENANT]: tenant, [LABEL_DEPLOYMENT_ID]: id, [LABEL_NAME_HASH]: nameHash(body.name) },
        annotations: {
          [UPDATED_AT_ANNOTATION]: now,
          [SECRET_NAMES_ANNOTATION]: body.secrets.map((x) => x.name).join(','),
        },
      },
      spec: {
        deploymentId: id,
        tenantId: tenant,
        displayName: body.name,
        source: body.source,
        sourceConfig,
        sourceRevisionConfig: {
          repoRef: src.repoRef ?? null,
          graphConfigPath: src.graphConfigPath ?? (body.source === 'github' ? 'langgraph.json' : null),
          imageUri: src.imageUri ?? null,
        },
        secretsName: body.secrets.length ? secretsName(name, 1) : null,
        secretReferences: secretReferencesFromApi(body.secret_references),
        revisionCounter: 1,
        targetRevisionName: revisionName(name, 1),
      },
    };
    const dep = await store.create('AgentDeployment', input);
    // Compensation: any failure below removes the deployment, and with it (owner GC) its name claim, secrets and
    // revision. The claim comes first: another process creating the same name at once loses here.
    try {
      await claimName(tenant, body.name, dep);
      if (host) await claimHost(host, dep);
      if (body.secrets.length) await putSecretSet(dep, 1, body.secrets);
      await ensureRevision(dep);
    } catch (err) {
      await store
        .delete('AgentDeployment', ns, name)
        .catch((e: unknown) => logger.error({ err: e, deployment: name }, 'compensating delete failed'));
      throw err;
    }
    logger.info({ deployment_id: id, tenant }, 'deployment created');
    return render(dep);
  }

  return {
    async create(tenant: string, body: DeploymentCreate): Promise<Deployment> {
      refuse(policyIssues(body.source_config.resource_spec, body.source_config.custom_url));
      refuse(await referenceIssues(tenant, body.source_config.resource_spec, body.secret_references));
      refuse(
        await integrationIssues(
          store,
          tenant,
          body.source_config.integration_id,
          body.source_config.repo_url,
          deps.github,
        ),
      );
      await listenerIssues(
        store,
        tenant,
        body.source_config.listener_id,
        body.source_config.listener_config?.k8s_namespace,
      );
      const host = hostOf(body.source_config.custom_url);
      return withTenantLock(tenant, () =>
        quotas.admit(
          tenant,
          'deployments',
          () => deploymentCount(tenant),
          () => withRevisionQuota(tenant, () => createNow(tenant, body, host)),
        ),
      );
    },

    async get(tenant: string, id: string): Promise<Deployment> {
      return render(await requireDeployment(tenant, id));
    },

    async list(
      tenant: string,
      q: {
        limit: number;
        offset: number;
        name_contains?: string;
        status?: string[];
        deployment_type?: string;
        deployment_ids?: string[];
      },
    ): Promise<{ resources: Deployment[]; offset: number }> {
      const selector = { labelSelector: `${LABEL_TENANT}=${tenant}` };
      // Two list calls for the whole page instead of reads per deployment.
      const [{ items }, { items: revs }] = await Promise.all([
        store.list('AgentDeployment', ns, selector),
        store.list('AgentRevision', ns, selector),
      ]);
      const byName = new Map(revs.map((r) => [r.metadata.name, r]));
      const rendered = await Promise.all(items.filter((d) => d.spec.tenantId === tenant).map((d) => render(d, byName)));
      const needle = q.name_contains?.toLowerCase();
      const filtered = rendered
        .filter((d) => !needle || d.name.toLowerCase().includes(needle))
        .filter((d) => !q.status?.length || q.status.includes(d.status))
        .filter((d) => !q.deployment_type || d.source_config.deployment_type === q.deployment_type)
        .filter((d) => !q.deployment_ids?.length || q.deployment_ids.includes(d.id))
        .sort((a, b) => (a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : a.id < b.id ? -1 : 1));
      const page = filtered.slice(q.offset, q.offset + q.limit);
      return { resources: page, offset: q.offset + page.length };
    },

    async patch(tenant: string, id: string, body: DeploymentPatch): Promise<Deployment> {
      const current = await requireDeployment(tenant, id);
      if (body.source !== undefined && body.source !== current.spec.source) {
        throw new BadRequestError('source is immutable and cannot be changed.');
      }
      const changes = body.source_config ? sourceConfigFromApi(body.source_config) : {};
      for (const [apiKey, specKey] of Object.entries(IMMUTABLE_SOURCE_CONFIG)) {
        const v = changes[specKey];
        if (v !== undefined && (v ?? null) !== (current.spec.sourceConfig[specKey] ?? null)) {
          throw new BadRequestError(`source_config.${apiKey} is immutable and cannot be changed.`);
        }
      }
      refuse(policyIssues(body.source_config?.resource_spec, body.source_config?.custom_url));
      refuse(await referenceIssues(tenant, body.source_config?.resource_spec, body.secret_references));
      const srcChange = body.source_revision_config ? sourceRevisionConfigFromApi(body.source_revision_config) : {};
      const secrets = body.secrets?.length ? body.secrets : undefined;
      // source_revision_config present, even unchanged or empty, asks for a new revision (a rebuild of the ref).
      const newRevision =
        body.source_revision_config != null ||
        body.source_config?.resource_spec !== undefined ||
        (body.source_config?.access_mode !== undefined &&
          body.source_config.access_mode !== (current.spec.sourceConfig.accessMode ?? 'api_key')) ||
        secrets !== undefined ||
        body.secret_references !== undefined;

      const apply = async (): Promise<AgentDeployment> => {
        let secretSet: string | undefined;
        let claimed: { oldName: string; newName: string; owner: { name: string; uid: string } } | undefined;
        let hostMoved: { oldHost?: string; newHost?: string; owner: { name: string; uid: string } } | undefined;
        try {
          const updated = await updateDeployment(tenant, id, async (dep) => {
            claimed = undefined; // a retry starts from the re-read deployment
            hostMoved = undefined;
            const s = dep.spec;
            if (body.source_config?.custom_url !== undefined) {
              const oldHost = hostOf(s.sourceConfig.customUrl);
              const newHost = hostOf(body.source_config.custom_url);
              if (newHost !== oldHost) {
                const owner = { name: dep.metadata.name, uid: dep.metadata.uid! };
                // Like a rename: claim the new host before the deployment carries it, release the old one after.
                if (newHost) {
                  await assertHostFree(newHost, id);
                  await claimHost(newHost, dep);
                }
                hostMoved = { oldHost, newHost, owner };
              }
            }
            if (body.name !== undefined && body.name !== s.displayName) {
              await assertNameFree(tenant, body.name, id);
              // Claim the new name before the deployment carries it; the old claim goes once the rename is written.
              await claimName(tenant, body.name, dep);
              claimed = {
                oldName: s.displayName,
                newName: body.name,
                owner: { name: dep.metadata.name, uid: dep.metadata.uid! },
              };
              s.displayName = body.name;
              dep.metadata.labels = { ...dep.metadata.labels, [LABEL_NAME_HASH]: nameHash(body.name) };
            }
            // Key by key; resource_spec (when given) replaces the old one whole.
            s.sourceConfig = { ...s.sourceConfig, ...changes };
            if (body.source_config?.resource_spec !== undefined) {
              s.sourceConfig.resourceSpec = resourceSpecFromApi(body.source_config.resource_spec) ?? null;
            }
            s.sourceRevisionConfig = { ...s.sourceRevisionConfig, ...srcChange };
            const ref = s.sourceRevisionConfig.repoRef;
            if (s.sourceConfig.buildOnPush && ref?.startsWith('refs/tags/')) {
              throw new ValidationError('build_on_push must be false when repo_ref is a tag', [
                {
                  loc: ['body', 'source_config', 'build_on_push'],
                  msg: 'must be false when repo_ref is a tag (refs/tags/...)',
                  type: 'value_error',
                },
              ]);
            }
            if (body.secret_references !== undefined)
              s.secretReferences = secretReferencesFromApi(body.secret_references);
            if (newRevision) {
              s.revisionCounter += 1;
              s.targetRevisionName = revisionName(dep.metadata.name, s.revisionCounter);
              if (secrets) {
                if (secretSet) await store.deleteSecrets(ns, secretSet);
                secretSet = await putSecretSet(dep, s.revisionCounter, secrets);
                s.secretsName = secretSet;
                dep.metadata.annotations = {
                  ...dep.metadata.annotations,
                  [SECRET_NAMES_ANNOTATION]: secrets.map((x) => x.name).join(','),
                };
              }
            }
            return dep;
          });
          if (claimed) await releaseNameQuietly(tenant, claimed.oldName, claimed.owner);
          if (hostMoved?.oldHost) await releaseHostQuietly(hostMoved.oldHost, hostMoved.owner);
          return updated;
        } catch (err) {
          if (secretSet) await store.deleteSecrets(ns, secretSet).catch(() => undefined);
          if (claimed) await releaseNameQuietly(tenant, claimed.newName, claimed.owner);
          if (hostMoved?.newHost) await releaseHostQuietly(hostMoved.newHost, hostMoved.owner);
          throw err;
        }
      };

      const applied = body.name !== undefined ? () => withTenantLock(tenant, apply) : apply;
      if (!newRevision) return render(await applied());
      const dep = await withRevisionQuota(tenant, applied);
      await ensureRevision(dep);
      logger.info({ deployment_id: id, revision: dep.spec.targetRevisionName }, 'revision created');
      return render(dep);
    },

    async delete(tenant: string, id: string): Promise<void> {
      const dep = await requireDeployment(tenant, id);
      try {
        await store.delete('AgentDeployment', ns, dep.metadata.name);
      } catch (err) {
        if (err instanceof NotFoundError) throw notFound(id);
        throw err;
      }
      logger.info(
        { deployment_id: id },
        dep.metadata.finalizers?.length ? 'deployment marked for deletion' : 'deployment deleted',
      );
    },

    async listRevisions(
      tenant: string,
      id: string,
      q: { limit: number; offset: number; status?: string[] },
    ): Promise<{ resources: Revision[]; offset: number }> {
      const dep = await requireDeployment(tenant, id);
      const all = (await revisionsOf(dep))
        .map(toApiRevision)
        .filter((r) => !q.status?.length || q.status.includes(r.status));
      const page = all.slice(q.offset, q.offset + q.limit);
      return { resources: page, offset: q.offset + page.length };
    },

    async requireRevision(
      tenant: string,
      id: string,
      revisionId: string,
    ): Promise<{ dep: AgentDeployment; rev: AgentRevision }> {
      const dep = await requireDeployment(tenant, id);
      const rev = isUuid(revisionId) ? (await revisionsOf(dep)).find((r) => r.metadata.uid === revisionId) : undefined;
      if (!rev) throw new NotFoundError(`Revision ID ${revisionId} not found.`);
      return { dep, rev };
    },

    async getRevision(tenant: string, id: string, revisionId: string): Promise<Revision> {
      return toApiRevision((await this.requireRevision(tenant, id, revisionId)).rev);
    },

    /** A new revision from the deployment's current settings (e.g. to rebuild the same ref). */
    async createRevision(tenant: string, id: string): Promise<Revision> {
      await requireDeployment(tenant, id); // a missing deployment is a 404, not a quota answer
      const dep = await withRevisionQuota(tenant, () =>
        updateDeployment(tenant, id, async (d) => {
          d.spec.revisionCounter += 1;
          d.spec.targetRevisionName = revisionName(d.metadata.name, d.spec.revisionCounter);
          return d;
        }),
      );
      return toApiRevision(await ensureRevision(dep));
    },

    /**
     * Build on push: a new revision unless one of `keys` (the webhook's delivery id, the pushed commit) already made
     * one for the deployment. The last keys are kept on the deployment and written together with the new revision
     * number, so a redelivery racing the first one loses on the resource version. Undefined: a repeat.
     */
    async createRevisionOnPush(tenant: string, id: string, keys: string[]): Promise<Revision | undefined> {
      let repeat = false;
      const dep = await withRevisionQuota(tenant, async () => {
        const updated = await updateDeployment(tenant, id, async (d) => {
          const seen = (d.metadata.annotations?.[PUSH_DELIVERIES_ANNOTATION] ?? '').split(',').filter(Boolean);
          repeat = keys.some((k) => seen.includes(k));
          if (repeat) return undefined;
          d.metadata.annotations = {
            ...d.metadata.annotations,
            [PUSH_DELIVERIES_ANNOTATION]: [...seen, ...keys].slice(-40).join(','),
          };
          d.spec.revisionCounter += 1;
          d.spec.targetRevisionName = revisionName(d.metadata.name, d.spec.revisionCounter);
          return d;
        });
        // A repeated delivery makes no revision: its place goes back.
        if (repeat) throw REPEAT;
        return updated;
      }).catch((err: unknown) => {
        if (err === REPEAT) return undefined;
        throw err;
      });
      if (!dep) return undefined;
      const rev = await ensureRevision(dep);
      logger.info({ deployment_id: id, revision: rev.metadata.name }, 'revision created on push');
      return toApiRevision(rev);
    },

    /** Points the deployment's traffic at an existing revision; the runtime rolls to it. */
    async redeploy(tenant: string, id: string, revisionId: string): Promise<Deployment> {
      const { rev } = await this.requireRevision(tenant, id, revisionId);
      const dep = await updateDeployment(tenant, id, async (d) =>
        d.spec.targetRevisionName === rev.metadata.name
          ? undefined
          : { ...d, spec: { ...d.spec, targetRevisionName: rev.metadata.name } },
      );
      return render(dep);
    },

    async logs(
      tenant: string,
      id: string,
      revisionId: string,
      q: { type: 'build' | 'deploy'; limit: number; offset?: string; order: 'asc' | 'desc'; limit_bytes: number },
    ) {
      const { rev } = await this.requireRevision(tenant, id, revisionId);
      const page = await store.readLogs(ns, rev.metadata.name, q);
      // Paged by bytes as well as lines: the page ends before its messages pass limit_bytes (at least one line, so a
      // reader always moves on); the cursor is then the last line given, in either order.
      const logs: typeof page.logs = [];
      let bytes = 0;
      for (const l of page.logs) {
        const message = redactUrlsIn(l.message);
        bytes += Buffer.byteLength(message);
        if (logs.length && bytes > q.limit_bytes) break;
        logs.push({ ...l, message });
      }
      const cut = logs.length < page.logs.length;
      return { logs, next_offset: cut ? logs[logs.length - 1]!.id : page.next_offset };
    },
  };
}
