// Leader election over a coordination.k8s.io/v1 Lease, the way client-go's leaderelection does it: a candidate
// takes the Lease when its holder has not renewed it for leaseDuration (measured on the local clock since the
// record last changed, so clocks need not agree), and every write carries the resourceVersion it read, so two
// candidates can never both win the same round. A leader that cannot renew within renewDeadline steps down, and
// renewDeadline < leaseDuration, so it has stopped before any other candidate may take the Lease: the deadline
// counts from when the last successful renewal was *sent* (the other side counts from when it saw it, later), a
// watchdog timer enforces it even while a request hangs, and every request is aborted after requestTimeout.
// (@kubernetes/client-node has no leader election; this is the small part of client-go's we need.)
import {
  ApiException,
  CoordinationV1Api,
  Observable,
  V1MicroTime,
  type ConfigurationOptions,
  type KubeConfig,
  type V1Lease,
} from '@kubernetes/client-node';
import type { Logger } from '../../lib/logger.ts';

export type LeaderElectionOptions = {
  kubeConfig: KubeConfig;
  namespace: string;
  name: string;
  /** Unique per candidate (the pod name). */
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /** Each Lease request is aborted after this long (default: a third of renewDeadline). */
  requestTimeoutMs?: number;
  logger: Logger;
};

export type LeaderCallbacks = {
  /** Called once this candidate holds the Lease. */
  onStartedLeading: () => Promise<void> | void;
  /** Called once when leadership is lost or given up; the caller must stop acting at once. */
  onStoppedLeading: () => Promise<void> | void;
};

function recordOf(lease: V1Lease): string {
  const s = lease.spec ?? {};
  return JSON.stringify([s.holderIdentity ?? '', String(s.renewTime ?? ''), s.leaseTransitions ?? 0]);
}

export class LeaderElector {
  private readonly api: CoordinationV1Api;
  private readonly durationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryMs: number;
  private readonly requestTimeoutMs: number;
  private watchdog: NodeJS.Timeout | undefined;
  private observedRecord = '';
  private observedAt = 0;
  private leading = false;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private lastRenew = 0;
  private callbacks: LeaderCallbacks | undefined;
  private readonly log: Logger;

  constructor(private readonly opts: LeaderElectionOptions) {
    this.api = opts.kubeConfig.makeApiClient(CoordinationV1Api);
    this.durationMs = opts.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = opts.renewDeadlineMs ?? Math.round((this.durationMs * 2) / 3);
    this.retryMs = opts.retryPeriodMs ?? Math.max(100, Math.round(this.durationMs / 7.5));
    this.requestTimeoutMs = opts.requestTimeoutMs ?? Math.max(1, Math.floor(this.renewDeadlineMs / 3));
    if (this.renewDeadlineMs >= this.durationMs) throw new Error('renewDeadline must be shorter than leaseDuration');
    if (this.requestTimeoutMs >= this.renewDeadlineMs)
      throw new Error('requestTimeout must be shorter than renewDeadline');
    this.log = opts.logger.child({
      component: 'leader-election',
      lease: `${opts.namespace}/${opts.name}`,
      identity: opts.identity,
    });
  }

  get isLeader(): boolean {
    return this.leading;
  }

  /** Starts campaigning; returns at once. */
  run(callbacks: LeaderCallbacks): void {
    this.callbacks = callbacks;
    void this.tick();
  }

