// Requests that graph code running in this process sends to its own server (`new Client()` with no arguments)
// carry a random per-process token in one header, so an API-key check can let them through without the graph
// knowing any key. The token never leaves the process: executor threads receive it through workerData, and the
// in-process fetch adds it only to requests for this server's own origin.
import { randomBytes, timingSafeEqual } from 'node:crypto';

export const INTERNAL_CALL_HEADER = 'x-agentplane-internal-call';

let token: string | undefined;

/** This process's token (created on first use). */
export function internalCallToken(): string {
  token ??= randomBytes(32).toString('hex');
  return token;
}

/** Executor threads adopt the token of the thread that started them. */
export function adoptInternalCallToken(value: string): void {
  token = value;
}

/** True when the request headers carry this process's token (constant-time comparison). */
export function isInternalCall(headers: Record<string, string | string[] | undefined>): boolean {
  const raw = headers[INTERNAL_CALL_HEADER];
  const value = Array.isArray(raw) ? raw[0] : raw;
  if (!value) return false;
  const expected = Buffer.from(internalCallToken());
  const given = Buffer.from(value);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
