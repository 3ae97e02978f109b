// How the package's own checkpoint reads go out (FewerTripsPostgresSaver, checkpointer.ts): as named statements,
// and with their blob columns as JSON.
import type pg from 'pg';

// The package's checkpoint reads (getTuple, list) return each checkpoint's blobs and pending writes as arrays of
// bytea arrays. node-pg parses that text format in JavaScript, a character at a time over the hex digits (two per
// byte), and this was the largest cost of reading a checkpoint. These reads ask for the same columns as JSON with
// base64 blobs (decoded natively) and get back the arrays the package expects, with the same bytes. Only the
// exact fragments below are replaced: if a package version words them differently, its SQL goes out unchanged.
const BLOB_ARRAYS: ReadonlyArray<readonly [string, string]> = [
  [
    'array_agg(array[bl.channel::bytea, bl.type::bytea, bl.blob])',
    "json_agg(json_build_array(bl.channel, bl.type, encode(bl.blob, 'base64')))",
  ],
  [
    'array_agg(array[cw.task_id::text::bytea, cw.channel::bytea, cw.type::bytea, cw.blob] order by cw.task_id, cw.idx)',
    "json_agg(json_build_array(cw.task_id::text, cw.channel, cw.type, encode(cw.blob, 'base64')) order by cw.task_id, cw.idx)",
  ],
];

/** The read with JSON blob columns, or undefined when the text is not one of the package's checkpoint reads. */
export function jsonBlobRead(text: string): string | undefined {
  if (!BLOB_ARRAYS.every(([from]) => text.includes(from))) return undefined;
  return BLOB_ARRAYS.reduce((sql, [from, to]) => sql.replace(from, to), text);
}

type JsonBlobRow = Record<string, unknown> & { channel_values?: unknown; pending_writes?: unknown };

/** channel_values / pending_writes back in the package's shape: arrays of byte arrays (text as UTF-8, null kept). */
export function blobArraysOf(row: JsonBlobRow): void {
  const bytes = (entry: unknown[]) =>
    entry.map((v, i) =>
      v === null ? null : i === entry.length - 1 ? Buffer.from(v as string, 'base64') : Buffer.from(v as string),
    );
  for (const key of ['channel_values', 'pending_writes'] as const) {
    const value = row[key];
    if (Array.isArray(value)) row[key] = value.map((entry) => bytes(entry as unknown[]));
  }
}

/**
 * The pool as the package sees it: query(text, values) of a known text goes out as a named statement, and its
 * checkpoint reads come back through JSON (above).
 */
export function namingPool(pool: pg.Pool, names: ReadonlyMap<string, string>): pg.Pool {
  return new Proxy(pool, {
    get(target, prop) {
      if (prop === 'query') {
        return (...args: unknown[]) => {
          if (typeof args[0] !== 'string' || args.length > 2)
            return (target.query as (...a: unknown[]) => unknown)(...args);
          const text = args[0];
          const json = jsonBlobRead(text);
          const name = names.get(text);
          const values = (args[1] as unknown[] | undefined) ?? [];
          const sent = target.query(name ? { name, text: json ?? text, values } : { text: json ?? text, values });
          if (!json) return sent;
          return sent.then((result) => {
            for (const row of result.rows as JsonBlobRow[]) blobArraysOf(row);
            return result;
          });
        };
      }
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}
