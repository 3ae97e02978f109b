import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openEmbeddedStore } from '../../src/control-plane/store/embedded/index.ts';
import { storeContract } from './helpers/store-contract.ts';

storeContract('embedded (SQLite)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ap-cp-store-'));
  const store = openEmbeddedStore({ dataDir: dir, historyLimit: 50 });
  return {
    store,
    namespace: 'default',
    otherNamespace: 'other',
    close: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
