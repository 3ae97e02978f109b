// The long-term memory store on Postgres: LangGraph's PostgresStore (@langchain/langgraph-checkpoint-postgres/store)
// owns the tables (`store`, and `store_vectors` with pgvector), their migrations, writes, deletes, the TTL sweep
// and vector search. Reads and plain searches are our SQL on its table, because PostgresStore differs from the
// platform there: its prefix match is a LIKE on the joined path (prefix ["a","b"] also finds ["a","bc"]), an
// empty prefix is refused, a search's refresh_ttl is ignored and a refresh restarts the default TTL, not the
// item's. Its namespace check also refuses "_", "%" and "\" in labels: labels are stored with those characters
// (and "~") escaped as "~XX" (hex), so any label the platform accepts works.
import pg from 'pg';
import { guardPgPool } from '../../../lib/connections.ts';
import { PostgresStore } from '@langchain/langgraph-checkpoint-postgres/store';
import { isoNow } from '../common.ts';
import {
  ItemsBaseStore,
  isOperators,
  listNamespaces,
  matchesFilter,
  type Embedder,
  type ItemsConfig,
} from '../items.ts';
import { isSealed, type JsonCodec } from '../data-cipher.ts';
import type { ItemSearch, ItemStore, Json, NamespaceQuery, StoreItem } from '../types.ts';

const encodeLabel = (l: string) =>
  l.replace(/[~_%\\]/g, (c) => `~${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`);
