// Connections of their own to a store another thread opened (CheckpointerSource): executor threads use them
// for checkpoints and the memory store, so runs/ never reaches into an adapter.
import type { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';
import { DataKeyring } from './data-cipher.ts';
import { openEmbeddedCheckpointer, openEmbeddedItems } from './embedded/index.ts';
import { DEFAULT_ITEMS_CONFIG, loadEmbedder } from './items.ts';
import { openPostgresCheckpointer, openPostgresItems } from './postgres/index.ts';
import type { CheckpointerSource, ItemStore } from './types.ts';

export interface StoreConnections {
  checkpointer: BaseCheckpointSaver;
  items: ItemStore;
  close(): Promise<void>;
}

export async function openStoreConnections(source: CheckpointerSource, poolSize: number): Promise<StoreConnections> {
  const config = source.items ?? DEFAULT_ITEMS_CONFIG;
  const embedder = await loadEmbedder(config);
  const keyring = source.dataKeys ? DataKeyring.fromMaterial(source.dataKeys) : undefined;
  if (source.kind === 'embedded') {
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
