// Run webhooks: when a run with `webhook` ends, its record and final values are POSTed there, as the platform does
// ({...run, values, error, webhook_sent_at}). Delivery never blocks the run or the engine: each one is a background
// task with a timeout per attempt and retries with backoff on network errors, 408, 429 and 5xx. Redirects are not
// followed (a 3xx is a final answer), so a redirect cannot lead a delivery somewhere the policy refused.
//
// Where a delivery may go is webhook-policy.ts: without an allow-list only public unicast addresses (no loopback,
// private, link-local, CGNAT, unspecified, multicast or reserved ranges, IPv4-mapped IPv6 unwrapped first), checked
// where the connection is made, after DNS; `--webhook-allow` lists the hosts that may be reached (then only those;
// `*.example.com` matches subdomains), and `*` allows every host and address (a trusted, private network).
import http from 'node:http';
import https from 'node:https';
import type { Logger } from '../../lib/logger.ts';
import type { Json, RunOutcome, RunRecord } from '../storage/types.ts';
import {
  hostRule,
  isSelfPath,
  publicLookup,
  WebhookRefused,
  webhookUrlProblem,
  type WebhookPolicy,
} from './webhook-policy.ts';

/** POSTs a delivery to the deployment's own custom routes; answers the HTTP status they gave. */
export type SelfDelivery = (path: string, body: string, headers: Record<string, string>) => Promise<number>;

export interface WebhookOptions {
  policy: WebhookPolicy;
  /** Where relative webhooks go: the custom app (langgraph.json http.app), called in process. */
  self?: SelfDelivery;
  logger: Logger;
  /** Per attempt. */
  timeoutMs?: number;
  attempts?: number;
  /** First retry delay; doubles each time. */
  backoffMs?: number;
  /** Sent with every delivery (langgraph.json `webhooks.headers`). */
  headers?: Record<string, string>;
}

const MAX_IN_FLIGHT = 1_000;

/** The body the platform sends: the run record, its final values and error, and when it was sent. */
export function webhookPayload(run: RunRecord, outcome: RunOutcome, values: Json | null): Json {
  return {
    run_id: run.run_id,
    thread_id: run.thread_id,
    assistant_id: run.assistant_id,
    created_at: run.created_at,
    updated_at: new Date().toISOString(),
    metadata: run.metadata,
    status: outcome.status,
    kwargs: run.kwargs,
    multitask_strategy: run.multitask_strategy,
    values,
    error: outcome.status === 'error' || outcome.status === 'timeout' ? (outcome.error ?? null) : null,
    webhook_sent_at: new Date().toISOString(),
  };
}

interface Attempt {
  /** Final: delivered, or an answer that retrying will not change. */
  done: boolean;
  status?: number;
  error?: string;
}

export class WebhookNotifier {
  private readonly inflight = new Set<Promise<void>>();
  private readonly controller = new AbortController();
  private readonly timeoutMs: number;
  private readonly attempts: number;
  private readonly backoffMs: number;

  constructor(private readonly opts: WebhookOptions) {
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    this.attempts = opts.attempts ?? 4;
    this.backoffMs = opts.backoffMs ?? 1_000;
  }

  /** Delivers in the background; returns at once. `values`: a function so they are read only for runs with a webhook. */
  notify(run: RunRecord, outcome: RunOutcome, values: () => Promise<Json | null>): void {
    const url = run.kwargs.webhook;
    if (typeof url !== 'string' || !url) return;
    // Slow receivers hold deliveries (and their bodies) for up to a minute each: past this many, new ones are dropped.
    if (this.inflight.size >= MAX_IN_FLIGHT) {
      this.opts.logger.warn(
        { run_id: run.run_id, in_flight: this.inflight.size },
        'webhook dropped: too many deliveries under way',
      );
      return;
    }
    const task = (async () => {
      const body = JSON.stringify(webhookPayload(run, outcome, await values().catch(() => null)));
      await this.deliver(url, body, {}, { run_id: run.run_id });
    })().catch((err) => this.opts.logger.warn({ err, run_id: run.run_id }, 'webhook delivery failed'));
    this.inflight.add(task);
    void task.finally(() => this.inflight.delete(task));
  }

