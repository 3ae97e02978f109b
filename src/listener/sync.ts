// The listener's two loops, both dialling out: `watch` long-polls the control plane for the deployments assigned to
// this listener and makes the local store match (create, update, delete: level-triggered, so a restart or a long
// absence converges and nothing is made twice); `report` sends back what the local operator made of them (statuses,
// URL, build/deploy log lines after the control plane's cursor). Works on any store of the port: the embedded one with
// the local runtime, or a cluster's custom resources for its operator.
import { isDeepStrictEqual } from 'node:util';
import { describeError, NotFoundError } from '../lib/errors.ts';
import type { Logger } from '../lib/logger.ts';
import { redactUrlsIn } from '../lib/redact.ts';
import { callListenerApi, ListenerApiError } from './control-plane.ts';
import {
  API_VERSION,
  LABEL_DEPLOYMENT,
  LABEL_DEPLOYMENT_ID,
  LABEL_REVISION_NUMBER,
  LABEL_TENANT,
  ownerReferenceTo,
  type AgentDeployment,
  type AgentRevision,
  type SourceConfig,
} from '../resources/index.ts';
import type { ListenerReport, ListenerSnapshot } from '../control-plane/schemas/listeners.ts';
import { AlreadyExistsError, StaleResourceVersionError } from '../state/errors.ts';
import type { ResourceStore } from '../state/resources.ts';
import type { SecretStore } from '../state/secrets.ts';
import type { LogType, RevisionLogStore } from '../state/revision-logs.ts';
import type { TenantKeySink } from '../state/api-keys.ts';

/** Marks the local objects this listener manages (its listener id). */
export const LABEL_LISTENER = 'agentplane.dev/listener';

export type ListenerSyncOptions = {
  controlPlaneUrl: string;
  apiKey: string;
  tenant: string;
  listenerId: string;
  store: ResourceStore & SecretStore & RevisionLogStore;
  /** Where a deployment goes when its listener_config names no namespace. */
  namespace: string;
  /** Where the tenant's key hashes go for its agents. */
  keySink?: TenantKeySink;
  logger: Logger;
  version: string;
  pollTimeoutSecs?: number;
  reportIntervalMs?: number;
  /** The longest wait between attempts to reach the control plane (default 30 s; the first is 0.5 s, then doubling). */
  maxRetryDelayMs?: number;
};

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((res) => {
    const t = setTimeout(res, ms);
    signal.addEventListener('abort', () => (clearTimeout(t), res()), { once: true });
  });

/** The data plane's own copy: the same spec without the assignment, so the local operator reconciles it. */
function localSourceConfig(c: SourceConfig): SourceConfig {
  return { ...c, listenerId: null };
}

/** Work on the local store or the cluster failed (already logged by local()). */
class LocalError extends Error {}

export class ListenerSync {
  private readonly abort = new AbortController();
  private cursor: string | undefined;
  private last: ListenerSnapshot | undefined;
  /** Last log line id the control plane holds, per revision and type. */
  private readonly shipped = new Map<string, number>();
  private lastReport = '';
  private lastReportAt = 0;
  private loops: Promise<void>[] = [];
  /** One line per kind of trouble, not one per retry. */
  private trouble: string | undefined;
  private readonly log: Logger;
  /** Every namespace a snapshot named since this process started. */
  private readonly seen = new Set<string>();
  /** What the last failed local() of each kind said, until one succeeds. */
  private readonly localTrouble = new Map<string, string>();
  /** The last snapshot's key hashes could not be written yet; the report loop tries again on each tick. */
  private keysPending = false;

  constructor(private readonly opts: ListenerSyncOptions) {
    this.log = opts.logger.child({ component: 'listener', listener_id: opts.listenerId });
  }

  start(): void {
    this.loops = [this.watchLoop(), this.reportLoop()];
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await Promise.all(this.loops);
  }

  private call(method: string, path: string, body?: unknown, timeoutMs = 30_000): Promise<unknown> {
    return callListenerApi(this.opts, method, path, body, { timeoutMs, signal: this.abort.signal });
  }

