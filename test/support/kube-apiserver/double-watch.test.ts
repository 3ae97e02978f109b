// Watches on the API-server double as a real server serves them: BOOKMARK events only for clients that allow
// them (with one just before the server ends the watch), 410 Expired as an ERROR event for a resourceVersion older
// than the kept history, and every watch ended normally at timeoutSeconds or at the server's own timeout.
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type TestCluster } from '../kubernetes/cluster.ts';
import { rawApi } from '../kubernetes/raw-api.ts';

type Event = { type: string; object: Record<string, any> };
const NS = 'agents';
let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startCluster(NS, { historyLimit: 5, bookmarkMs: 20, watchTimeoutMs: 400 });
});
afterAll(async () => {
  await cluster?.close();
});

/** Reads a watch to its end: the status code, every event, and whether the stream ended cleanly. */
function watchToEnd(query: string): Promise<{ status: number; events: Event[]; clean: boolean }> {
  const url = new URL(`${cluster.api.url}/api/v1/namespaces/${NS}/configmaps?watch=true&${query}`);
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { authorization: `Bearer ${cluster.api.token}` } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          events: text
            .split('\n')
            .filter(Boolean)
            .map((l) => JSON.parse(l) as Event),
          clean: res.complete,
        }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('watch', () => {
  it('sends BOOKMARKs at the current resourceVersion only when allowed, the last one before its timeout', async () => {
    const api = rawApi(cluster.api);
    const made = await api('POST', `/api/v1/namespaces/${NS}/configmaps`, { metadata: { name: 'b1' } });
    const rv = made.body.metadata.resourceVersion as string;
    const allowed = await watchToEnd(`resourceVersion=${rv}&allowWatchBookmarks=true`);
    expect(allowed.status).toBe(200);
    expect(allowed.clean).toBe(true);
    expect(allowed.events.length).toBeGreaterThan(0);
    for (const e of allowed.events) {
      expect(e.type).toBe('BOOKMARK');
      expect(e.object).toEqual({ kind: 'ConfigMap', apiVersion: 'v1', metadata: { resourceVersion: rv } });
    }
    const plain = await watchToEnd(`resourceVersion=${rv}`);
    expect(plain.events).toEqual([]);
  });

  it('answers a resourceVersion older than the history with an ERROR event carrying 410 Expired', async () => {
    const api = rawApi(cluster.api);
    const first = await api('POST', `/api/v1/namespaces/${NS}/configmaps`, { metadata: { name: 'old-0' } });
    for (let i = 1; i <= 6; i++)
      await api('POST', `/api/v1/namespaces/${NS}/configmaps`, { metadata: { name: `old-${i}` } });
    const w = await watchToEnd(`resourceVersion=${first.body.metadata.resourceVersion}`);
    expect(w.status).toBe(200);
    expect(w.events).toHaveLength(1);
    expect(w.events[0]!.type).toBe('ERROR');
    expect(w.events[0]!.object).toMatchObject({ kind: 'Status', status: 'Failure', reason: 'Expired', code: 410 });
    expect(w.events[0]!.object.message).toMatch(/^too old resource version: \d+ \(\d+\)$/);
  });

  it('ends a watch normally at timeoutSeconds and at the server timeout, after the events it had', async () => {
    const api = rawApi(cluster.api);
    const made = await api('POST', `/api/v1/namespaces/${NS}/configmaps`, { metadata: { name: 't1' } });
    const rv = Number(made.body.metadata.resourceVersion);
    await api('POST', `/api/v1/namespaces/${NS}/configmaps`, { metadata: { name: 't2' } });
    const byServer = await watchToEnd(`resourceVersion=${rv}`);
    expect(byServer.clean).toBe(true);
    expect(byServer.events.map((e) => [e.type, e.object.metadata.name])).toEqual([['ADDED', 't2']]);
    const byClient = await watchToEnd(`resourceVersion=${rv}&timeoutSeconds=1`);
    expect(byClient.clean).toBe(true);
    expect(byClient.events.map((e) => e.object.metadata.name)).toEqual(['t2']);
  });
});