const decodeLabel = (l: string) => l.replace(/~([0-9A-F]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
export const encodeNamespace = (ns: string[]) => ns.map(encodeLabel);
const nsPath = (ns: string[]) => encodeNamespace(ns).join(':');
const decodePath = (p: string) => p.split(':').map(decodeLabel);
const ts = (v: unknown) => (v instanceof Date ? isoNow(v.getTime()) : String(v));

/** Whether this server has pgvector to offer (semantic search on Postgres needs it). */
export async function pgvectorAvailable(pool: pg.Pool): Promise<boolean> {
  const { rows } = await pool.query(`SELECT 1 FROM pg_available_extensions WHERE name = 'vector'`);
  return rows.length > 0;
}

export function newPostgresStore(
  databaseUrl: string,
  schema: string,
  config: ItemsConfig,
  embedder: Embedder | undefined,
  onError?: (err: Error) => void,
  poolSize = 5,
) {
  const store = new PostgresStore({
    connectionOptions: { connectionString: databaseUrl, max: poolSize },
    schema,
    // Migrations run once, under the agent server's migration lock (see index.ts); TTL refresh and sweep are ours.
    ensureTables: false,
    ttl: config.ttl.defaultMinutes ? { defaultTtl: config.ttl.defaultMinutes } : undefined,
    index:
      embedder && config.index ? { dims: config.index.dims, embed: embedder, fields: config.index.fields } : undefined,
  });
  guardPgPool(storePool(store), onError);
  return store;
}

/**
 * The pool PostgresStore makes for itself from connectionOptions (it takes no pool of ours): it needs our error
 * listeners like every other pool. Checked at run time, so a release that renames the field fails loudly here.
 */
export function storePool(store: PostgresStore): pg.Pool {
  const pool = (store as unknown as { core?: { pool?: unknown } }).core?.pool;
  if (!(pool instanceof pg.Pool)) throw new Error('PostgresStore no longer exposes its pool (core.pool)');
  return pool;
}

/**
 * The key of the one-key object a sealed item value is stored as: PostgresStore takes objects only. Its filters and
 * embeddings would see only this key, so a sealed store filters in JavaScript and has no semantic search.
 */
export const SEALED_ITEM_KEY = '$agentplane_sealed';

/** An item's stored value, opened when sealed. */
function openItemValue(codec: JsonCodec, value: unknown): Json {
  const sealed = (value as Record<string, unknown> | null)?.[SEALED_ITEM_KEY];
  if (typeof sealed === 'string' && isSealed(sealed) && Object.keys(value as object).length === 1) {
    return codec.read<Json>(sealed);
  }
  return value as Json;
}

/** The items over `pg` (LangGraph's store) and `pool` (our reads); both in `schema`. */
export function postgresItems(
  pool: pg.Pool,
  schema: string,
  pgStore: PostgresStore,
  config: ItemsConfig,
  semantic: boolean,
  codec: JsonCodec,
): ItemStore {
  const table = `"${schema}".store`;
  const live = '(expires_at IS NULL OR expires_at > CURRENT_TIMESTAMP)';
  const sealing = !!codec.keyring;
  const toItem = (r: Record<string, unknown>, score?: number | null): StoreItem => ({
    namespace: decodePath(r.namespace_path as string),
    key: r.key as string,
    value: openItemValue(codec, r.value),
    created_at: ts(r.created_at),
    updated_at: ts(r.updated_at),
    ...(score !== undefined ? { score } : {}),
  });
  /**
   * Restarts each item's own TTL. Its table keeps no TTL column: put wrote expires_at = updated_at + ttl, so the
   * refresh moves updated_at too (PostgresStore's own trigger would anyway), keeping that difference the TTL.
   */
  const refresh = async (rows: Array<{ namespace_path: unknown; key: unknown }>) => {
    if (!rows.length) return;
    await pool.query(
      `UPDATE ${table} SET expires_at = CURRENT_TIMESTAMP + (expires_at - updated_at), updated_at = CURRENT_TIMESTAMP
      WHERE expires_at IS NOT NULL AND (namespace_path, key) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
      [rows.map((r) => r.namespace_path), rows.map((r) => r.key)],
    );
  };

  /** Search filters in SQL, with the semantics of matchesFilter (items.ts). */
  function filterSql(filter: Json | undefined, params: unknown[]): string[] {
    const p = (v: unknown) => (params.push(v), `$${params.length}`);
    const out: string[] = [];
    for (const [key, want] of Object.entries(filter ?? {})) {
      const field = `value -> ${p(key)}`;
      const ops = isOperators(want) ? Object.entries(want) : null;
      if (!ops) {
        out.push(`${field} = ${p(JSON.stringify(want))}::jsonb`);
        continue;
      }
      for (const [op, arg] of ops) {
        const v = () => `${p(JSON.stringify(arg))}::jsonb`;
        const ordered = (cmp: string) => {
          const a = v();
          return `(jsonb_typeof(${field}) = jsonb_typeof(${a}) AND jsonb_typeof(${a}) IN ('number','string') AND ${field} ${cmp} ${a})`;
        };
        switch (op) {
          case '$eq':
            out.push(`${field} = ${v()}`);
            break;
          case '$ne':
            out.push(`${field} IS DISTINCT FROM ${v()}`);
            break;
          case '$gt':
            out.push(ordered('>'));
            break;
          case '$gte':
            out.push(ordered('>='));
            break;
          case '$lt':
            out.push(ordered('<'));
            break;
          case '$lte':
            out.push(ordered('<='));
            break;
          case '$in':
            out.push(`EXISTS (SELECT 1 FROM jsonb_array_elements(${v()}) e WHERE e = ${field})`);
            break;
          case '$nin':
            out.push(`NOT EXISTS (SELECT 1 FROM jsonb_array_elements(${v()}) e WHERE e = ${field})`);
            break;
          case '$exists':
            out.push(arg ? `value ? ${p(key)}` : `NOT (value ? ${p(key)})`);
            break;
          default:
            out.push('false');
        }
      }
    }
    return out;
  }

  const items: ItemStore = {
    semantic,
    get store() {
      return store;
    },
    async put(namespace, key, value, opts = {}) {
      await pgStore.put(
        encodeNamespace(namespace),
        key,
        sealing ? { [SEALED_ITEM_KEY]: codec.write(value) } : value,
        semantic ? opts.index : false,
        opts.ttl ? { ttl: opts.ttl } : undefined,
      );
    },
    async get(namespace, key, opts = {}) {
      const { rows } = await pool.query({
        name: `ap_item_get_${schema}`,
        text: `SELECT namespace_path, key, value, created_at, updated_at FROM ${table}
          WHERE namespace_path = $1 AND key = $2 AND ${live}`,
        values: [nsPath(namespace), key],
      });
      if (!rows[0]) return null;
      if (opts.refresh_ttl ?? config.ttl.refreshOnRead) await refresh(rows);
      return toItem(rows[0]);
    },
    async delete(namespace, key) {
      await pgStore.delete(encodeNamespace(namespace), key);
    },
    async search(q: ItemSearch) {
      if (q.query && semantic && q.namespace_prefix.length) {
        const found = await pgStore.search(encodeNamespace(q.namespace_prefix), {
          query: q.query,
          filter: q.filter as never,
          limit: q.limit,
          offset: q.offset,
        });
        return found.map((i) => ({
          namespace: i.namespace.map(decodeLabel),
          key: i.key,
          value: i.value,
          created_at: ts(i.createdAt),
          updated_at: ts(i.updatedAt),
          score: i.score ?? null,
        }));
      }
      const params: unknown[] = [];
      // Sealed values can only be compared once opened: the filter then runs here, over the prefix's items.
      const inJs = sealing && !!q.filter && Object.keys(q.filter).length > 0;
      const where = [live, ...(inJs ? [] : filterSql(q.filter, params))];
      if (q.namespace_prefix.length) {
        params.push(nsPath(q.namespace_prefix));
        const n = `$${params.length}`;
        where.push(`(namespace_path = ${n} OR left(namespace_path, length(${n}) + 1) = ${n} || ':')`);
      }
      const order = `ORDER BY updated_at DESC, namespace_path, key`;
      const select = `SELECT namespace_path, key, value, created_at, updated_at FROM ${table}
        WHERE ${where.join(' AND ')} ${order}`;
      let rows: Record<string, unknown>[];
      if (inJs) {
        const all = (await pool.query(select, params)).rows as Record<string, unknown>[];
        rows = all
          .filter((r) => matchesFilter(openItemValue(codec, r.value), q.filter))
          .slice(q.offset, q.offset + q.limit);
      } else {
        params.push(q.limit, q.offset);
        rows = (await pool.query(`${select} LIMIT $${params.length - 1} OFFSET $${params.length}`, params)).rows;
      }
      if (q.refresh_ttl ?? config.ttl.refreshOnRead)
        await refresh(rows as Array<{ namespace_path: unknown; key: unknown }>);
      return rows.map((r) => toItem(r));
    },
    async listNamespaces(q: NamespaceQuery) {
      const { rows } = await pool.query(`SELECT DISTINCT namespace_path FROM ${table} WHERE ${live}`);
      return listNamespaces(
        rows.map((r) => decodePath(r.namespace_path as string)),
        {
          matchConditions: [
            ...(q.prefix?.length ? [{ matchType: 'prefix' as const, path: q.prefix }] : []),
            ...(q.suffix?.length ? [{ matchType: 'suffix' as const, path: q.suffix }] : []),
          ],
          maxDepth: q.max_depth,
          limit: q.limit,
          offset: q.offset,
        },
      );
    },
    sweep: () => pgStore.sweepExpiredItems(),
  };
  const store = new ItemsBaseStore(items);
  return items;
}
