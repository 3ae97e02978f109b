// Connections of their own to a store another thread opened (CheckpointerSource): executor threads use them
// for checkpoints and the memory store, so runs/ never reaches into an adapter. Only the source's adapter loads: a
// thread of an embedded server has no use for pg and ioredis, nor one of a Postgres server for SQLite.
import type { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';
import { DataKeyring } from './data-cipher.ts';
import { DEFAULT_ITEMS_CONFIG, loadEmbedder } from './items.ts';
import type { CheckpointerSource, ItemStore } from './types.ts';

export interface StoreConnections {
  checkpointer: BaseCheckpointSaver;
  items: ItemStore;
  close(): Promise<void>;
}

/**
 * Loads the modules of `source`'s adapter. An executor thread calls it before it registers tsx, whose hooks every
 * module loaded afterwards passes through; openStoreConnections then finds them loaded.
 */
export function loadStoreAdapter(source: CheckpointerSource): Promise<unknown> {
  return source.kind === 'embedded' ? import('./embedded/index.ts') : import('./postgres/index.ts');
}

export async function openStoreConnections(source: CheckpointerSource, poolSize: number): Promise<StoreConnections> {
  const config = source.items ?? DEFAULT_ITEMS_CONFIG;
  const embedder = await loadEmbedder(config);
  const keyring = source.dataKeys ? DataKeyring.fromMaterial(source.dataKeys) : undefined;
  if (source.kind === 'embedded') {
    const { openEmbeddedCheckpointer, openEmbeddedItems } = await import('./embedded/index.ts');
    const cp = openEmbeddedCheckpointer(source.file, source.writeLock, keyring);
    const items = openEmbeddedItems(source.file, config, embedder, source.writeLock, keyring);
    return {
      checkpointer: cp.saver,
      items: items.items,
      close: async () => {
        cp.close();
        items.close();
      },
    };
  }
  const { openPostgresCheckpointer, openPostgresItems } = await import('./postgres/index.ts');
  const cp = openPostgresCheckpointer(source.databaseUrl, source.schema, poolSize, keyring);
  const items = openPostgresItems(source.databaseUrl, source.schema, config, embedder, !!source.semantic, keyring);
  return {
    checkpointer: cp.saver,
    items: items.items,
    close: async () => {
      await cp.close();
      await items.close();
    },
  };
}
