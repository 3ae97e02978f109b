// The store contract: the same behaviour from every adapter. Each adapter's test file calls this with a factory.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NotFoundError, ValidationError } from '../../../src/lib/errors.ts';
import { AlreadyExistsError, ResourceExpiredError, StaleResourceVersionError } from '../../../src/state/errors.ts';
import type { PlatformState } from '../../../src/state/types.ts';
import type { WatchEventType } from '../../../src/state/resources.ts';
import { FINALIZER_RUNTIME, makeRevision, type AgentDeployment } from '../../../src/resources/index.ts';
import { makeDeployment } from './fixtures.ts';

export type StoreHarness = {
  store: PlatformState;
  namespace: string;
  otherNamespace: string;
  close(): Promise<void>;
};

type Event = { type: WatchEventType; name: string; rv: string; generation?: number; phase?: string };

async function until<T>(check: () => T | undefined, what: string, timeoutMs = 5_000): Promise<T> {
  const start = Date.now();
  for (;;) {
    const v = check();
    if (v !== undefined) return v;
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export function storeContract(name: string, open: () => Promise<StoreHarness>): void {
  describe(`store contract: ${name}`, () => {
    let h: StoreHarness;
    let store: PlatformState;
    let ns: string;
    beforeAll(async () => {
      h = await open();
      store = h.store;
      ns = h.namespace;
    });
    afterAll(async () => {
      await h?.close();
    });

    it('create fills metadata, ignores status, and refuses a taken name', async () => {
      const input = makeDeployment(ns);
      const created = await store.create('AgentDeployment', { ...input, status: { phase: 'READY' } });
      expect(created.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
      expect(created.metadata.generation).toBe(1);
      expect(created.metadata.resourceVersion).toBeTruthy();
      expect(created.metadata.creationTimestamp).toBeTruthy();
      expect(created.status?.phase).toBeUndefined();
      const got = await store.get('AgentDeployment', ns, input.metadata.name);
      expect(got.spec).toEqual(created.spec);
      await expect(store.create('AgentDeployment', input)).rejects.toBeInstanceOf(AlreadyExistsError);
      await expect(store.get('AgentDeployment', ns, 'ag-missing')).rejects.toBeInstanceOf(NotFoundError);
    });

    it('rejects objects that do not match the schema, writing nothing', async () => {
      const bad = makeDeployment(ns);
      (bad.spec as { source: string }).source = 'svn';
      await expect(store.create('AgentDeployment', bad)).rejects.toBeInstanceOf(ValidationError);
      await expect(store.get('AgentDeployment', ns, bad.metadata.name)).rejects.toBeInstanceOf(NotFoundError);
    });

    it('update bumps generation on spec changes only and is optimistic on resourceVersion', async () => {
      const dep = await store.create('AgentDeployment', makeDeployment(ns));
      const relabeled = await store.update('AgentDeployment', {
        ...dep,
        metadata: { ...dep.metadata, labels: { ...dep.metadata.labels, extra: 'yes' } },
      });
      expect(relabeled.metadata.generation).toBe(1);
      expect(relabeled.metadata.labels?.extra).toBe('yes');
      expect(Number(relabeled.metadata.resourceVersion)).toBeGreaterThan(Number(dep.metadata.resourceVersion));
      const changed = await store.update('AgentDeployment', {
        ...relabeled,
        spec: { ...relabeled.spec, displayName: 'renamed' },
        status: { phase: 'READY' },
      });
      expect(changed.metadata.generation).toBe(2);
      expect(changed.status?.phase).toBeUndefined();
      // `dep` is stale now.
      await expect(
        store.update('AgentDeployment', { ...dep, spec: { ...dep.spec, displayName: 'lost update' } }),
      ).rejects.toBeInstanceOf(StaleResourceVersionError);
      expect((await store.get('AgentDeployment', ns, dep.metadata.name)).spec.displayName).toBe('renamed');
    });

    it('updateStatus writes status only, also optimistic', async () => {
      const dep = await store.create('AgentDeployment', makeDeployment(ns));
      const withStatus = await store.updateStatus('AgentDeployment', {
        ...dep,
        spec: { ...dep.spec, displayName: 'ignored' },
        status: { phase: 'READY', url: 'http://127.0.0.1:1', observedGeneration: 1 },
      });
      expect(withStatus.status).toMatchObject({ phase: 'READY', url: 'http://127.0.0.1:1' });
      expect(withStatus.spec.displayName).toBe(dep.spec.displayName);
      expect(withStatus.metadata.generation).toBe(1);
      await expect(
        store.updateStatus('AgentDeployment', { ...dep, status: { phase: 'UNUSED' } }),
      ).rejects.toBeInstanceOf(StaleResourceVersionError);
    });

    it('revision spec is immutable, its status is not', async () => {
      const dep = await store.create('AgentDeployment', makeDeployment(ns));
      const rev = await store.create('AgentRevision', makeRevision(dep));
      expect(rev.metadata.name).toBe(`${dep.metadata.name}-r1`);
      await expect(
        store.update('AgentRevision', { ...rev, spec: { ...rev.spec, sourceRevisionConfig: { repoRef: 'other' } } }),
      ).rejects.toBeInstanceOf(ValidationError);
      const st = await store.updateStatus('AgentRevision', {
        ...rev,
        status: { phase: 'BUILDING', statusMessage: 'go' },
      });
      expect(st.status?.phase).toBe('BUILDING');
      await expect(store.create('AgentRevision', makeRevision(dep))).rejects.toBeInstanceOf(AlreadyExistsError);
    });

    it('lists by namespace and label selector', async () => {
      const a = await store.create('AgentDeployment', makeDeployment(ns, 'tenant-list-a'));
      const b = await store.create('AgentDeployment', makeDeployment(ns, 'tenant-list-b'));
      const c = await store.create('AgentDeployment', makeDeployment(h.otherNamespace, 'tenant-list-a'));
      const onlyA = await store.list('AgentDeployment', ns, { labelSelector: 'agentplane.dev/tenant=tenant-list-a' });
      expect(onlyA.items.map((d) => d.metadata.name)).toEqual([a.metadata.name]);
      expect(Number(onlyA.resourceVersion)).toBeGreaterThanOrEqual(Number(c.metadata.resourceVersion));
      const allA = await store.list('AgentDeployment', undefined, {
        labelSelector: 'agentplane.dev/tenant=tenant-list-a',
      });
      expect(allA.items.map((d) => d.metadata.name).sort()).toEqual([a.metadata.name, c.metadata.name].sort());
      const notA = await store.list('AgentDeployment', ns, { labelSelector: 'agentplane.dev/tenant!=tenant-list-a' });
      expect(notA.items.map((d) => d.metadata.name)).toContain(b.metadata.name);
      expect(notA.items.map((d) => d.metadata.name)).not.toContain(a.metadata.name);
    });

    it('delete removes at once without finalizers and garbage-collects revisions and secrets', async () => {
      const dep = await store.create('AgentDeployment', makeDeployment(ns));
      const rev = await store.create('AgentRevision', makeRevision(dep));
      await store.putSecrets(
        ns,
        `${dep.metadata.name}-env-r1`,
        { kind: 'AgentDeployment', name: dep.metadata.name, uid: dep.metadata.uid! },
        { TOKEN: 's3cret' },
      );
      await store.appendLogs(ns, rev.metadata.name, 'build', ['line']);
      await store.delete('AgentDeployment', ns, dep.metadata.name);
      await expect(store.get('AgentDeployment', ns, dep.metadata.name)).rejects.toBeInstanceOf(NotFoundError);
      await expectEventually(() => store.get('AgentRevision', ns, rev.metadata.name), NotFoundError);
      await expectEventually(() => store.getSecrets(ns, `${dep.metadata.name}-env-r1`), NotFoundError);
      await expect(store.delete('AgentDeployment', ns, dep.metadata.name)).rejects.toBeInstanceOf(NotFoundError);
    });

    it('delete with a finalizer marks the object; removing the finalizer removes it', async () => {
      const input = makeDeployment(ns);
      input.metadata.finalizers = [FINALIZER_RUNTIME];
      const dep = await store.create('AgentDeployment', input);
      await store.delete('AgentDeployment', ns, dep.metadata.name);
      const marked = await store.get('AgentDeployment', ns, dep.metadata.name);
      expect(marked.metadata.deletionTimestamp).toBeTruthy();
      await store.delete('AgentDeployment', ns, dep.metadata.name); // idempotent while marked
      await store.update('AgentDeployment', { ...marked, metadata: { ...marked.metadata, finalizers: [] } });
      await expect(store.get('AgentDeployment', ns, dep.metadata.name)).rejects.toBeInstanceOf(NotFoundError);
    });

    it('watch replays from a resourceVersion and streams changes in order', async () => {
      const start = await store.list('AgentDeployment', ns);
      const events: Event[] = [];
      let failure: unknown;
      const stop = await store.watch(
        'AgentDeployment',
        ns,
        start.resourceVersion,
        (type, obj: AgentDeployment) =>
          events.push({
            type,
            name: obj.metadata.name,
            rv: obj.metadata.resourceVersion!,
            generation: obj.metadata.generation,
            phase: obj.status?.phase,
          }),
        (err) => (failure = err),
      );
      const dep = await store.create('AgentDeployment', makeDeployment(ns));
      const other = await store.create('AgentDeployment', makeDeployment(h.otherNamespace));
      const upd = await store.update('AgentDeployment', { ...dep, spec: { ...dep.spec, displayName: 'w2' } });
      await store.updateStatus('AgentDeployment', { ...upd, status: { phase: 'READY' } });
      await store.delete('AgentDeployment', ns, dep.metadata.name);
      await until(() => (events.length >= 4 ? true : undefined), 'four events');
      stop();
      expect(failure).toBeUndefined();
      const mine = events.filter((e) => e.name === dep.metadata.name);
      expect(mine.map((e) => e.type)).toEqual(['ADDED', 'MODIFIED', 'MODIFIED', 'DELETED']);
      expect(mine[1]!.generation).toBe(2);
      expect(mine[2]!.phase).toBe('READY');
      expect(events.some((e) => e.name === other.metadata.name)).toBe(false);
      const rvs = mine.map((e) => Number(e.rv));
      expect([...rvs].sort((x, y) => x - y)).toEqual(rvs);

      // Resuming from the first event's version replays what came after it.
      const replay: Event[] = [];
      const stop2 = await store.watch(
        'AgentDeployment',
        ns,
        mine[0]!.rv,
        (type, obj) => replay.push({ type, name: obj.metadata.name, rv: obj.metadata.resourceVersion! }),
        () => {},
      );
      await until(() => (replay.filter((e) => e.name === dep.metadata.name).length >= 3 ? true : undefined), 'replay');
      stop2();
      expect(replay.filter((e) => e.name === dep.metadata.name).map((e) => e.type)).toEqual([
        'MODIFIED',
        'MODIFIED',
        'DELETED',
      ]);
    });

    it('watch from "0" starts with the current objects', async () => {
      const dep = await store.create('AgentDeployment', makeDeployment(h.otherNamespace, 'tenant-w0'));
      const seen: string[] = [];
      const stop = await store.watch(
        'AgentDeployment',
        h.otherNamespace,
        '0',
        (type, obj) => seen.push(`${type} ${obj.metadata.name}`),
        () => {},
      );
      await until(() => (seen.includes(`ADDED ${dep.metadata.name}`) ? true : undefined), 'synthetic ADDED');
      stop();
    });

    it('secrets: values for runtimes, names for the API, refusing to overwrite a set', async () => {
      const dep = await store.create('AgentDeployment', makeDeployment(ns));
      const owner = { kind: 'AgentDeployment' as const, name: dep.metadata.name, uid: dep.metadata.uid! };
      await store.putSecrets(ns, `${dep.metadata.name}-env-r1`, owner, { A: '1', B: 'two' });
      expect(await store.getSecrets(ns, `${dep.metadata.name}-env-r1`)).toEqual({ A: '1', B: 'two' });
      expect((await store.secretNames(ns, `${dep.metadata.name}-env-r1`)).sort()).toEqual(['A', 'B']);
      await expect(store.putSecrets(ns, `${dep.metadata.name}-env-r1`, owner, { A: 'x' })).rejects.toBeInstanceOf(
        AlreadyExistsError,
      );
      await store.deleteSecrets(ns, `${dep.metadata.name}-env-r1`);
      await expect(store.getSecrets(ns, `${dep.metadata.name}-env-r1`)).rejects.toBeInstanceOf(NotFoundError);
    });

    it('api keys are found by hash', async () => {
      const rec = { id: 'k1', name: 'ci', tenants: ['t1', 't2'], createdAt: new Date().toISOString() };
      await store.putApiKey(rec, 'a'.repeat(64));
      expect(await store.findApiKey('a'.repeat(64))).toEqual(rec);
      expect(await store.findApiKey('b'.repeat(64))).toBeUndefined();
    });

    it('revision logs page by cursor in both orders', async () => {
      const dep = await store.create('AgentDeployment', makeDeployment(ns));
      const rev = await store.create('AgentRevision', makeRevision(dep));
      await store.appendLogs(ns, rev.metadata.name, 'build', ['b1', 'b2', 'b3']);
      await store.appendLogs(ns, rev.metadata.name, 'deploy', ['d1']);
      const p1 = await store.readLogs(ns, rev.metadata.name, { type: 'build', limit: 2, order: 'asc' });
      expect(p1.logs.map((l) => l.message)).toEqual(['b1', 'b2']);
      expect(p1.next_offset).toBeTruthy();
      const p2 = await store.readLogs(ns, rev.metadata.name, {
        type: 'build',
        limit: 2,
        order: 'asc',
        offset: p1.next_offset!,
      });
      expect(p2.logs.map((l) => l.message)).toEqual(['b3']);
      expect(p2.next_offset).toBeNull();
      const desc = await store.readLogs(ns, rev.metadata.name, { type: 'build', limit: 10, order: 'desc' });
      expect(desc.logs.map((l) => l.message)).toEqual(['b3', 'b2', 'b1']);
      const deploy = await store.readLogs(ns, rev.metadata.name, { type: 'deploy', limit: 10, order: 'asc' });
      expect(deploy.logs.map((l) => [l.type, l.message])).toEqual([['deploy', 'd1']]);
    });

    it('name claims: one holder per (tenant, name); idempotent for the holder; released only by it', async () => {
      const a = await store.create('AgentDeployment', makeDeployment(ns));
      const b = await store.create('AgentDeployment', makeDeployment(ns));
      const ownerA = { name: a.metadata.name, uid: a.metadata.uid! };
      const ownerB = { name: b.metadata.name, uid: b.metadata.uid! };
      await store.claimName(ns, 'tenant-a', 'claimed', ownerA);
      await store.claimName(ns, 'tenant-a', 'claimed', ownerA); // the holder again: fine
      await expect(store.claimName(ns, 'tenant-a', 'claimed', ownerB)).rejects.toBeInstanceOf(AlreadyExistsError);
      await store.claimName(ns, 'tenant-b', 'claimed', ownerB); // another tenant: another claim
      await store.releaseName(ns, 'tenant-a', 'claimed', ownerB); // not B's: nothing happens
      await expect(store.claimName(ns, 'tenant-a', 'claimed', ownerB)).rejects.toBeInstanceOf(AlreadyExistsError);
      await store.releaseName(ns, 'tenant-a', 'claimed', ownerA);
      await store.claimName(ns, 'tenant-a', 'claimed', ownerB);
      const mine = (await store.listNameClaims(ns)).filter((c) => c.name === 'claimed');
      expect(mine.sort((x, y) => (x.tenant < y.tenant ? -1 : 1))).toEqual([
        { tenant: 'tenant-a', name: 'claimed', owner: ownerB },
        { tenant: 'tenant-b', name: 'claimed', owner: ownerB },
      ]);
      // Removing the holder removes its claims (owner garbage collection).
      await store.delete('AgentDeployment', ns, b.metadata.name);
      await store.delete('AgentDeployment', ns, a.metadata.name);
      // A cluster's garbage collector removes them after the holder, not with it.
      const left = async () => (await store.listNameClaims(ns)).filter((c) => c.name === 'claimed');
      for (let i = 0; i < 100 && (await left()).length; i++) await new Promise((r) => setTimeout(r, 50));
      expect(await left()).toEqual([]);
    });

    it('host claims: one holder per host across tenants, case-insensitive; stale ones taken over; gone with the holder', async () => {
      const a = await store.create('AgentDeployment', makeDeployment(ns, 'tenant-a'));
      const b = await store.create('AgentDeployment', makeDeployment(ns, 'tenant-b'));
      const ownerA = { name: a.metadata.name, uid: a.metadata.uid! };
      const ownerB = { name: b.metadata.name, uid: b.metadata.uid! };
      await store.claimHost(ns, 'bot.agents.example.com', ownerA);
      await store.claimHost(ns, 'BOT.agents.example.com', ownerA); // the holder again: fine
      await expect(store.claimHost(ns, 'Bot.Agents.Example.Com', ownerB)).rejects.toBeInstanceOf(AlreadyExistsError);
      await store.releaseHost(ns, 'bot.agents.example.com', ownerB); // not B's: nothing happens
      expect((await store.listHostClaims(ns)).filter((c) => c.host === 'bot.agents.example.com')).toEqual([
        { host: 'bot.agents.example.com', owner: ownerA },
      ]);
      await store.releaseHost(ns, 'bot.agents.example.com', ownerA);
      await store.claimHost(ns, 'bot.agents.example.com', ownerB);
      // A claim whose holder is gone is taken over.
      await store.claimHost(ns, 'stale.agents.example.com', {
        name: 'ag-00000000-0000-4000-8000-00000000beef',
        uid: '00000000-0000-4000-8000-00000000bee1',
      });
      await store.claimHost(ns, 'stale.agents.example.com', ownerA);
      // Removing the holder removes its claims (owner garbage collection).
      await store.delete('AgentDeployment', ns, b.metadata.name);
      await store.delete('AgentDeployment', ns, a.metadata.name);
      const left = async () => (await store.listHostClaims(ns)).filter((c) => c.host.endsWith('agents.example.com'));
      for (let i = 0; i < 100 && (await left()).length; i++) await new Promise((r) => setTimeout(r, 50));
      expect(await left()).toEqual([]);
    });

    it('name claims: a stale claim (holder gone or being deleted) is taken over; racing takers, one wins', async () => {
      // Holder gone but the claim still there (a real cluster garbage-collects later): taken over.
      await store.claimName(ns, 'tenant-a', 'stale', {
        name: 'ag-00000000-0000-4000-8000-000000000000',
        uid: '00000000-0000-4000-8000-000000000001',
      });
      const next = await store.create('AgentDeployment', makeDeployment(ns));
      await store.claimName(ns, 'tenant-a', 'stale', { name: next.metadata.name, uid: next.metadata.uid! });
      // Holder being deleted (a runtime finalizer keeps it): several deployments race to take over, exactly one wins.
      const input = makeDeployment(ns);
      input.metadata.finalizers = [FINALIZER_RUNTIME];
      const dying = await store.create('AgentDeployment', input);
      await store.claimName(ns, 'tenant-a', 'dying', { name: dying.metadata.name, uid: dying.metadata.uid! });
      await store.delete('AgentDeployment', ns, dying.metadata.name);
      const racers = await Promise.all([1, 2, 3, 4, 5].map(() => store.create('AgentDeployment', makeDeployment(ns))));
      const results = await Promise.allSettled(
        racers.map((r) => store.claimName(ns, 'tenant-a', 'dying', { name: r.metadata.name, uid: r.metadata.uid! })),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(AlreadyExistsError);
      const winner = racers[results.findIndex((r) => r.status === 'fulfilled')]!;
      // The old holder finally goes: the claim, now the winner's, stays.
      const marked = await store.get('AgentDeployment', ns, dying.metadata.name);
      await store.update('AgentDeployment', { ...marked, metadata: { ...marked.metadata, finalizers: [] } });
      const claims = (await store.listNameClaims(ns)).filter((c) => c.name === 'dying');
      expect(claims).toEqual([
        { tenant: 'tenant-a', name: 'dying', owner: { name: winner.metadata.name, uid: winner.metadata.uid } },
      ]);
    });

    it('a watch from a version older than the kept history fails with 410 (harness keeps 50 changes)', async () => {
      const first = await store.create('AgentDeployment', makeDeployment(ns));
      let cur = first;
      for (let i = 0; i < 160; i++) {
        cur = await store.updateStatus('AgentDeployment', { ...cur, status: { phase: i % 2 ? 'READY' : 'UNUSED' } });
      }
      let failure: unknown;
      const events: string[] = [];
      const stop = await store.watch(
        'AgentDeployment',
        ns,
        first.metadata.resourceVersion!,
        (t) => events.push(t),
        (err) => (failure = err),
      );
      await until(() => failure, '410');
      stop();
      expect(failure).toBeInstanceOf(ResourceExpiredError);
      expect(events).toEqual([]);
    });
  });
}

async function expectEventually(fn: () => Promise<unknown>, errorType: new (...a: never[]) => Error): Promise<void> {
  const start = Date.now();
  for (;;) {
    try {
      await fn();
    } catch (err) {
      if (err instanceof errorType) return;
      throw err;
    }
    if (Date.now() - start > 5_000) throw new Error(`expected ${errorType.name}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
