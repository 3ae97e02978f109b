// Listeners v2: data planes that dial out to the control plane. The control plane keeps the listener records, hands
// each listener the deployments assigned to it (a level-triggered snapshot with a digest as resume cursor, served by
// long poll) and takes back what the data plane reports: statuses, URLs and build/deploy log lines.
import { createHash, randomUUID } from 'node:crypto';
import { z } from 'zod';
import { AppError, BadRequestError, ConflictError, NotFoundError, ValidationError } from '../../lib/errors.ts';
import type { Logger } from '../../lib/logger.ts';
import { admitLogLines, DEFAULT_LOG_LIMITS, type LogLimits, type LogUsage } from '../../lib/log-limits.ts';
import { redactUrlsIn } from '../../lib/redact.ts';
import {
  LABEL_DEPLOYMENT,
  LABEL_TENANT,
  agentDeploymentStatusSchema,
  agentRevisionStatusSchema,
  isUuid,
  type AgentDeployment,
  type AgentRevision,
} from '../../resources/index.ts';
import { createApiKey } from '../auth/keys.ts';
import { agentKeyHashes } from '../auth/key-publisher.ts';
import type { GitHubApp } from './integrations-github.ts';
import { createQuotas, type Quotas } from './quotas.ts';
import { buildCredentialResolver } from './integrations.ts';
import { baseUrlProblem, reportedUrlProblem } from './listener-rules.ts';
import {
  StaleResourceVersionError,
  type ControlPlaneStore,
  type ListenerRecord,
  type LogType,
} from '../store/types.ts';

/** Annotations on the control plane's revision: the id of the last data-plane log line taken in, per type. */
export const LOG_CURSOR_ANNOTATION: Record<LogType, string> = {
  build: 'agentplane.dev/listener-log-build',
  deploy: 'agentplane.dev/listener-log-deploy',
};

/** Annotations on the control plane's revision: lines and bytes stored from the data plane, per type ("n,b[,t]"). */
export const LOG_USAGE_ANNOTATION: Record<LogType, string> = {
  build: 'agentplane.dev/listener-log-build-usage',
  deploy: 'agentplane.dev/listener-log-deploy-usage',
};

function parseUsage(value: string | undefined): LogUsage {
  const [lines, bytes, truncated] = (value ?? '').split(',');
  return { lines: Number(lines) || 0, bytes: Number(bytes) || 0, truncated: truncated === 't' };
}

const formatUsage = (u: LogUsage) => `${u.lines},${u.bytes}${u.truncated ? ',t' : ''}`;

