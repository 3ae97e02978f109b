// What every per-aggregate service is built over, and the types and texts they share.
import type { IncomingHttpHeaders } from 'node:http';
import { NotFoundError } from '../../lib/errors.ts';
import type { AuthFilters, RequestAuth } from '../auth/custom.ts';
import type { GraphRegistry } from '../graphs/index.ts';
import type { ConfigurableHeadersConfig } from './configurable-headers.ts';
import type { RunEngine } from '../runs/engine.ts';
import type { WebhookPolicy } from '../runs/webhook-policy.ts';
import type { Storage } from '../storage/types.ts';

export interface ServiceDeps {
  storage: Storage;
  graphs: GraphRegistry;
  engine: RunEngine;
  /** Where run webhooks may point (--webhook-allow, langgraph.json webhooks.url); default: public hosts only. */
  webhookPolicy?: WebhookPolicy;
  /** langgraph.json http.configurable_headers (absent: every x-* header and user-agent, as on the platform). */
  configurableHeaders?: ConfigurableHeadersConfig | null;
}

export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const threadNotFound = (threadId: string) => `Thread not found: ${threadId}`;

export function ignoreNotFound(err: unknown): void {
  if (!(err instanceof NotFoundError)) throw err;
}

/** The caller of a run under custom auth: who they are and what the threads:create_run handler decided. */
export interface RunAuth {
  auth: RequestAuth | null;
  filters?: AuthFilters;
  /** The id the handler was shown for the run. */
  runId?: string;
  /** The request's headers: the ones langgraph.json's http.configurable_headers lets through go into configurable. */
  headers?: IncomingHttpHeaders;
  /** The caller's assistants:read filter for an assistant id: a run may use only an assistant its caller can read. */
  assistantFilter?: AssistantReadFilter;
}

/**
 * Runs the assistants:read handler for an assistant id (its filter; a denial throws). An assistant the filter hides
 * is answered exactly like one that does not exist.
 */
export type AssistantReadFilter = (assistantId: string) => Promise<AuthFilters | undefined>;
