import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openEmbeddedPlatformState } from '../../../src/state/embedded/index.ts';
import { makeDeployment } from '../../control-plane/helpers/fixtures.ts';
import { storeContract } from '../../control-plane/helpers/store-contract.ts';

storeContract('embedded (SQLite)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ap-cp-store-'));
  const store = openEmbeddedPlatformState({ dataDir: dir, historyLimit: 50 });
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

describe('embedded store shared by two processes (two handles on one file)', () => {
  it('a watcher sees writes made through the other handle, in order', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-cp-store2-'));
    const a = openEmbeddedPlatformState({ dataDir: dir, pollMs: 20 });
    const b = openEmbeddedPlatformState({ dataDir: dir, pollMs: 20 });
    try {
      const seen: string[] = [];
      const start = await a.list('AgentDeployment');
      const stop = await a.watch(
        'AgentDeployment',
        undefined,
        start.resourceVersion,
        (t, o) => seen.push(`${t} ${o.metadata.name} ${o.metadata.resourceVersion}`),
        () => {},
      );
      const d1 = await b.create('AgentDeployment', makeDeployment('default'));
      const d2 = await a.create('AgentDeployment', makeDeployment('default'));
      await b.delete('AgentDeployment', 'default', d1.metadata.name);
      for (let i = 0; i < 200 && seen.length < 3; i++) await new Promise((r) => setTimeout(r, 10));
      stop();
      expect(seen.map((s) => s.split(' ').slice(0, 2).join(' '))).toEqual([
        `ADDED ${d1.metadata.name}`,
        `ADDED ${d2.metadata.name}`,
        `DELETED ${d1.metadata.name}`,
      ]);
      const rvs = seen.map((s) => Number(s.split(' ')[2]));
      expect([...rvs].sort((x, y) => x - y)).toEqual(rvs);
    } finally {
      await a.close();
      await b.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
