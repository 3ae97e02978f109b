// What every route module is given: the graphs, run engine and services of one server (routes reach the
// database only through the services).
import type { RouteAuthorizer } from '../http/authorizer.ts';
import type { GraphRegistry } from '../graphs/index.ts';
import type { UiBundles } from '../graphs/ui.ts';
import type { RunEngine } from '../runs/engine.ts';
import type { WebhookPolicy } from '../runs/webhook-policy.ts';
import type { RunMetrics } from '../runs/run-metrics.ts';
import type { AgentService } from '../services/index.ts';
import type { TruncateService } from '../services/truncate.ts';
import type { Activity } from '../platform/activity.ts';
import type { PendingWork } from '../storage/pending-work.ts';

export interface RouteDeps {
  graphs: GraphRegistry;
  engine: RunEngine;
  service: AgentService;
  keepAliveMs: number;
  /** A stream client that takes nothing for this long is disconnected (default 60 s). */
  streamStallMs?: number;
  version: string;
  /** Run outcome metrics of the instrumented storage (GET /metrics), when it is instrumented. */
  runMetrics?: RunMetrics;
  /** Custom auth's one authorisation path (http/auth-hooks.ts): commands over a WebSocket go through it one by one. */
  authorize?: RouteAuthorizer;
  /** langgraph.json http.mount_prefix: MCP and A2A put it before the API paths they call as the caller. */
  mountPrefix?: string;
  /** The deployment's public URL (agent cards name it); else taken from each request's Host. */
  publicUrl?: string;
  /**
   * Set when the API's own routes answer the requests MCP and A2A make as the caller (no custom app that could
   * answer those paths first): they may then call the run services in-process (http/as-caller.ts waitRun).
   * `disabled`: whether langgraph.json's http.disable_* switches a route off.
   */
  innerRoutes?: { disabled(routeUrl: string): boolean };
  /** Where run webhooks and A2A push notifications may point (checked when a push config is set). */
  webhookPolicy?: WebhookPolicy;
  /** Bundled generative UI components of langgraph.json "ui". */
  ui?: UiBundles;
  /** POST /internal/truncate, for API test suites (--test-truncate); absent on every deployment. */
  truncate?: TruncateService;
  /** The requests open now and when the last one was (GET /ok?activity=1). */
  activity?: () => Activity;
  /** What the store holds for later, read for GET /ok?activity=1. */
  pendingWork?: () => Promise<PendingWork>;
}
