// What every route module is given: the graphs, run engine and services of one server (routes reach the
// database only through the services).
import type { RouteAuthorizer } from '../auth/authorizer.ts';
import type { GraphRegistry } from '../graphs/index.ts';
import type { UiBundles } from '../graphs/ui.ts';
import type { RunEngine } from '../runs/engine.ts';
import type { RunMetrics } from '../platform/run-metrics.ts';
import type { AgentService } from '../services/index.ts';

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
  /** Custom auth's one authorisation path (auth/hooks.ts): commands over a WebSocket go through it one by one. */
  authorize?: RouteAuthorizer;
  /** Bundled generative UI components of langgraph.json "ui". */
  ui?: UiBundles;
}