  /** Logs the first failure of a kind at error/warn level, then stays quiet until it works again. */
  private failed(what: string, err: unknown, retryMs: number): void {
    const status = err instanceof ListenerApiError ? err.status : undefined;
    // Both loops share one state: a wrong key fails both, and still makes one line.
    const kind = String(status ?? (err as Error).name);
    const message = err instanceof Error ? redactUrlsIn(err.message) : String(err);
    if (this.trouble === kind) {
      this.log.debug({ retry_in_ms: retryMs }, `${what} still failing: ${message}`);
      return;
    }
    this.trouble = kind;
    if (status === 401 || status === 403) {
      this.log.error(
        { status, retry_in_ms: retryMs },
        `control plane refused the listener key (${status}: ${message}); retrying with backoff`,
      );
    } else if (status === undefined) {
      this.log.warn({ retry_in_ms: retryMs }, `control plane unreachable (${message}); retrying with backoff`);
    } else {
      this.log.error({ status, retry_in_ms: retryMs }, `${what} failed (${status}: ${message}); retrying`);
    }
  }

  private recovered(): void {
    if (this.trouble === undefined) return;
    this.trouble = undefined;
    this.log.info('connected to the control plane again');
  }

  private async watchLoop(): Promise<void> {
    let backoff = 500;
    const pollTimeout = this.opts.pollTimeoutSecs ?? 25;
    while (!this.abort.signal.aborted) {
      try {
        const q = new URLSearchParams({ timeout: String(pollTimeout), ...(this.cursor ? { since: this.cursor } : {}) });
        const answer = (await this.call('GET', `/watch?${q}`, undefined, (pollTimeout + 15) * 1000)) as
          ListenerSnapshot | { cursor: string; unchanged: true };
        this.recovered();
        // An unchanged answer re-applies the last snapshot: local drift (something deleted by hand) heals too.
        const snap = 'unchanged' in answer ? this.last : answer;
        if (snap) await this.local('write the deployments here', () => this.apply(snap));
        backoff = 500;
        if (!('unchanged' in answer)) {
          this.last = answer;
          this.cursor = answer.cursor;
        }
      } catch (err) {
        if (this.abort.signal.aborted) return;
        if (!(err instanceof LocalError)) this.failed('watch', err, backoff);
        await sleep(backoff, this.abort.signal);
        backoff = Math.min(backoff * 2, this.opts.maxRetryDelayMs ?? 30_000);
      }
    }
  }

  /**
   * The tenant's key hashes for its agents. Not being able to write them must not hold back the deployments: with
   * a namespace per tenant the hashes go to the tenant's namespace, which the operator creates (and lets this
   * listener write in) only once it sees the tenant's first deployment, which this snapshot is to write.
   */
  private async writeKeys(snap: ListenerSnapshot): Promise<void> {
    if (!this.opts.keySink) return;
    try {
      await this.opts.keySink.write(this.opts.tenant, [...snap.key_hashes]);
      if (this.keysPending) this.log.info('API key hashes written');
      this.keysPending = false;
    } catch (err) {
      if (!this.keysPending)
        this.log.warn(`cannot write the API key hashes yet (${describeError(err)}); retrying every second`);
      this.keysPending = true;
    }
  }

  /**
   * `fn` (work on the local store or the cluster, between calls to the control plane), its failure said once per
   * kind and per `what`, then thrown on as a LocalError so the loop backs off. A refusal of the cluster's API server
   * is not the control plane being unreachable: the control plane answered.
   */
  private async local<T>(what: string, fn: () => Promise<T>): Promise<T> {
    let result: T;
    try {
      result = await fn();
    } catch (err) {
      const message = redactUrlsIn(describeError(err));
      if (this.localTrouble.get(what) !== message) this.log.error(`cannot ${what} (${message}); retrying with backoff`);
      this.localTrouble.set(what, message);
      throw new LocalError(message);
    }
    if (this.localTrouble.delete(what)) this.log.info(`${what}: working again`);
    return result;
  }

