// The EventRecorder of the operator in a cluster: events.k8s.io/v1 Events through @kubernetes/client-node's
// EventsV1Api, which `kubectl describe` and `kubectl events` show. Hand-written because client-node has no event
// broadcaster; it keeps client-go's two protections: a repeat of the same event (same object, type, reason and
// note) within a few minutes updates the first one's `series` instead of adding an object, and each object gets a
// token bucket (a burst, then one event per few minutes) so a flapping deployment cannot flood etcd.
import { randomBytes } from 'node:crypto';
import { EventsV1Api, V1MicroTime, type EventsV1Event, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from '../lib/logger.ts';
import type { EventInput, EventRecorder, EventSubject } from './controller-kit/events.ts';

export const REPORTING_CONTROLLER = 'agentplane-operator';

export type KubeEventRecorderOptions = {
  kubeConfig: KubeConfig;
  /** This replica (its Pod name), events.k8s.io's reportingInstance. */
  instance: string;
  logger: Logger;
  /** Events an object may get at once, then one per `refillMs`. */
  burst?: number;
  refillMs?: number;
  /** A repeat within this long after the last occurrence joins its series. */
  seriesWindowMs?: number;
  now?: () => Date;
};

type Series = { event: EventsV1Event; count: number; last: number; dirty: boolean; writing?: Promise<void> };

const cut = (s: string, bytes: number) => {
  const b = Buffer.from(s);
  return b.length <= bytes
    ? s
    : `${b
        .subarray(0, bytes - 3)
        .toString('utf8')
        .replace(/\uFFFD$/, '')}...`;
};

export function kubeEventRecorder(opts: KubeEventRecorderOptions): EventRecorder & { flush(): Promise<void> } {
  const api = opts.kubeConfig.makeApiClient(EventsV1Api);
  const now = () => (opts.now ?? (() => new Date()))();
  const burst = opts.burst ?? 25;
  const refillMs = opts.refillMs ?? 5 * 60_000;
  const windowMs = opts.seriesWindowMs ?? 6 * 60_000;
  const series = new Map<string, Series>();
  const buckets = new Map<string, { tokens: number; at: number }>();
  const inFlight = new Set<Promise<void>>();
  const log = opts.logger.child({ component: 'events' });

  const track = (p: Promise<void>) => {
    const done = p
      .catch((err: unknown) => log.warn({ err }, 'could not record an Event'))
      .finally(() => {
        inFlight.delete(done);
      });
    inFlight.add(done);
    return done;
  };

  function take(uid: string, at: number): boolean {
    const b = buckets.get(uid) ?? { tokens: burst, at };
    b.tokens = Math.min(burst, b.tokens + (at - b.at) / refillMs);
    b.at = at;
    buckets.set(uid, b);
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  }

  /** Writes the series' count until no repeat arrived during the write. */
  function writeSeries(s: Series): void {
    if (s.writing) {
      s.dirty = true;
      return;
    }
    s.dirty = false;
    const body: EventsV1Event = {
      ...s.event,
      series: { count: s.count, lastObservedTime: new V1MicroTime(s.last) },
    };
    s.writing = track(
      api
        .replaceNamespacedEvent({ name: s.event.metadata!.name!, namespace: s.event.metadata!.namespace!, body })
        .then((written) => {
          s.event = written;
        }),
    ).finally(() => {
      s.writing = undefined;
      if (s.dirty) writeSeries(s);
    });
  }

  function prune(at: number): void {
    if (series.size < 1000) return;
    for (const [k, s] of series) if (at - s.last > windowMs && !s.writing) series.delete(k);
    for (const [k, b] of buckets) if (at - b.at > refillMs * burst) buckets.delete(k);
  }

  return {
    record(subject: EventSubject, e: EventInput): void {
      const namespace = subject.metadata.namespace;
      if (!namespace) return;
      const at = now().getTime();
      const uid = subject.metadata.uid ?? `${namespace}/${subject.kind}/${subject.metadata.name}`;
      const note = cut(e.note, 1024);
      const key = JSON.stringify([uid, e.type, e.reason, e.action, note]);
      const seen = series.get(key);
      if (seen && at - seen.last <= windowMs) {
        seen.count += 1;
        seen.last = at;
        writeSeries(seen);
        return;
      }
      prune(at);
      if (!take(uid, at)) {
        log.debug({ reason: e.reason, object: subject.metadata.name }, 'event dropped: too many for this object');
        return;
      }
      const event: EventsV1Event = {
        apiVersion: 'events.k8s.io/v1',
        kind: 'Event',
        // Named as client-go's recorder names them: <object>.<unique suffix>.
        metadata: { name: `${subject.metadata.name}.${randomBytes(8).toString('hex')}`, namespace },
        eventTime: new V1MicroTime(at),
        reportingController: REPORTING_CONTROLLER,
        reportingInstance: cut(opts.instance, 128),
        action: cut(e.action, 128),
        reason: cut(e.reason, 128),
        type: e.type,
        note,
        regarding: {
          apiVersion: subject.apiVersion,
          kind: subject.kind,
          name: subject.metadata.name,
          namespace,
          ...(subject.metadata.uid ? { uid: subject.metadata.uid } : {}),
        },
      };
      const s: Series = { event, count: 1, last: at, dirty: false };
      series.set(key, s);
      s.writing = track(
        api.createNamespacedEvent({ namespace, body: event }).then((written) => {
          s.event = written;
        }),
      ).finally(() => {
        s.writing = undefined;
        if (s.dirty) writeSeries(s);
      });
    },
    async flush(): Promise<void> {
      while (inFlight.size) await Promise.all([...inFlight]);
    },
  };
}
