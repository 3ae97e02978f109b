// The long-term memory store of the embedded mode, in the same SQLite file as everything else. Written here
// because @langchain/langgraph-checkpoint-sqlite 1.0.x ships no store (only SqliteSaver). A namespace is kept as
// its labels joined with "." (labels cannot contain one). Filters and semantic search run over the items under
// the prefix in this process: semantic search is a brute-force cosine over the stored vectors, fine for the
// thousands of items one embedded server holds, not for millions.
import type Database from 'better-sqlite3';
import { isoNow } from '../common.ts';
import { underWriteLock } from './context.ts';
import {
  ItemsBaseStore,
  cosine,
  listNamespaces,
  matchesFilter,
  textsToEmbed,
  type Embedder,
  type ItemsConfig,
} from '../items.ts';
import type { ItemSearch, ItemStore, Json, NamespaceQuery, StoreItem } from '../types.ts';
import type { JsonCodec } from '../data-cipher.ts';

type Row = {
  namespace: string;
  key: string;
  value: string;
  created_at: string;
  updated_at: string;
  ttl_minutes: number | null;
};

const LIVE = '(expires_at IS NULL OR expires_at > ?)';

/** Items of the store in `db` (the schema must exist: migrations.ts). `embedder` when store.index is set. */
export function sqliteItems(
  db: Database.Database,
  sql: (text: string) => Database.Statement,
  config: ItemsConfig,
  embedder: Embedder | undefined,
  codec: JsonCodec,
): ItemStore {
  const nsPath = (ns: string[]) => ns.join('.');
  const toItem = (r: Row, score?: number | null): StoreItem => ({
    namespace: r.namespace.split('.'),
    key: r.key,
    value: codec.read<Json>(r.value),
    created_at: r.created_at,
    updated_at: r.updated_at,
    ...(score !== undefined ? { score } : {}),
  });
  /** A write transaction (IMMEDIATE), under the write lock of this process's connections to the file. */
  const write = <T>(fn: () => T): T => underWriteLock(db, () => db.transaction(fn).immediate());
  const refresh = (rows: Row[]) => {
    const upd = sql(
      `UPDATE ap_store_items SET expires_at = ? WHERE namespace = ? AND key = ? AND ttl_minutes IS NOT NULL`,
    );
    const now = Date.now();
    const due = rows.filter((r) => r.ttl_minutes);
    if (due.length)
      write(() => due.forEach((r) => upd.run(now + (r.ttl_minutes as number) * 60_000, r.namespace, r.key)));
  };
  /** Rows under a prefix ("" = every namespace), live only. */
  const underPrefix = (prefix: string[]): Row[] => {
    if (!prefix.length) return sql(`SELECT * FROM ap_store_items WHERE ${LIVE}`).all(Date.now()) as Row[];
    const p = nsPath(prefix);
    return sql(`SELECT * FROM ap_store_items WHERE (namespace = ? OR substr(namespace, 1, ?) = ?) AND ${LIVE}`).all(
      p,
      p.length + 1,
      `${p}.`,
      Date.now(),
    ) as Row[];
  };

  const items: ItemStore = {
    semantic: !!embedder,
    get store() {
      return store;
    },
    async put(namespace, key, value, opts = {}) {
      const ns = nsPath(namespace);
      const ttl = opts.ttl ?? config.ttl.defaultMinutes;
      let vectors: Array<{ field: string; embedding: number[] }> = [];
      if (embedder && config.index && opts.index !== false) {
        const texts = textsToEmbed(value, opts.index ?? config.index.fields);
        const embedded = texts.length ? await embedder.embedDocuments(texts.map((t) => t.text)) : [];
        vectors = texts.map((t, i) => ({ field: t.field, embedding: embedded[i]! }));
      }
      const now = isoNow();
      write(() => {
        sql(`INSERT INTO ap_store_items (namespace, key, value, created_at, updated_at, expires_at, ttl_minutes)
          VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value,
          updated_at = excluded.updated_at, expires_at = excluded.expires_at, ttl_minutes = excluded.ttl_minutes`).run(
          ns,
          key,
          codec.write(value),
          now,
          now,
          ttl ? Date.now() + ttl * 60_000 : null,
          ttl ?? null,
        );
        sql('DELETE FROM ap_store_vectors WHERE namespace = ? AND key = ?').run(ns, key);
        const ins = sql('INSERT INTO ap_store_vectors (namespace, key, field, embedding) VALUES (?, ?, ?, ?)');
        for (const v of vectors) ins.run(ns, key, v.field, JSON.stringify(v.embedding));
      });
    },
    async get(namespace, key, opts = {}) {
      const row = sql(`SELECT * FROM ap_store_items WHERE namespace = ? AND key = ? AND ${LIVE}`).get(
        nsPath(namespace),
        key,
        Date.now(),
      ) as Row | undefined;
      if (!row) return null;
      if (opts.refresh_ttl ?? config.ttl.refreshOnRead) refresh([row]);
      return toItem(row);
    },
    async delete(namespace, key) {
      const ns = nsPath(namespace);
      write(() => {
        sql('DELETE FROM ap_store_items WHERE namespace = ? AND key = ?').run(ns, key);
        sql('DELETE FROM ap_store_vectors WHERE namespace = ? AND key = ?').run(ns, key);
      });
    },
    async search(q: ItemSearch) {
      const rows = underPrefix(q.namespace_prefix).filter((r) => matchesFilter(codec.read<Json>(r.value), q.filter));
      let page: Array<{ row: Row; score?: number | null }>;
      if (q.query && embedder) {
        const target = await embedder.embedQuery(q.query);
        const vecs = sql('SELECT namespace, key, embedding FROM ap_store_vectors').all() as Array<{
          namespace: string;
          key: string;
          embedding: string;
        }>;
        const best = new Map<string, number>();
        for (const v of vecs) {
          const id = `${v.namespace}\u0000${v.key}`;
          const s = cosine(target, JSON.parse(v.embedding) as number[]);
          if (!best.has(id) || s > best.get(id)!) best.set(id, s);
        }
        page = rows
          .map((row) => ({ row, score: best.get(`${row.namespace}\u0000${row.key}`) ?? null }))
          // Scored items by similarity, then the ones without vectors (index: false), newest first.
          .sort(
            (a, b) =>
              (b.score ?? -Infinity) - (a.score ?? -Infinity) || b.row.updated_at.localeCompare(a.row.updated_at),
          )
          .slice(q.offset, q.offset + q.limit);
      } else {
        page = rows
          .sort((a, b) => b.updated_at.localeCompare(a.updated_at))
          .slice(q.offset, q.offset + q.limit)
          .map((row) => ({ row }));
      }
      if (q.refresh_ttl ?? config.ttl.refreshOnRead) refresh(page.map((p) => p.row));
      return page.map((p) => toItem(p.row, p.score));
    },
    async listNamespaces(q: NamespaceQuery) {
      const all = (sql(`SELECT DISTINCT namespace FROM ap_store_items WHERE ${LIVE}`).all(Date.now()) as Row[]).map(
        (r) => r.namespace.split('.'),
      );
      return listNamespaces(all, {
        matchConditions: [
          ...(q.prefix?.length ? [{ matchType: 'prefix' as const, path: q.prefix }] : []),
          ...(q.suffix?.length ? [{ matchType: 'suffix' as const, path: q.suffix }] : []),
        ],
        maxDepth: q.max_depth,
        limit: q.limit,
        offset: q.offset,
      });
    },
    async sweep() {
      const now = Date.now();
      return write(() => {
        sql(`DELETE FROM ap_store_vectors WHERE EXISTS (SELECT 1 FROM ap_store_items i WHERE i.namespace =
          ap_store_vectors.namespace AND i.key = ap_store_vectors.key AND i.expires_at <= ?)`).run(now);
        return sql('DELETE FROM ap_store_items WHERE expires_at <= ?').run(now).changes;
      });
    },
  };
  const store = new ItemsBaseStore(items);
  return items;
}
