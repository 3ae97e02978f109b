// The long-term memory store's items (client.store): put, get, delete, search, list namespaces.
import { z } from 'zod';
import { MAX_OFFSET } from './common.ts';

/** Bounds of what one item may hold (documented in the README). */
export const STORE_LIMITS = {
  labelChars: 256,
  labels: 32,
  keyChars: 1024,
  /** An item's value as JSON (UTF-8 bytes). */
  valueBytes: 1024 * 1024,
  /** Ten years, in minutes. */
  ttlMinutes: 5_256_000,
  pageSize: 1000,
} as const;

// LangGraph's namespace rules (what its stores accept): labels are non-empty and hold no "." (the query string
// joins them with ".") or ":"; "langgraph" is reserved as the first label.
const Label = z
  .string()
  .min(1, 'labels must not be empty')
  .max(STORE_LIMITS.labelChars, `labels must be at most ${STORE_LIMITS.labelChars} characters`)
  .refine((l) => !l.includes('.'), 'labels must not contain "."')
  .refine((l) => !l.includes(':'), 'labels must not contain ":"');
const reservedRoot = (ns: string[]) => ns[0] !== 'langgraph';
const Namespace = z
  .array(Label)
  .min(1, 'must have at least one label')
  .max(STORE_LIMITS.labels, `must have at most ${STORE_LIMITS.labels} labels`)
  .refine(reservedRoot, 'must not start with "langgraph" (reserved)');
const NamespacePrefix = z
  .array(Label)
  .max(STORE_LIMITS.labels, `must have at most ${STORE_LIMITS.labels} labels`)
  .refine(reservedRoot, 'must not start with "langgraph" (reserved)');
// listNamespaces patterns: "*" matches any one label.
const NamespacePattern = z.array(z.union([z.literal('*'), Label])).max(STORE_LIMITS.labels);
const Key = z
  .string()
  .min(1, 'must not be empty')
  .max(STORE_LIMITS.keyChars, `must be at most ${STORE_LIMITS.keyChars} characters`);
const Value = z
  .record(z.string(), z.unknown())
  .refine(
    (v) => Buffer.byteLength(JSON.stringify(v)) <= STORE_LIMITS.valueBytes,
    `must be at most ${STORE_LIMITS.valueBytes} bytes as JSON`,
  );
const Limit = (dflt: number) => z.number().int().min(1).max(STORE_LIMITS.pageSize).default(dflt);
const Offset = z.number().int().min(0).max(MAX_OFFSET).default(0);

export const StorePut = z.object({
  namespace: Namespace,
  key: Key,
  value: Value,
  index: z.union([z.literal(false), z.array(z.string().min(1))]).nullish(),
  ttl: z.number().positive().max(STORE_LIMITS.ttlMinutes).nullish(),
});

export const StoreGetQuery = z.object({
  // The SDK sends the labels joined with ".".
  namespace: z
    .string()
    .transform((s) => (s === '' ? [] : s.split('.')))
    .pipe(Namespace),
  key: Key,
  refresh_ttl: z
    .enum(['true', 'false'])
    .transform((v) => v === 'true')
    .optional(),
});

export const StoreDelete = z.object({ namespace: Namespace, key: Key });

export const StoreSearch = z.object({
  namespace_prefix: NamespacePrefix.default([]),
  filter: z.record(z.string(), z.unknown()).nullish(),
  limit: Limit(10),
  offset: Offset,
  query: z.string().nullish(),
  refresh_ttl: z.boolean().nullish(),
});

export const StoreNamespaces = z.object({
  prefix: NamespacePattern.nullish(),
  suffix: NamespacePattern.nullish(),
  max_depth: z.number().int().min(1).nullish(),
  limit: Limit(100),
  offset: Offset,
});
