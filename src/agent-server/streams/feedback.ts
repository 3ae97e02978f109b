// The `feedback` stream event of a run created with `feedback_keys`: after the run, one presigned LangSmith
// feedback URL per key ({key: url}), made by LangSmith's POST /feedback/tokens through the langsmith client, for
// the trace of the run (its id is the run id). Only with LangSmith configured (LANGSMITH_API_KEY, endpoint from
// LANGSMITH_ENDPOINT as the langsmith client reads them); without it runs have no feedback event.
import { Client } from 'langsmith/client';
import type { Logger } from '../../lib/logger.ts';
import { stringify } from '../serde.ts';

export interface LangSmithSettings {
  apiKey: string;
  endpoint: string;
}

/** How long a presigned feedback URL stays valid (the langsmith client's own default too). */
const TOKEN_HOURS = 3;
/** A slow LangSmith delays the run's last events by at most this (per attempt, two attempts). */
const REQUEST_TIMEOUT_MS = 10_000;

/** LangSmith from the environment, as the langsmith client reads it (LANGSMITH_* first, then LANGCHAIN_*). */
export function langSmithFromEnv(env: NodeJS.ProcessEnv): LangSmithSettings | null {
  const apiKey = (env.LANGSMITH_API_KEY ?? env.LANGCHAIN_API_KEY)?.trim();
  if (!apiKey) return null;
  const endpoint = (env.LANGSMITH_ENDPOINT ?? env.LANGCHAIN_ENDPOINT)?.trim() || 'https://api.smith.langchain.com';
  return { apiKey, endpoint };
}

/** The data of a run's feedback event (JSON text), or null when it has no keys or LangSmith refused. */
export type FeedbackEvent = (runId: string, keys: string[]) => Promise<string | null>;

export function langSmithFeedback(settings: LangSmithSettings, logger: Logger): FeedbackEvent {
  const client = new Client({
    apiKey: settings.apiKey,
    apiUrl: settings.endpoint,
    timeout_ms: REQUEST_TIMEOUT_MS,
    callerOptions: { maxRetries: 1 },
    autoBatchTracing: false,
  });
  return async (runId, keys) => {
    const unique = [...new Set(keys)];
    if (!unique.length) return null;
    try {
      const urls: Record<string, string> = {};
      await Promise.all(
        unique.map(async (key) => {
          const token = await client.createPresignedFeedbackToken(runId, key, { expiration: { hours: TOKEN_HOURS } });
          urls[key] = token.url;
        }),
      );
      return stringify(Object.fromEntries(unique.map((k) => [k, urls[k]])));
    } catch (err) {
      // The message only: the client's errors carry no key, but its request options might.
      logger.warn(
        { run_id: runId, reason: (err as Error).message },
        'creating LangSmith feedback tokens failed; the run has no feedback event',
      );
      return null;
    }
  };
}
