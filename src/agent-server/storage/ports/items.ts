// The long-term memory store's port (LangGraph's BaseStore in the platform's shape) and the configuration a store of
// items is opened with.
import type { BaseStore } from '@langchain/langgraph-checkpoint';
import type { Json } from './common.ts';

/** What a store needs to know, in a form that crosses to executor threads (the embed function is a path). */
export interface ItemsConfig {
  /** langgraph.json's folder: `index.embed` is relative to it. */
  projectDir?: string;
  index?: { embed: string; dims: number; fields: string[] };
  ttl: { defaultMinutes: number | null; refreshOnRead: boolean; sweepMinutes: number | null };
}

/** An item of the long-term memory store, in the platform's shape. */
export interface StoreItem {
  namespace: string[];
  key: string;
  value: Json;
  created_at: string;
  updated_at: string;
  /** Similarity to the search query (semantic search only). */
  score?: number | null;
}

export interface ItemSearch {
  namespace_prefix: string[];
  filter?: Json;
  limit: number;
  offset: number;
  query?: string;
  refresh_ttl?: boolean;
}

export interface NamespaceQuery {
  prefix?: string[];
  suffix?: string[];
  max_depth?: number;
  limit: number;
  offset: number;
}

/**
 * LangGraph's long-term memory store. Namespaces are validated by the caller (routes) or by `store` (graphs);
 * expired items are never returned; TTLs are in minutes.
 */
export interface ItemStore {
  /** Inserts or replaces; ttl null or undefined: the configured default TTL (none without one). */
  put(
    namespace: string[],
    key: string,
    value: Json,
    opts?: { index?: false | string[]; ttl?: number | null },
  ): Promise<void>;
  /** refresh_ttl (default: the configured refresh_on_read) restarts the item's TTL. */
  get(namespace: string[], key: string, opts?: { refresh_ttl?: boolean }): Promise<StoreItem | null>;
  delete(namespace: string[], key: string): Promise<void>;
  /** Items under the prefix (label-wise), newest first; by similarity when `query` is given and an index exists. */
  search(q: ItemSearch): Promise<StoreItem[]>;
  listNamespaces(q: NamespaceQuery): Promise<string[][]>;
  /** Deletes expired items; returns how many. */
  sweep(): Promise<number>;
  /** The same items as a LangGraph BaseStore, attached to every run (config.store / getStore()). */
  readonly store: BaseStore;
  /** Whether `query` searches by meaning (an embeddings index is configured and usable). */
  readonly semantic: boolean;
}