  /** Makes the local store hold exactly the snapshot's deployments and revisions (nothing twice). */
  async apply(snap: ListenerSnapshot): Promise<void> {
    const { store, listenerId, tenant } = this.opts;
    await this.writeKeys(snap);
    const wanted = new Set<string>();
    for (const d of snap.deployments) {
      // Snapshot content comes from the control plane, but it is checked again here: only this tenant's objects.
      if (d.spec.tenantId !== tenant) continue;
      const ns = d.spec.sourceConfig.listenerConfig?.k8sNamespace || this.opts.namespace;
      wanted.add(`${ns}/${d.name}`);
      for (const r of d.revisions) {
        for (const type of ['build', 'deploy'] as const) {
          const key = `${r.name}/${type}`;
          const cp = Number(r.log_cursors[type] ?? '0');
          if (cp > (this.shipped.get(key) ?? -1)) this.shipped.set(key, cp);
        }
      }
      const spec = { ...d.spec, sourceConfig: localSourceConfig(d.spec.sourceConfig) };
      let local = await this.getOptional('AgentDeployment', ns, d.name);
      if (!local) {
        try {
          local = await store.create('AgentDeployment', {
            apiVersion: API_VERSION,
            kind: 'AgentDeployment',
            metadata: {
              name: d.name,
              namespace: ns,
              labels: {
                [LABEL_TENANT]: tenant,
                [LABEL_DEPLOYMENT_ID]: d.spec.deploymentId,
                [LABEL_LISTENER]: listenerId,
              },
              annotations: d.annotations,
            },
            spec,
          });
          this.log.info({ deployment_id: d.spec.deploymentId, namespace: ns }, 'deployment taken on');
        } catch (err) {
          if (!(err instanceof AlreadyExistsError)) throw err;
          local = await store.get('AgentDeployment', ns, d.name);
        }
      }
      if (local.metadata.labels?.[LABEL_LISTENER] !== listenerId) {
        this.log.warn({ deployment: d.name, namespace: ns }, 'a deployment of that name exists here and is not ours');
        continue;
      }
      if (local.metadata.deletionTimestamp) continue;
      // Env values first: a revision may be reconciled the moment it exists.
      const sets = new Set([d.spec.secretsName, ...d.revisions.map((r) => r.spec.secretsName)].filter(Boolean));
      for (const set of sets as Set<string>) {
        const values = snap.secrets[set];
        if (!values) continue;
        try {
          await store.putSecrets(ns, set, { kind: 'AgentDeployment', name: d.name, uid: local.metadata.uid! }, values);
        } catch (err) {
          if (!(err instanceof AlreadyExistsError)) throw err;
        }
      }
      // The target first, then its revision: a revision that appears before the deployment points at it would be
      // taken for one superseded already. (The local operator may make the revision itself meanwhile: same spec.)
      if (!isDeepStrictEqual(local.spec, spec)) {
        await this.update(ns, d.name, (obj) => ({
          ...obj,
          spec,
          metadata: { ...obj.metadata, annotations: { ...obj.metadata.annotations, ...d.annotations } },
        }));
      }
      for (const r of d.revisions) {
        if (await this.getOptional('AgentRevision', ns, r.name)) continue;
        const rev: AgentRevision = {
          apiVersion: API_VERSION,
          kind: 'AgentRevision',
          metadata: {
            name: r.name,
            namespace: ns,
            labels: {
              [LABEL_TENANT]: tenant,
              [LABEL_DEPLOYMENT]: d.name,
              [LABEL_DEPLOYMENT_ID]: d.spec.deploymentId,
              [LABEL_REVISION_NUMBER]: String(r.spec.revisionNumber),
              [LABEL_LISTENER]: listenerId,
            },
            ownerReferences: [ownerReferenceTo(local)],
          },
          spec: { ...r.spec, sourceConfig: localSourceConfig(r.spec.sourceConfig) },
        };
        try {
          await store.create('AgentRevision', rev);
        } catch (err) {
          if (!(err instanceof AlreadyExistsError)) throw err;
        }
      }
    }
    // Deployments deleted on the control plane (also while this listener was away) go here too.
    const items = await this.ours(snap);
    for (const local of items) {
      const key = `${local.metadata.namespace}/${local.metadata.name}`;
      if (wanted.has(key) || local.metadata.deletionTimestamp) continue;
      await store.delete('AgentDeployment', local.metadata.namespace!, local.metadata.name).catch((err: unknown) => {
        if (!(err instanceof NotFoundError)) throw err;
      });
      this.log.info({ deployment_id: local.spec.deploymentId }, 'deployment deleted on the control plane; removing');
    }
  }

  /**
   * The deployments this listener made, namespace by namespace (a listener in a cluster may read only the namespaces
   * it serves, never the whole cluster).
   */
  private async ours(snap: ListenerSnapshot | undefined): Promise<AgentDeployment[]> {
    for (const ns of snap?.namespaces ?? []) this.seen.add(ns);
    for (const d of snap?.deployments ?? []) {
      const ns = d.spec.sourceConfig.listenerConfig?.k8sNamespace;
      if (ns) this.seen.add(ns);
    }
    const namespaces = new Set([this.opts.namespace, ...this.seen]);
    const lists = await Promise.all(
      [...namespaces].map((ns) =>
        this.opts.store.list('AgentDeployment', ns, { labelSelector: `${LABEL_LISTENER}=${this.opts.listenerId}` }),
      ),
    );
    return lists.flatMap((l) => l.items);
  }