  /**
   * Stops campaigning; a leader steps down and, unless `release` is false, releases the Lease so another candidate
   * can take it at once (otherwise it must wait for the Lease to expire, as after a crash).
   */
  async stop({ release = true }: { release?: boolean } = {}): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.leading) {
      await this.stepDown('stopping');
      if (release) await this.release();
    }
  }

  private schedule(): void {
    if (!this.stopped) this.timer = setTimeout(() => void this.tick(), this.retryMs);
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    const sentAt = Date.now();
    let ok = false;
    try {
      ok = await this.tryAcquireOrRenew();
    } catch (err) {
      this.log.warn({ err }, 'lease request failed');
    }
    if (this.stopped) return;
    if (ok && (this.leading || Date.now() - sentAt < this.renewDeadlineMs)) {
      this.renewed(sentAt);
      if (!this.leading) this.startLeading();
    } else if (this.leading && Date.now() - this.lastRenew > this.renewDeadlineMs) {
      await this.stepDown('could not renew the lease in time');
    }
    this.schedule();
  }

  /** Arms the watchdog: without another renewal by lastRenew + renewDeadline, stop leading. */
  private renewed(sentAt: number): void {
    this.lastRenew = Math.max(this.lastRenew, sentAt);
    clearTimeout(this.watchdog);
    const left = this.lastRenew + this.renewDeadlineMs - Date.now();
    this.watchdog = setTimeout(() => void this.stepDown('could not renew the lease in time'), Math.max(0, left));
  }

  /** Not awaited: renewals go on while the leader starts, however long that takes. */
  private startLeading(): void {
    this.leading = true;
    this.log.info('became leader');
    void (async () => {
      try {
        await this.callbacks?.onStartedLeading();
      } catch (err) {
        this.log.error({ err }, 'failed to start leading');
        if (this.leading) {
          await this.stepDown('start failed');
          await this.release();
        }
      }
    })();
  }

  private async stepDown(reason: string): Promise<void> {
    clearTimeout(this.watchdog);
    if (!this.leading) return;
    this.leading = false;
    this.log.warn({ reason }, 'stopped leading');
    try {
      await this.callbacks?.onStoppedLeading();
    } catch (err) {
      this.log.error({ err }, 'onStoppedLeading failed');
    }
  }

  /** Per-request options aborting the request after requestTimeout (client-node sends the signal with fetch). */
  private timed(): ConfigurationOptions {
    const signal = AbortSignal.timeout(this.requestTimeoutMs);
    return {
      middleware: [
        {
          pre: (ctx) => {
            ctx.setSignal(signal);
            return new Observable(Promise.resolve(ctx));
          },
          post: (ctx) => new Observable(Promise.resolve(ctx)),
        },
      ],
      middlewareMergeStrategy: 'append',
    };
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const { namespace, name, identity } = this.opts;
    const now = Date.now();
    const spec = (transitions: number, acquire: V1MicroTime) => ({
      holderIdentity: identity,
      leaseDurationSeconds: Math.ceil(this.durationMs / 1000),
      acquireTime: acquire,
      renewTime: new V1MicroTime(now),
      leaseTransitions: transitions,
    });
    let lease: V1Lease;
    try {
      lease = await this.api.readNamespacedLease({ name, namespace }, this.timed());
    } catch (err) {
      if (!(err instanceof ApiException) || err.code !== 404) throw err;
      try {
        await this.api.createNamespacedLease(
          {
            namespace,
            body: {
              apiVersion: 'coordination.k8s.io/v1',
              kind: 'Lease',
              metadata: { name, namespace },
              spec: spec(0, new V1MicroTime(now)),
            },
          },
          this.timed(),
        );
        return true;
      } catch (e) {
        if (e instanceof ApiException && e.code === 409) return false; // another candidate created it first
        throw e;
      }
    }
    const record = recordOf(lease);
    // Measured from when the answer arrived (not when it was asked for): the holder's write may be that recent.
    const seen = Date.now();
    if (record !== this.observedRecord) {
      this.observedRecord = record;
      this.observedAt = seen;
    }
    const holder = lease.spec?.holderIdentity ?? '';
    const held = holder !== '' && holder !== identity;
    if (held && this.observedAt + this.durationMs > seen) return false;
    const transitions = (lease.spec?.leaseTransitions ?? 0) + (holder === identity ? 0 : 1);
    const acquire =
      holder === identity && lease.spec?.acquireTime ? new V1MicroTime(lease.spec.acquireTime) : new V1MicroTime(now);
    try {
      // resourceVersion makes this a compare-and-swap: a concurrent winner makes ours fail with 409.
      const updated = await this.api.replaceNamespacedLease(
        {
          name,
          namespace,
          body: { ...lease, spec: spec(transitions, acquire) },
        },
        this.timed(),
      );
      this.observedRecord = recordOf(updated);
      this.observedAt = now;
      return true;
    } catch (err) {
      if (err instanceof ApiException && err.code === 409) return false;
      throw err;
    }
  }

  private async release(): Promise<void> {
    const { namespace, name, identity } = this.opts;
    try {
      const lease = await this.api.readNamespacedLease({ name, namespace }, this.timed());
      if (lease.spec?.holderIdentity !== identity) return;
      await this.api.replaceNamespacedLease(
        {
          name,
          namespace,
          body: { ...lease, spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1 } },
        },
        this.timed(),
      );
    } catch (err) {
      this.log.warn({ err }, 'could not release the lease');
    }
  }
}
