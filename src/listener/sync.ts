// The listener's two loops, both dialling out: `watch` long-polls the control plane for the deployments assigned to
// this listener and makes the local store match (apply-snapshot.ts: create, update, delete, level-triggered, so a
// restart or a long absence converges and nothing is made twice); `report` sends back what the local operator made of
// them (collect-report.ts: statuses, URL, build/deploy log lines after the control plane's cursor). Works on any store
// of the port: the embedded one with the local runtime, or a cluster's custom resources for its operator. This file
// holds the loops: their backoff, and saying each kind of trouble once.
import { describeError } from '../lib/errors.ts';
import type { Logger } from '../lib/logger.ts';
import { redactUrlsIn } from '../lib/redact.ts';
import { ApiError, type ListenerClient } from '../api/client.ts';
import { listenerClient, type ListenerConnection } from '../api/listener-connection.ts';
import type { ListenerSnapshot } from '../api/schemas/listeners.ts';
import type { TenantKeySink } from '../state/api-keys.ts';
import { applySnapshot } from './apply-snapshot.ts';
import { collectReport } from './collect-report.ts';
import type { SyncContext, SyncStore } from './local-store.ts';

export type ListenerSyncOptions = ListenerConnection & {
  store: SyncStore;
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

/** Work on the local store or the cluster failed (already logged by local()). */
class LocalError extends Error {}

export class ListenerSync {
  private readonly abort = new AbortController();
  private readonly api: ListenerClient;
  private readonly ctx: SyncContext;
  private cursor: string | undefined;
  private last: ListenerSnapshot | undefined;
  private lastReport = '';
  private lastReportAt = 0;
  private loops: Promise<void>[] = [];
  /** One line per kind of trouble, not one per retry. */
  private trouble: string | undefined;
  private readonly log: Logger;
  /** What the last failed local() of each kind said, until one succeeds. */
  private readonly localTrouble = new Map<string, string>();
  /** The last snapshot's key hashes could not be written yet; the report loop tries again on each tick. */
  private keysPending = false;

  constructor(private readonly opts: ListenerSyncOptions) {
    this.log = opts.logger.child({ component: 'listener', listener_id: opts.listenerId });
    this.api = listenerClient(opts);
    this.ctx = {
      store: opts.store,
      tenant: opts.tenant,
      listenerId: opts.listenerId,
      namespace: opts.namespace,
      log: this.log,
      shipped: new Map(),
      seen: new Set(),
    };
  }

  start(): void {
    this.loops = [this.watchLoop(), this.reportLoop()];
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await Promise.all(this.loops);
  }

  /** Logs the first failure of a kind at error/warn level, then stays quiet until it works again. */
  private failed(what: string, err: unknown, retryMs: number): void {
    const status = err instanceof ApiError ? err.status : undefined;
    // Both loops share one state: a wrong key fails both, and still makes one line.
    const kind = String(status ?? (err as Error).name);
    const message = redactUrlsIn(
      err instanceof ApiError ? err.detail : err instanceof Error ? err.message : String(err),
    );
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
    const timeout = this.opts.pollTimeoutSecs ?? 25;
    while (!this.abort.signal.aborted) {
      try {
        const answer = await this.api.watch({ timeout, since: this.cursor }, this.abort.signal);
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
  private async apply(snap: ListenerSnapshot): Promise<void> {
    await this.writeKeys(snap);
    await applySnapshot(this.ctx, snap);
  }

  private async reportLoop(): Promise<void> {
    let backoff = 500;
    const interval = this.opts.reportIntervalMs ?? 1000;
    while (!this.abort.signal.aborted) {
      try {
        if (this.keysPending && this.last) await this.writeKeys(this.last);
        const { report, marks } = await this.local('read the deployments here', () =>
          collectReport(this.ctx, this.last, this.opts.version),
        );
        const text = JSON.stringify(report);
        // Changes go at once; an unchanged report still goes every 10 s as the heartbeat.
        if (text !== this.lastReport || Date.now() - this.lastReportAt > 10_000) {
          await this.api.report(report, this.abort.signal);
          this.recovered();
          for (const [key, id] of marks) this.ctx.shipped.set(key, id);
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
