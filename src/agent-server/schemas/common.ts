// Request schemas (zod) of the agent server's API, one file per aggregate; fastify-type-provider-zod validates
// with them and the OpenAPI document is generated from them. Field names and enums follow the platform's API and
// today's SDK. This file: the pieces several aggregates share.
import { z } from 'zod';

/** Largest page offset of a list or search (fits a 32-bit integer in either store). */
export const MAX_OFFSET = 2_147_483_647;

export const obj = z.record(z.string(), z.unknown());
export const uuid = z.uuid({ message: 'must be a UUID' });

export const ThreadParams = z.object({ thread_id: uuid });
export const RunParams = z.object({ thread_id: uuid, run_id: uuid });
export const AssistantParams = z.object({ assistant_id: z.string().min(1) });
export const CheckpointParams = z.object({ thread_id: uuid, checkpoint_id: z.string().min(1) });

export const Interrupts = z.union([z.literal('*'), z.array(z.string())]);
export const SortOrder = z.enum(['asc', 'desc']);

export const boolish = z
  .union([z.boolean(), z.enum(['0', '1', 'true', 'false'])])
  .transform((v) => v === true || v === '1' || v === 'true');

export const Config = z
  .object({
    tags: z.array(z.string()).optional(),
    recursion_limit: z.number().int().positive().optional(),
    configurable: obj.optional(),
    metadata: obj.optional(),
  })
  .passthrough();

export const CheckpointRef = z
  .object({
    checkpoint_id: z.string().nullish(),
    checkpoint_ns: z.string().nullish(),
    checkpoint_map: obj.nullish(),
    thread_id: z.string().nullish(),
  })
  .passthrough();

export const Command = z.object({
  update: z.unknown().optional(),
  resume: z.unknown().optional(),
  goto: z.unknown().optional(),
});

function isHttpUrl(v: string): boolean {
  try {
    const u = new URL(v);
    return (u.protocol === 'http:' || u.protocol === 'https:') && !!u.hostname;
  } catch {
    return false;
  }
}

/** A path on this deployment ("/hooks/done"): not "//host" (a URL without scheme) and no backslash. */
function isOwnPath(v: string): boolean {
  return v.startsWith('/') && !v.startsWith('//') && !v.includes('\\');
}

/**
 * Where a run's end is POSTed: an absolute http(s) URL, or a path, which the deployment's own custom routes
 * (langgraph.json http.app) answer.
 */
export const WebhookUrl = z
  .string()
  .max(2048)
  .refine((v) => isHttpUrl(v) || isOwnPath(v), {
    message: 'must be an absolute http:// or https:// URL, or a path of this deployment\'s custom routes ("/my-route")',
  });

/** Only the named fields of each row (none named: whole rows); a name a row lacks is skipped. */
export function selectFields<T extends object>(rows: T[], fields: string[] | null | undefined): Partial<T>[] {
  if (!fields?.length) return rows;
  return rows.map(
    (r) => Object.fromEntries(fields.filter((f) => f in r).map((f) => [f, r[f as keyof T]])) as Partial<T>,
  );
}

/** `select` in a query string: the SDK sends a JSON list (`["run_id","status"]`); a plain name may repeat. */
export const querySelect = z.preprocess(
  (v) => {
    if (typeof v !== 'string') return v;
    if (!v.startsWith('[')) return [v];
    try {
      return JSON.parse(v) as unknown;
    } catch {
      return v; // refused below, naming the field
    }
  },
  z.array(z.string().max(100)).max(50).optional(),
);