  /**
   * Delivers another body (A2A push notifications) under the same rules: the policy, the address checks, timeouts,
   * retries and the in-flight bound. `headers` are added to the configured ones; `log`: context for the log lines.
   */
  post(url: string, body: string, headers: Record<string, string>, log: Record<string, string>): Promise<void> {
    if (this.inflight.size >= MAX_IN_FLIGHT) {
      this.opts.logger.warn({ ...log, in_flight: this.inflight.size }, 'delivery dropped: too many under way');
      return Promise.resolve();
    }
    const task = this.deliver(url, body, headers, log).catch((err) =>
      this.opts.logger.warn({ err, ...log }, 'delivery failed'),
    );
    this.inflight.add(task);
    void task.finally(() => this.inflight.delete(task));
    return task;
  }

  /** Waits up to graceMs for deliveries under way, then abandons the rest. */
  async close(graceMs = 2_000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(this.inflight), new Promise((r) => (timer = setTimeout(r, graceMs)))]);
    clearTimeout(timer);
    this.controller.abort();
  }

  private async deliver(
    url: string,
    body: string,
    headers: Record<string, string>,
    context: Record<string, string>,
  ): Promise<void> {
    const log = this.opts.logger.child({ ...context, webhook: redact(url) });
    for (let i = 1; i <= this.attempts; i++) {
      if (this.controller.signal.aborted) return;
      const a = await this.attempt(url, body, headers);
      if (a.done && a.status !== undefined && a.status < 300) {
        log.info({ status: a.status, attempt: i }, 'webhook delivered');
        return;
      }
      if (a.done) {
        log.warn({ status: a.status, error: a.error, attempt: i }, 'webhook refused; not retrying');
        return;
      }
      if (i === this.attempts) {
        log.warn({ status: a.status, error: a.error, attempts: i }, 'webhook not delivered; giving up');
        return;
      }
      log.info({ status: a.status, error: a.error, attempt: i }, 'webhook attempt failed; retrying');
      await sleep(this.backoffMs * 2 ** (i - 1), this.controller.signal);
    }
  }

  /** One POST. Network errors, timeouts, 408, 429 and 5xx may be retried; anything else is final. */
  private attempt(target: string, body: string, extra: Record<string, string>): Promise<Attempt> {
    const problem = webhookUrlProblem(target, this.opts.policy);
    if (problem) return Promise.resolve({ done: true, error: problem });
    if (isSelfPath(target)) return this.attemptSelf(target, body, extra);
    const url = new URL(target);
    const rule = hostRule(url.hostname, this.opts.policy.allow);
    const mod = url.protocol === 'https:' ? https : http;
    return new Promise<Attempt>((resolve) => {
      const req = mod.request(
        url,
        {
          method: 'POST',
          headers: {
            ...this.opts.headers,
            ...extra,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
            'user-agent': 'agentplane-webhook',
          },
          timeout: this.timeoutMs,
          signal: this.controller.signal,
          ...(rule === 'public' ? { lookup: publicLookup } : {}),
        },
        (res) => {
          res.resume();
          const status = res.statusCode ?? 0;
          resolve({ done: !(status === 408 || status === 429 || status >= 500), status });
        },
      );
      req.on('timeout', () => req.destroy(new Error(`no answer within ${this.timeoutMs} ms`)));
      req.on('error', (err) => resolve({ done: err instanceof WebhookRefused, error: err.message }));
      req.end(body);
    });
  }

  /** One POST to the deployment's own custom routes, with the same timeout and retry rules as the network. */
  private async attemptSelf(path: string, body: string, extra: Record<string, string>): Promise<Attempt> {
    const self = this.opts.self;
    if (!self) return { done: true, error: 'relative webhooks need langgraph.json http.app' };
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${this.timeoutMs} ms`)), this.timeoutMs);
    });
    try {
      const headers = {
        ...this.opts.headers,
        ...extra,
        'content-type': 'application/json',
        'user-agent': 'agentplane-webhook',
      };
      const status = await Promise.race([self(path, body, headers), timeout]);
      return { done: !(status === 408 || status === 429 || status >= 500), status };
    } catch (err) {
      return { done: false, error: (err as Error).message };
    } finally {
      clearTimeout(timer);
    }
  }
}

/** The URL without its query and credentials (they often carry a token) for logs. */
function redact(url: string): string {
  if (isSelfPath(url)) return url.split('?', 1)[0]!;
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '(invalid)';
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        resolve();
      },
      { once: true },
    );
  });
}
