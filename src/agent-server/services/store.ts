// The long-term memory store's items (/store/*): the same items graphs reach through config.store / getStore().
import type { ItemSearch, Json, NamespaceQuery, Storage, StoreItem } from '../storage/types.ts';

export type ItemService = ReturnType<typeof createItemService>;

export function createItemService({ storage }: { storage: Storage }) {
  return {
    put: (namespace: string[], key: string, value: Json, opts?: { index?: false | string[]; ttl?: number | null }) =>
      storage.items.put(namespace, key, value, opts),
    get: (namespace: string[], key: string, opts?: { refresh_ttl?: boolean }): Promise<StoreItem | null> =>
      storage.items.get(namespace, key, opts),
    delete: (namespace: string[], key: string): Promise<void> => storage.items.delete(namespace, key),
    search: (q: ItemSearch): Promise<StoreItem[]> => storage.items.search(q),
    listNamespaces: (q: NamespaceQuery): Promise<string[][]> => storage.items.listNamespaces(q),
  };
}
