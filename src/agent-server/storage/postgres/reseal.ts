// Reseals the Postgres store's encrypted columns under the current data key (see resealText in ../data-cipher.ts):
// after a rotation, and for data written before a key was set. Batches walked by ctid; a row is written back only
// while it is still the row version that was read with the same value (a run writing meanwhile wins). Several
// replicas may run it at once: each value ends up sealed under the current key whoever wrote it.
import type pg from 'pg';
import {
  currentPrefix,
  DataKeyError,
  isSealed,
  resealText,
  resealTyped,
  type DataKeyring,
  type ResealCounts,
} from '../data-cipher.ts';
import { SEALED_ITEM_KEY } from './items.ts';

const BATCH = 200;

type Kind = 'jsonb' | 'item' | 'blob';

/** [table, column, kind]: jsonb holds a sealed JSON string, item the one-key object of items.ts, blob bytea. */
const COLUMNS: ReadonlyArray<readonly [string, string, Kind]> = [
  ['threads', '"values"', 'jsonb'],
  ['runs', 'kwargs', 'jsonb'],
  ['crons', 'payload', 'jsonb'],
  ['store', 'value', 'item'],
  ['checkpoint_blobs', 'blob', 'blob'],
  ['checkpoint_writes', 'blob', 'blob'],
];

export async function resealPostgres(
  pool: pg.Pool,
  schema: string,
  keyring: DataKeyring,
  signal?: AbortSignal,
): Promise<ResealCounts> {
  const counts: ResealCounts = { resealed: 0, failed: 0 };
  const prefix = currentPrefix(keyring);
  for (const [name, column, kind] of COLUMNS) {
    const table = `"${schema}".${name}`;
    // What is sealed under the current key already, in SQL ($2: the prefix).
    const current =
      kind === 'jsonb'
        ? `jsonb_typeof(${column}) = 'string' AND left(${column} #>> '{}', length($2)) = $2`
        : kind === 'item'
          ? `left(${column} ->> '${SEALED_ITEM_KEY}', length($2)) = $2`
          : `substring(${column} from 1 for length(convert_to($2, 'UTF8'))) = convert_to($2, 'UTF8')`;
    const typeSel = kind === 'blob' ? ', type AS t' : '';
    let after = '(0,0)';
    for (;;) {
      if (signal?.aborted) return counts;
      const { rows } = await pool.query<{ id: string; v: unknown; t?: string }>(
        `SELECT ctid::text AS id, ${column} AS v${typeSel} FROM ${table}
        WHERE ctid > $1::tid AND ${column} IS NOT NULL AND NOT coalesce(${current}, false)
        ORDER BY ctid LIMIT ${BATCH}`,
        [after, prefix],
      );
      if (!rows.length) break;
      after = rows[rows.length - 1]!.id;
      for (const r of rows) {
        try {
          const written = await resealRow(pool, table, column, kind, keyring, r);
          if (written) counts.resealed++;
        } catch (err) {
          if (!(err instanceof DataKeyError)) throw err;
          counts.failed++;
        }
      }
    }
  }
  return counts;
}

async function resealRow(
  pool: pg.Pool,
  table: string,
  column: string,
  kind: Kind,
  keyring: DataKeyring,
  r: { id: string; v: unknown; t?: string },
): Promise<boolean> {
  if (kind === 'blob') {
    const next = resealTyped(keyring, r.t ?? 'json', r.v as Buffer);
    if (!next) return false;
    const res = await pool.query(
      `UPDATE ${table} SET ${column} = $1, type = $2 WHERE ctid = $3::tid AND ${column} = $4 AND type IS NOT DISTINCT FROM $5`,
      [next.data, next.type, r.id, r.v, r.t ?? null],
    );
    return (res.rowCount ?? 0) > 0;
  }
  const sealedItem = kind === 'item' ? (r.v as Record<string, unknown>)[SEALED_ITEM_KEY] : undefined;
  // A sealed text as it is; anything else is the plain JSON value it was stored as.
  const stored =
    typeof sealedItem === 'string' && isSealed(sealedItem) && Object.keys(r.v as object).length === 1
      ? sealedItem
      : kind === 'jsonb' && typeof r.v === 'string' && isSealed(r.v)
        ? r.v
        : JSON.stringify(r.v);
  const next = resealText(keyring, stored);
  if (next === null) return false;
  const value = kind === 'item' ? { [SEALED_ITEM_KEY]: next } : next;
  const res = await pool.query(
    `UPDATE ${table} SET ${column} = $1::jsonb WHERE ctid = $2::tid AND ${column} = $3::jsonb`,
    [JSON.stringify(value), r.id, JSON.stringify(r.v)],
  );
  return (res.rowCount ?? 0) > 0;
}