const baseUrl = z
  .string()
  .max(2048)
  .superRefine((v, ctx) => {
    const problem = baseUrlProblem(v);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

export function waitingMessage(listenerId: string): string {
  return `waiting for listener ${listenerId} to connect`;
}

export const ListenerCreate = z
  .object({
    compute_type: z.enum(['k8s', 'local']),
    compute_id: z
      .string()
      .min(1)
      .max(253)
      .regex(/^[^\p{Cc}]*$/u, 'must not contain control characters'),
    compute_config: z
      .object({ k8s_namespaces: z.array(z.string().regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/)).max(100) })
      .strict()
      .default({ k8s_namespaces: [] }),
    version: z.string().max(100).nullable().optional(),
    /** Where this listener's deployments are served; the URLs it reports must lie under it. */
    base_url: baseUrl.nullable().optional(),
  })
  .strict();
export type ListenerCreate = z.infer<typeof ListenerCreate>;

export const ListenerPatch = z
  .object({
    compute_config: ListenerCreate.shape.compute_config.removeDefault().optional(),
    version: z.string().max(100).nullable().optional(),
    base_url: baseUrl.nullable().optional(),
    compute_id: z.unknown().optional(),
    compute_type: z.unknown().optional(),
  })
  .strict();
export type ListenerPatch = z.infer<typeof ListenerPatch>;

export const Listener = z.object({
  id: z.string(),
  tenant_id: z.string(),
  compute_type: z.enum(['k8s', 'local']),
  compute_id: z.string(),
  compute_config: z.object({ k8s_namespaces: z.array(z.string()) }),
  version: z.string().nullable(),
  base_url: z.string().nullable(),
  connected: z.boolean(),
  last_seen_at: z.string().nullable(),
  agent_version: z.string().nullable(),
  deployment_count: z.number().int(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type Listener = z.infer<typeof Listener>;

const logEntry = z.object({ id: z.string().regex(/^\d{1,15}$/), message: z.string().max(65_536) });
const logBatch = z.array(logEntry).max(2_000);
export const ListenerReport = z
  .object({
    agent_version: z.string().max(100).optional(),
    deployments: z
      .array(
        z.object({
          deployment_id: z.string(),
          status: agentDeploymentStatusSchema
            .pick({ phase: true, url: true, activeRevisionName: true, latestRevisionName: true })
            .extend({ url: z.string().max(2048).optional() })
            .strict(),
          revisions: z
            .array(
              z.object({
                name: z.string().max(253),
                status: agentRevisionStatusSchema
                  .pick({ phase: true, statusMessage: true, image: true, repoCommitSha: true })
                  .extend({ statusMessage: z.string().max(16_384).optional() })
                  .strict(),
                logs: z.object({ build: logBatch.optional(), deploy: logBatch.optional() }).strict().optional(),
              }),
            )
            .max(1_000),
        }),
      )
      .max(1_000),
  })
  .strict();
export type ListenerReport = z.infer<typeof ListenerReport>;

/** What a listener must run: its deployments, their revisions, the env values they need, and the tenant's key hashes. */
export type ListenerSnapshot = {
  cursor: string;
  deployments: {
    name: string;
    annotations: Record<string, string>;
    spec: AgentDeployment['spec'];
    revisions: { name: string; spec: AgentRevision['spec']; log_cursors: Record<LogType, string | null> }[];
  }[];
  /** Environment values by secret set name (only the sets the snapshot's objects name). */
  secrets: Record<string, Record<string, string>>;
  /** SHA-256 hashes of the keys the tenant's agents accept. */
  key_hashes: string[];
  /** The namespaces the listener offers (compute_config.k8s_namespaces): where it looks for what it made. */
  namespaces: string[];
};

export const ListenerGitCredentialRequest = z
  .object({
    integration_id: z.string().uuid('must be the id (a UUID) of an integration'),
    repo_url: z.string().min(1).max(2048),
  })
  .strict();
export type ListenerGitCredentialRequest = z.infer<typeof ListenerGitCredentialRequest>;

export const ListenerGitCredential = z.object({
  host: z.string(),
  username: z.string(),
  token: z.string(),
  expires_at: z.string().optional(),
});
export type ListenerGitCredential = z.infer<typeof ListenerGitCredential>;

export type ListenerService = ReturnType<typeof createListenerService>;

export function createListenerService(deps: {
  store: ControlPlaneStore;
  logger: Logger;
  /** A listener not heard from for this long shows as disconnected (default 30 s). */
  heartbeatTimeoutMs?: number;
  /** The control plane's GitHub App: mints the clone tokens handed to listeners. */
  github?: GitHubApp;
  /** What a pushed log may store per revision and type (default: as local builds). */
  logLimits?: LogLimits;
  /** Per-workspace quotas (default: DEFAULT_QUOTAS). */
  quotas?: Quotas;
}) {
  const { store, logger } = deps;
  const quotas = deps.quotas ?? createQuotas({ store });
  const resolveCredential = buildCredentialResolver(store, deps.github);
  const ns = store.namespace;
  const timeoutMs = deps.heartbeatTimeoutMs ?? 30_000;

  const notFound = (id: string) => new NotFoundError(`Listener ID ${id} not found.`);

  async function require(tenant: string, id: string): Promise<ListenerRecord> {
    const r = isUuid(id) ? await store.getListener(tenant, id) : undefined;
    if (!r) throw notFound(id);
    return r;
  }

  async function deploymentsOf(tenant: string, id: string): Promise<AgentDeployment[]> {
    const { items } = await store.list('AgentDeployment', ns, { labelSelector: `${LABEL_TENANT}=${tenant}` });
    return items
      .filter((d) => d.spec.tenantId === tenant && d.spec.sourceConfig.listenerId === id)
      .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  }

  function toApi(r: ListenerRecord, count: number): Listener {
    const seen = r.lastSeenAt ? Date.parse(r.lastSeenAt) : NaN;
    return {
      id: r.id,
      tenant_id: r.tenant,
      compute_type: r.computeType,
      compute_id: r.computeId,
      compute_config: { k8s_namespaces: r.computeConfig.k8sNamespaces },
      version: r.version,
      base_url: r.baseUrl ?? null,
      connected: Number.isFinite(seen) && Date.now() - seen < timeoutMs,
      last_seen_at: r.lastSeenAt ?? null,
      agent_version: r.agentVersion ?? null,
      deployment_count: count,
      created_at: r.createdAt,
      updated_at: r.updatedAt,
    };
  }

  async function render(r: ListenerRecord): Promise<Listener> {
    return toApi(r, (await deploymentsOf(r.tenant, r.id)).filter((d) => !d.metadata.deletionTimestamp).length);
  }

  /** Heartbeat: written at most every few seconds per listener (a record write per long poll is plenty). */
  const lastWrite = new Map<string, number>();
  async function touch(r: ListenerRecord, agentVersion?: string): Promise<void> {
    const now = Date.now();
    const changedVersion = agentVersion !== undefined && agentVersion !== r.agentVersion;
    if (!changedVersion && now - (lastWrite.get(r.id) ?? 0) < 5_000) return;
    lastWrite.set(r.id, now);
    const wasSeen = r.lastSeenAt ? Date.parse(r.lastSeenAt) : 0;
    if (now - wasSeen >= timeoutMs) logger.info({ listener_id: r.id, tenant: r.tenant }, 'listener connected');
    await store.updateListener({
      ...r,
      lastSeenAt: new Date(now).toISOString(),
      ...(agentVersion !== undefined ? { agentVersion } : {}),
    });
  }

  async function snapshot(r: ListenerRecord): Promise<ListenerSnapshot> {
    const deployments = (await deploymentsOf(r.tenant, r.id)).filter((d) => !d.metadata.deletionTimestamp);
    const out: ListenerSnapshot['deployments'] = [];
    const setNames = new Set<string>();
    for (const d of deployments) {
      const { items } = await store.list('AgentRevision', ns, {
        labelSelector: `${LABEL_DEPLOYMENT}=${d.metadata.name}`,
      });
      const revisions = items
        .filter((x) => x.spec.tenantId === r.tenant)
        .sort((a, b) => a.spec.revisionNumber - b.spec.revisionNumber);
      if (d.spec.secretsName) setNames.add(d.spec.secretsName);
      for (const x of revisions) if (x.spec.secretsName) setNames.add(x.spec.secretsName);
      out.push({
        name: d.metadata.name,
        annotations: Object.fromEntries(
          Object.entries(d.metadata.annotations ?? {}).filter(([k]) => k.startsWith('agentplane.dev/secret-names')),
        ),
        spec: d.spec,
        revisions: revisions.map((x) => ({
          name: x.metadata.name,
          spec: x.spec,
          log_cursors: {
            build: x.metadata.annotations?.[LOG_CURSOR_ANNOTATION.build] ?? null,
            deploy: x.metadata.annotations?.[LOG_CURSOR_ANNOTATION.deploy] ?? null,
          },
        })),
      });
    }
    const secrets: ListenerSnapshot['secrets'] = {};
    for (const name of [...setNames].sort()) {
      secrets[name] = await store.getSecrets(ns, name).catch(() => ({}));
    }
    const keys = await store.listApiKeys();
    const key_hashes = agentKeyHashes(keys, r.tenant);
    // The cursor covers what the data plane must act on; log cursors move with every report and are left out.
    const digestOf = {
      deployments: out.map((d) => ({ ...d, revisions: d.revisions.map((x) => ({ name: x.name, spec: x.spec })) })),
      secrets,
      key_hashes,
      namespaces: r.computeConfig.k8sNamespaces,
    };
    const cursor = createHash('sha256').update(JSON.stringify(digestOf)).digest('hex').slice(0, 32);
    return { cursor, deployments: out, secrets, key_hashes, namespaces: r.computeConfig.k8sNamespaces };
  }

  async function setStatus<T extends AgentDeployment | AgentRevision>(
    kind: T['kind'],
    name: string,
    change: (obj: T) => T | undefined,
  ): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const obj = (await store.get(kind, ns, name)) as unknown as T;
      const next = change(structuredClone(obj));
      if (!next) return;
      try {
        await store.updateStatus(kind, next as never);
        return;
      } catch (err) {
        if (err instanceof StaleResourceVersionError && attempt < 10) continue;
        throw err;
      }
    }
  }

  async function setAnnotations(name: string, values: Record<string, string>): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const rev = await store.get('AgentRevision', ns, name);
      rev.metadata.annotations = { ...rev.metadata.annotations, ...values };
      try {
        await store.update('AgentRevision', rev);
        return;
      } catch (err) {
        if (err instanceof StaleResourceVersionError && attempt < 10) continue;
        throw err;
      }
    }
  }

  return {
    require,

    async list(tenant: string): Promise<{ resources: Listener[] }> {
      const records = await store.listListeners(tenant);
      return { resources: await Promise.all(records.map(render)) };
    },

    async get(tenant: string, id: string): Promise<Listener> {
      return render(await require(tenant, id));
    },

    async create(tenant: string, body: ListenerCreate): Promise<Listener> {
      const now = new Date().toISOString();
      const record: ListenerRecord = {
        id: randomUUID(),
        tenant,
        computeType: body.compute_type,
        computeId: body.compute_id,
        computeConfig: { k8sNamespaces: body.compute_config.k8s_namespaces },
        version: body.version ?? null,
        ...(body.base_url ? { baseUrl: body.base_url } : {}),
        createdAt: now,
        updatedAt: now,
      };
      await quotas.admit(
        tenant,
        'listeners',
        async () => (await store.listListeners(tenant)).length,
        () => store.createListener(record),
      );
      logger.info({ listener_id: record.id, tenant }, 'listener created');
      return toApi(record, 0);
    },

    async patch(tenant: string, id: string, body: ListenerPatch): Promise<Listener> {
      const r = await require(tenant, id);
      if (body.compute_id !== undefined && body.compute_id !== r.computeId)
        throw new BadRequestError('compute_id is immutable and cannot be changed.');
      if (body.compute_type !== undefined && body.compute_type !== r.computeType)
        throw new BadRequestError('compute_type is immutable and cannot be changed.');
      const next: ListenerRecord = {
        ...r,
        version: body.version === undefined ? r.version : body.version,
        baseUrl: body.base_url === undefined ? r.baseUrl : (body.base_url ?? undefined),
        computeConfig: body.compute_config ? { k8sNamespaces: body.compute_config.k8s_namespaces } : r.computeConfig,
        updatedAt: new Date().toISOString(),
      };
      await store.updateListener(next);
      return render(next);
    },

    async delete(tenant: string, id: string, cascade: boolean): Promise<void> {
      const r = await require(tenant, id);
      const deployments = (await deploymentsOf(tenant, id)).filter((d) => !d.metadata.deletionTimestamp);
      if (deployments.length && !cascade) {
        const names = deployments.map((d) => `${d.spec.displayName} (${d.spec.deploymentId})`).join(', ');
        throw new ConflictError(
          `Listener ID ${id} still has deployments: ${names}. Delete them first or pass cascade=true.`,
        );
      }
      for (const d of deployments) {
        await store.delete('AgentDeployment', ns, d.metadata.name).catch((err: unknown) => {
          if (!(err instanceof NotFoundError)) throw err;
        });
      }
      // Its keys go with it.
      for (const k of await store.listApiKeys()) if (k.listenerId === id) await store.deleteApiKey(k.id);
      await store.deleteListener(tenant, r.id);
      logger.info({ listener_id: id, tenant, deployments: deployments.length }, 'listener deleted');
    },

    /** A key limited to this tenant and this listener's endpoints; shown once. */
    async createKey(tenant: string, id: string, name?: string) {
      const r = await require(tenant, id);
      const { key, record } = await createApiKey(store, {
        tenants: [tenant],
        listenerId: r.id,
        name: name ?? `listener ${r.computeId}`,
      });
      return {
        id: record.id,
        name: record.name,
        listener_id: r.id,
        tenant_id: tenant,
        key,
        created_at: record.createdAt,
      };
    },

    /** Long poll: answers at once when the snapshot's cursor differs from `since`, else when it changes or at `waitMs`. */
    async watch(
      tenant: string,
      id: string,
      since: string | undefined,
      waitMs: number,
      opts: { agentVersion?: string; closed: () => boolean },
    ): Promise<ListenerSnapshot | { cursor: string; unchanged: true }> {
      let r = await require(tenant, id);
      await touch(r, opts.agentVersion);
      const until = Date.now() + waitMs;
      for (;;) {
        const snap = await snapshot(r);
        if (snap.cursor !== since) return snap;
        if (Date.now() >= until || opts.closed()) {
          r = await require(tenant, id);
          await touch(r);
          return { cursor: snap.cursor, unchanged: true };
        }
        await new Promise((res) => setTimeout(res, 500));
        r = await require(tenant, id);
      }
    },

    /**
     * A clone credential for a build on the listener: only for an integration_id + repo_url pair that a deployment
     * assigned to this listener uses, and only of a GitHub App integration (a fresh token, read-only, for that one
     * repository). The stored token or SSH key of a git integration is never handed out: a listener key is an
     * ordinary workspace key, and this must not read back a write-only secret. Never logs the token.
     */
    async gitCredential(tenant: string, id: string, req: ListenerGitCredentialRequest): Promise<ListenerGitCredential> {
      await require(tenant, id);
      const uses = (await deploymentsOf(tenant, id)).some(
        (d) =>
          !d.metadata.deletionTimestamp &&
          d.spec.sourceConfig.integrationId === req.integration_id &&
          d.spec.sourceConfig.repoUrl === req.repo_url,
      );
      if (!uses)
        throw new ConflictError(
          `No deployment assigned to listener ${id} uses integration ${req.integration_id} with this repo_url.`,
        );
      const integration = await store.getIntegration(tenant, req.integration_id);
      if (!integration) throw new NotFoundError(`Integration ${req.integration_id} not found.`);
      if (integration.type !== 'github')
        throw new ConflictError(
          `Integration ${req.integration_id} holds a stored credential, and stored credentials are not handed to ` +
            'data planes: use a GitHub App integration, or give the data plane its own git credentials.',
        );
      const credential = await resolveCredential(tenant, req.integration_id, req.repo_url).catch((err: unknown) => {
        // GitHub's refusals are AppErrors (their status, a one-line message); the resolver's own are conflicts.
        if (err instanceof Error && !(err instanceof AppError)) throw new ConflictError(err.message);
        throw err;
      });
      if (!credential || !('token' in credential))
        throw new ConflictError(`Integration ${req.integration_id} gives no token for this repo_url.`);
      logger.info(
        { listener_id: id, tenant, integration_id: req.integration_id, repo_url: redactUrlsIn(req.repo_url) },
        'git credential handed to listener',
      );
      return {
        host: credential.host,
        username: credential.username ?? 'x-access-token',
        token: credential.token,
        ...(credential.expiresAt ? { expires_at: credential.expiresAt } : {}),
      };
    },

    /** Takes in a data plane's statuses and log lines; only objects assigned to this listener are written. */
    async report(tenant: string, id: string, body: ListenerReport): Promise<{ accepted: number; ignored: string[] }> {
      const r = await require(tenant, id);
      await touch(r, body.agent_version);
      const assigned = await deploymentsOf(tenant, id);
      const find = (deploymentId: string) =>
        isUuid(deploymentId) ? assigned.find((x) => x.spec.deploymentId === deploymentId) : undefined;
      // URLs first, so a refused one leaves nothing half-written.
      body.deployments.forEach((d, i) => {
        const dep = find(d.deployment_id);
        if (d.status.url === undefined || !dep) return;
        const problem = reportedUrlProblem(d.status.url, {
          baseUrl: r.baseUrl,
          customUrl: dep.spec.sourceConfig.customUrl,
        });
        if (problem) {
          throw new ValidationError(`deployments[${i}].status.url ${problem}`, [
            { loc: ['body', 'deployments', i, 'status', 'url'], msg: problem, type: 'value_error' },
          ]);
        }
      });
      const ignored: string[] = [];
      let accepted = 0;
      for (const d of body.deployments) {
        const dep = find(d.deployment_id);
        if (!dep || dep.metadata.deletionTimestamp) {
          ignored.push(d.deployment_id);
          continue;
        }
        const { items } = await store.list('AgentRevision', ns, {
          labelSelector: `${LABEL_DEPLOYMENT}=${dep.metadata.name}`,
        });
        const mine = new Map(items.filter((x) => x.spec.tenantId === tenant).map((x) => [x.metadata.name, x]));
        for (const rev of d.revisions) {
          const current = mine.get(rev.name);
          if (!current) {
            ignored.push(rev.name);
            continue;
          }
          await setStatus<AgentRevision>('AgentRevision', rev.name, (obj) => {
            const status = { ...obj.status, ...rev.status };
            if (rev.status.statusMessage === undefined) delete status.statusMessage;
            return JSON.stringify(status) === JSON.stringify(obj.status ?? {}) ? undefined : { ...obj, status };
          });
          for (const type of ['build', 'deploy'] as const) {
            const entries = rev.logs?.[type];
            if (!entries?.length) continue;
            const after = Number(current.metadata.annotations?.[LOG_CURSOR_ANNOTATION[type]] ?? '0');
            const fresh = entries.filter((e) => Number(e.id) > after).sort((a, b) => Number(a.id) - Number(b.id));
            if (!fresh.length) continue;
            // Bounded as local builds are: lines cut at 8 KiB, at most so many lines and bytes per revision and
            // type, then one line saying so; the cursor still moves on, so the data plane stops resending.
            const usage = parseUsage(current.metadata.annotations?.[LOG_USAGE_ANNOTATION[type]]);
            const lines = admitLogLines(
              fresh.map((e) => e.message),
              usage,
              deps.logLimits ?? DEFAULT_LOG_LIMITS,
            );
            if (lines.length) await store.appendLogs(ns, rev.name, type, lines);
            await setAnnotations(rev.name, {
              [LOG_CURSOR_ANNOTATION[type]]: fresh[fresh.length - 1]!.id,
              [LOG_USAGE_ANNOTATION[type]]: formatUsage(usage),
            });
          }
          accepted++;
        }
        const known = (name: string | undefined) => name === undefined || mine.has(name);
        if (!known(d.status.activeRevisionName) || !known(d.status.latestRevisionName)) {
          ignored.push(d.deployment_id);
          continue;
        }
        await setStatus<AgentDeployment>('AgentDeployment', dep.metadata.name, (obj) => {
          const status = { ...obj.status, ...d.status };
          return JSON.stringify(status) === JSON.stringify(obj.status ?? {}) ? undefined : { ...obj, status };
        });
        accepted++;
      }
      return { accepted, ignored };
    },
  };
}

/** 404 unless `listenerId` names a listener of `tenant`; 422 when the namespace is not one the listener offers. */
export async function listenerIssues(
  store: ControlPlaneStore,
  tenant: string,
  listenerId: string | null | undefined,
  namespace: string | undefined,
): Promise<void> {
  if (!listenerId) return;
  const r = isUuid(listenerId) ? await store.getListener(tenant, listenerId) : undefined;
  if (!r) throw new NotFoundError(`Listener ID ${listenerId} not found.`);
  const allowed = r.computeConfig.k8sNamespaces;
  if (namespace !== undefined && allowed.length && !allowed.includes(namespace)) {
    throw new ValidationError(`listener ${listenerId} does not offer namespace ${namespace}`, [
      {
        loc: ['body', 'source_config', 'listener_config', 'k8s_namespace'],
        msg: `must be one of the listener's k8s_namespaces: ${allowed.join(', ')}`,
        type: 'value_error',
      },
    ]);
  }
}
