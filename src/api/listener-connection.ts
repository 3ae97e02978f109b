// How a data plane reaches its control plane as a listener: the settings `agentplane listener` and a
// data-plane-only operator (--listener-*) both take, checked alike, and the client of the Listeners v2 API they make.
import { z } from 'zod';
import { createClient } from './client.ts';

export const listenerConnectionFields = {
  controlPlaneUrl: z
    .string({ error: 'is required' })
    .url()
    .refine((u) => /^https?:/.test(u), 'must be http(s)')
    .transform((u) => u.replace(/\/+$/, '')),
  apiKey: z.string({ error: 'is required' }).min(1),
  tenant: z.string({ error: 'is required' }).min(1),
  listenerId: z.string({ error: 'is required' }).uuid(),
};

/** `version` (the release this data plane runs) goes out with each call, for the control plane's listener record. */
export type ListenerConnection = {
  controlPlaneUrl: string;
  apiKey: string;
  tenant: string;
  listenerId: string;
  version?: string;
};

/** The Listeners v2 API as this listener calls it, with its key and workspace. */
export function listenerClient(conn: ListenerConnection & { timeoutMs?: number }) {
  const { controlPlaneUrl: url, apiKey, tenant, version, timeoutMs } = conn;
  return createClient({ url, apiKey, tenant, version, timeoutMs }).listener(conn.listenerId);
}
