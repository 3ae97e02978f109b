// Reseals the embedded store's encrypted columns under the current data key (see resealText in ../data-cipher.ts):
// after a rotation, and for data written before a key was set. A batch of rows per write transaction, walked by
// rowid; a row is written back only while it still holds what was read (a run writing meanwhile wins).
import type Database from 'better-sqlite3';
import {
  currentPrefix,
  DataKeyError,
  resealText,
  resealTyped,
  type DataKeyring,
  type ResealCounts,
} from '../data-cipher.ts';
import { underWriteLock } from './context.ts';

const BATCH = 200;

/** [table, column, type column (checkpoint values) or null (JSON text)]. */
const COLUMNS: ReadonlyArray<readonly [string, string, string | null]> = [
  ['ap_threads', '"values"', null],
  ['ap_runs', 'kwargs', null],
  ['ap_crons', 'payload', null],
  ['ap_store_items', 'value', null],
  ['checkpoints', 'checkpoint', 'type'],
  ['writes', 'value', 'type'],
];

export async function resealEmbedded(
  db: Database.Database,
  keyring: DataKeyring,
  signal?: AbortSignal,
): Promise<ResealCounts> {
  const counts: ResealCounts = { resealed: 0, failed: 0 };
  const prefix = Buffer.from(currentPrefix(keyring), 'latin1');
  for (const [table, column, typeColumn] of COLUMNS) {
    const typeSel = typeColumn ? `, ${typeColumn} AS t` : '';
    // Rows already sealed under the current key are skipped in SQL (compared as bytes, TEXT and BLOB alike).
    const select = db.prepare(`SELECT rowid AS id, ${column} AS v${typeSel} FROM ${table}
      WHERE rowid > ? AND ${column} IS NOT NULL AND substr(CAST(${column} AS BLOB), 1, ?) IS NOT ?
      ORDER BY rowid LIMIT ${BATCH}`);
    const update = db.prepare(
      typeColumn
        ? `UPDATE ${table} SET ${column} = ?, ${typeColumn} = ? WHERE rowid = ? AND ${column} = ? AND ${typeColumn} IS ?`
        : `UPDATE ${table} SET ${column} = ? WHERE rowid = ? AND ${column} = ?`,
    );
    let after = 0;
    for (;;) {
      if (signal?.aborted) return counts;
      const rows = select.all(after, prefix.length, prefix) as Array<{ id: number; v: string | Buffer; t?: string }>;
      if (!rows.length) break;
      after = rows[rows.length - 1]!.id;
      const tx = db.transaction(() => {
        for (const r of rows) {
          try {
            if (typeColumn) {
              const next = resealTyped(keyring, r.t ?? 'json', r.v);
              if (next && update.run(next.data, next.type, r.id, r.v, r.t ?? null).changes) counts.resealed++;
            } else {
              const next = resealText(keyring, typeof r.v === 'string' ? r.v : r.v.toString('utf8'));
              if (next !== null && update.run(next, r.id, r.v).changes) counts.resealed++;
            }
          } catch (err) {
            if (!(err instanceof DataKeyError)) throw err;
            counts.failed++;
          }
        }
      });
      underWriteLock(db, () => tx.immediate());
      // Let requests in between batches.
      await new Promise((r) => setImmediate(r));
    }
  }
  return counts;
}
