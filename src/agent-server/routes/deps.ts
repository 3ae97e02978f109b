// What every route module is given: the stores, graphs, run engine and service of one server.
import type { CustomAuth } from '../auth/custom.ts';
import type { GraphRegistry } from '../graphs/index.ts';
import type { UiBundles } from '../graphs/ui.ts';
import type { RunEngine } from '../runs/engine.ts';
import type { AgentService } from '../service.ts';
import type { Storage } from '../storage/types.ts';

export interface RouteDeps {
  storage: Storage;
  graphs: GraphRegistry;
  engine: RunEngine;
  service: AgentService;
  keepAliveMs: number;
  /** A stream client that takes nothing for this long is disconnected (default 60 s). */
  streamStallMs?: number;
  version: string;
  /** langgraph.json's custom auth: commands over a WebSocket are authorized with it one by one. */
  auth?: CustomAuth;
  /** Bundled generative UI components of langgraph.json "ui". */
  ui?: UiBundles;
}