  private async update(ns: string, name: string, change: (d: AgentDeployment) => AgentDeployment): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const cur = await this.opts.store.get('AgentDeployment', ns, name);
      try {
        await this.opts.store.update('AgentDeployment', change(cur));
        return;
      } catch (err) {
        if (err instanceof StaleResourceVersionError && attempt < 10) continue;
        throw err;
      }
    }
  }

  private async getOptional<K extends 'AgentDeployment' | 'AgentRevision'>(kind: K, ns: string, name: string) {
    try {
      return await this.opts.store.get(kind, ns, name);
    } catch (err) {
      if (err instanceof NotFoundError) return undefined;
      throw err;
    }
  }

  /** What the local operator made of our deployments, with the log lines the control plane does not hold yet. */
  async collect(): Promise<{ report: ListenerReport; marks: [string, number][] }> {
    const { store } = this.opts;
    const deps = await this.ours(this.last);
    // Revisions by their deployment: the local operator may have made one itself (without our label).
    const revs = (
      await Promise.all(
        deps.map((d) =>
          store.list('AgentRevision', d.metadata.namespace, {
            labelSelector: `${LABEL_DEPLOYMENT}=${d.metadata.name}`,
          }),
        ),
      )
    ).flatMap((l) => l.items);
    const marks: [string, number][] = [];
    const report: ListenerReport = { agent_version: this.opts.version, deployments: [] };
    for (const d of deps) {
      if (d.metadata.deletionTimestamp) continue;
      const mine = revs.filter(
        (r) => r.spec.deploymentName === d.metadata.name && r.metadata.namespace === d.metadata.namespace,
      );
      const revisions: ListenerReport['deployments'][number]['revisions'] = [];
      for (const r of mine) {
        const logs: Partial<Record<LogType, { id: string; message: string }[]>> = {};
        for (const type of ['build', 'deploy'] as const) {
          const key = `${r.metadata.name}/${type}`;
          const after = this.shipped.get(key);
          if (after === undefined) continue; // the control plane's cursor is not known yet
          const page = await store.readLogs(r.metadata.namespace!, r.metadata.name, {
            type,
            limit: 500,
            offset: after > 0 ? String(after) : undefined,
            order: 'asc',
          });
          const fresh = page.logs.filter((l) => Number(l.id) > after);
          if (fresh.length) {
            logs[type] = fresh.map((l) => ({ id: l.id, message: l.message }));
            marks.push([key, Number(fresh[fresh.length - 1]!.id)]);
          }
        }
        const s = r.status ?? {};
        revisions.push({
          name: r.metadata.name,
          status: defined({
            phase: s.phase,
            statusMessage: s.statusMessage?.slice(0, 16_384),
            image: s.image,
            repoCommitSha: s.repoCommitSha,
          }),
          ...(Object.keys(logs).length ? { logs } : {}),
        });
      }
      const s = d.status ?? {};
      report.deployments.push({
        deployment_id: d.spec.deploymentId,
        status: defined({
          phase: s.phase,
          url: s.url,
          activeRevisionName: s.activeRevisionName,
          latestRevisionName: s.latestRevisionName,
        }),
        revisions,
      });
    }
    return { report, marks };
  }

  private async reportLoop(): Promise<void> {
    let backoff = 500;
    const interval = this.opts.reportIntervalMs ?? 1000;
    while (!this.abort.signal.aborted) {
      try {
        if (this.keysPending && this.last) await this.writeKeys(this.last);
        const { report, marks } = await this.local('read the deployments here', () => this.collect());
        const text = JSON.stringify(report);
        // Changes go at once; an unchanged report still goes every 10 s as the heartbeat.
        if (text !== this.lastReport || Date.now() - this.lastReportAt > 10_000) {
          await this.call('POST', '/report', report);
          this.recovered();
          for (const [key, id] of marks) this.shipped.set(key, id);
          this.lastReport = text;
          this.lastReportAt = Date.now();
        }
        backoff = 500;
        await sleep(interval, this.abort.signal);
      } catch (err) {
        if (this.abort.signal.aborted) return;
        if (!(err instanceof LocalError)) this.failed('report', err, backoff);
        await sleep(backoff, this.abort.signal);
        backoff = Math.min(backoff * 2, this.opts.maxRetryDelayMs ?? 30_000);
      }
    }
  }
}

function defined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
