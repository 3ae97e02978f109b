// The operator's Prometheus metrics (prom-client), served at /metrics beside the probes: reconciles by controller
// and result, their duration, each work queue's depth, read when scraped, and the Kubernetes API requests sent.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { ApiRequestObserver } from './kube-requests.ts';

export type ReconcileOutcome = 'success' | 'requeue' | 'error' | 'stale';

export type ControllerMetrics = {
  reconciled(controller: string, outcome: ReconcileOutcome, seconds: number): void;
  /** Reports a queue's depth on every scrape. */
  watchQueue(controller: string, depth: () => number): void;
};

export type OperatorMetrics = ControllerMetrics & {
  registry: Registry;
  /** Counts one Kubernetes API request (kube-requests.ts). */
  apiRequest: ApiRequestObserver;
};

export function createOperatorMetrics(): OperatorMetrics {
  const registry = new Registry();
  const reconciles = new Counter({
    name: 'agentplane_operator_reconciles_total',
    help: 'Reconciles by controller and outcome (success, requeue, error, stale: a write refused for a stale copy).',
    labelNames: ['controller', 'result'],
    registers: [registry],
  });
  const errors = new Counter({
    name: 'agentplane_operator_reconcile_errors_total',
    help: 'Reconciles that failed and were retried with backoff.',
    labelNames: ['controller'],
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'agentplane_operator_reconcile_duration_seconds',
    help: 'Time one reconcile took.',
    labelNames: ['controller'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const requests = new Counter({
    name: 'agentplane_operator_api_requests_total',
    help: 'Kubernetes API requests the operator sent, by verb, resource and HTTP status code (error: no answer).',
    labelNames: ['verb', 'resource', 'code'],
    registers: [registry],
  });
  const queues = new Map<string, () => number>();
  new Gauge({
    name: 'agentplane_operator_queue_depth',
    help: 'Keys waiting in a controller work queue.',
    labelNames: ['controller'],
    registers: [registry],
    collect() {
      for (const [controller, depth] of queues) this.set({ controller }, depth());
    },
  });
  return {
    registry,
    reconciled(controller, outcome, seconds) {
      reconciles.inc({ controller, result: outcome });
      if (outcome === 'error') errors.inc({ controller });
      duration.observe({ controller }, seconds);
    },
    watchQueue(controller, depth) {
      queues.set(controller, depth);
    },
    apiRequest(verb, resource, code) {
      requests.inc({ verb, resource, code });
    },
  };
}
