// Embedded store: one SQLite file (better-sqlite3, WAL). Every write is one transaction, so nothing is
// half-written. resourceVersion is a single global counter; each change is also appended to a bounded change log,
// which lets a watch resume from any recent resourceVersion (older ones answer 410, like the API server).
// Secret values are encrypted at rest (secret-box.ts); names stay readable so listing them needs no key.
import { EventEmitter } from 'node:events';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import { NotFoundError, ValidationError } from '../../../lib/errors.ts';
import { canonicalJson, validateResource } from '../validate.ts';
import { KEY_FILE, SecretKeyError, open as openSealed, readKeyFile, seal } from './secret-box.ts';
import {
  AlreadyExistsError,
  ResourceExpiredError,
  claimObjectName,
  type HostClaim,
  type NameClaim,
  type NameClaimOwner,
  StaleResourceVersionError,
  labelSelectorMatcher,
  type AnyResource,
  type ApiKeyRecord,
  type IntegrationRecord,
  type ListenerRecord,
  integrationDetails,
  type AuthObject,
  type AuthObjectKind,
  type ControlPlaneStore,
  type Kind,
  type KindMap,
  type ListOptions,
  type LogPage,
  type LogType,
  type WatchEventType,
} from '../types.ts';

export type EmbeddedStoreOptions = {
  /** Directory of the database file (created if missing). ':memory:' keeps everything in memory. */
  dataDir: string;
  namespace?: string;
  /** Changes kept for watch resumption. */
  historyLimit?: number;
  /** How often watchers look for changes written by other processes sharing the file. */
  pollMs?: number;
  /** AES-256 key of secret values (AGENTPLANE_SECRET_KEY); without it `<dataDir>/secret.key`, made on first use. */
  secretKey?: Buffer;
};

type Change = { rv: number; kind: Kind; namespace: string; type: WatchEventType; obj: AnyResource };

const SCHEMA = `
CREATE TABLE IF NOT EXISTS objects (
  kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL, uid TEXT NOT NULL UNIQUE,
  rv INTEGER NOT NULL, json TEXT NOT NULL, PRIMARY KEY (kind, namespace, name));
CREATE TABLE IF NOT EXISTS owners (owner_uid TEXT NOT NULL, kind TEXT NOT NULL, namespace TEXT NOT NULL,
  name TEXT NOT NULL, PRIMARY KEY (owner_uid, kind, namespace, name));
CREATE TABLE IF NOT EXISTS changes (rv INTEGER PRIMARY KEY, kind TEXT NOT NULL, namespace TEXT NOT NULL,
  type TEXT NOT NULL, json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO counters VALUES ('rv', 0), ('compacted', 0);
CREATE TABLE IF NOT EXISTS secrets (namespace TEXT NOT NULL, name TEXT NOT NULL, owner_uid TEXT NOT NULL,
  data TEXT NOT NULL, PRIMARY KEY (namespace, name));
CREATE TABLE IF NOT EXISTS api_keys (id TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, name TEXT NOT NULL,
  tenants TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS revision_logs (id INTEGER PRIMARY KEY AUTOINCREMENT, namespace TEXT NOT NULL,
  revision TEXT NOT NULL, type TEXT NOT NULL, ts TEXT NOT NULL, message TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS revision_logs_by_rev ON revision_logs (namespace, revision, type, id);
CREATE TABLE IF NOT EXISTS name_claims (namespace TEXT NOT NULL, claim TEXT NOT NULL, tenant TEXT NOT NULL,
  name TEXT NOT NULL, owner_name TEXT NOT NULL, owner_uid TEXT NOT NULL, PRIMARY KEY (namespace, claim));
CREATE INDEX IF NOT EXISTS name_claims_by_owner ON name_claims (owner_uid);
CREATE TABLE IF NOT EXISTS host_claims (namespace TEXT NOT NULL, host TEXT NOT NULL, owner_name TEXT NOT NULL,
  owner_uid TEXT NOT NULL, PRIMARY KEY (namespace, host));
CREATE INDEX IF NOT EXISTS host_claims_by_owner ON host_claims (owner_uid);
CREATE TABLE IF NOT EXISTS integrations (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, name TEXT NOT NULL,
  host TEXT NOT NULL, username TEXT, created_at TEXT NOT NULL, token TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS integrations_by_tenant ON integrations (tenant);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS listeners (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, compute_id TEXT NOT NULL,
  json TEXT NOT NULL, UNIQUE (tenant, compute_id));
CREATE TABLE IF NOT EXISTS auth_objects (kind TEXT NOT NULL, name TEXT NOT NULL, tenant TEXT NOT NULL,
  record TEXT NOT NULL, sealed TEXT NOT NULL, version INTEGER NOT NULL, PRIMARY KEY (kind, name));
CREATE INDEX IF NOT EXISTS auth_objects_by_tenant ON auth_objects (kind, tenant);
`;

/** A value sealed with the store's key when the key is first used: tells a wrong key at once. */
const KEY_CHECK = 'secret_key_check';
const KEY_CHECK_TEXT = 'agentplane secret key check';

/** The SQLite file of the embedded store kept in `dataDir`. */
export const embeddedStoreFile = (dataDir: string) => join(dataDir, 'control-plane.db');

export function openEmbeddedStore(opts: EmbeddedStoreOptions): ControlPlaneStore {
  let file = ':memory:';
  if (opts.dataDir !== ':memory:') {
    mkdirSync(opts.dataDir, { recursive: true });
    file = embeddedStoreFile(opts.dataDir);
  }
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('busy_timeout = 5000');
  // Freed pages are zeroed, so a value rewritten as ciphertext leaves no plaintext behind in the file.
  db.pragma('secure_delete = ON');
  db.exec(SCHEMA);
  // Secret rows written before encryption carry enc = 0 (plaintext JSON).
  const columns = db.prepare('PRAGMA table_info(secrets)').all() as { name: string }[];
  if (!columns.some((c) => c.name === 'enc')) db.exec('ALTER TABLE secrets ADD COLUMN enc INTEGER NOT NULL DEFAULT 0');
  // Listener keys (Listeners v2) name their listener; keys written before have none.
  const keyColumns = db.prepare('PRAGMA table_info(api_keys)').all() as { name: string }[];
  if (!keyColumns.some((c) => c.name === 'listener_id')) db.exec('ALTER TABLE api_keys ADD COLUMN listener_id TEXT');
  // Integrations written before GitHub App and SSH integrations have no details (plain HTTPS token).
  const integrationColumns = db.prepare('PRAGMA table_info(integrations)').all() as { name: string }[];
  if (!integrationColumns.some((c) => c.name === 'details')) {
    db.exec('ALTER TABLE integrations ADD COLUMN details TEXT');
    db.exec('ALTER TABLE integrations ADD COLUMN installation_id INTEGER');
  }
  // One GitHub App installation belongs to at most one workspace.
  db.exec(
    'CREATE UNIQUE INDEX IF NOT EXISTS integrations_by_installation ON integrations (installation_id) WHERE installation_id IS NOT NULL',
  );
  const keys =
    opts.dataDir === ':memory:'
      ? { given: opts.secretKey ?? randomBytes(32) }
      : { given: opts.secretKey, dir: opts.dataDir };
  const store = new EmbeddedStore(
    db,
    opts.namespace ?? 'default',
    opts.historyLimit ?? 10_000,
    opts.pollMs ?? 200,
    keys,
  );
  try {
    store.prepareSecrets();
  } catch (err) {
    db.close();
    throw err;
  }
  return store;
}

class EmbeddedStore implements ControlPlaneStore {
  private readonly events = new EventEmitter();
  /** Last resourceVersion handed to watchers. */
  private published: number;
  private poller: NodeJS.Timeout | undefined;

  private key: Buffer | undefined;

  constructor(
    private readonly db: Database.Database,
    readonly namespace: string,
    private readonly historyLimit: number,
    private readonly pollMs: number,
    private readonly keys: { given?: Buffer; dir?: string },
  ) {
    this.events.setMaxListeners(0);
    this.published = this.currentRv();
  }

  async close(): Promise<void> {
    clearInterval(this.poller);
    this.events.removeAllListeners();
    this.db.close();
  }

  // ---- resources ----

  async get<K extends Kind>(kind: K, namespace: string, name: string): Promise<KindMap[K]> {
    const row = this.db
      .prepare('SELECT json FROM objects WHERE kind = ? AND namespace = ? AND name = ?')
      .get(kind, namespace, name) as { json: string } | undefined;
    if (!row) throw notFound(kind, name);
    return JSON.parse(row.json) as KindMap[K];
  }

  async list<K extends Kind>(kind: K, namespace?: string, opts: ListOptions = {}) {
    return this.listSync(kind, namespace, opts);
  }

  private listSync<K extends Kind>(kind: K, namespace?: string, opts: ListOptions = {}) {
    const match = labelSelectorMatcher(opts.labelSelector);
    const read = this.db.transaction(() => {
      const rows = (
        namespace === undefined
          ? this.db.prepare('SELECT json FROM objects WHERE kind = ? ORDER BY namespace, name').all(kind)
          : this.db
              .prepare('SELECT json FROM objects WHERE kind = ? AND namespace = ? ORDER BY name')
              .all(kind, namespace)
      ) as { json: string }[];
      return { rows, rv: this.currentRv() };
    });
    const { rows, rv } = read();
    const items = rows.map((r) => JSON.parse(r.json) as KindMap[K]).filter((o) => match(o.metadata.labels));
    return { items, resourceVersion: String(rv) };
  }

  async create<K extends Kind>(kind: K, input: KindMap[K]): Promise<KindMap[K]> {
    const obj = validateResource(kind, { ...structuredClone(input), status: undefined });
    const namespace = obj.metadata.namespace ?? this.namespace;
    return this.write(() => {
      const exists = this.db
        .prepare('SELECT 1 FROM objects WHERE kind = ? AND namespace = ? AND name = ?')
        .get(kind, namespace, obj.metadata.name);
      if (exists) throw new AlreadyExistsError(`${kind} "${obj.metadata.name}" already exists`);
      const rv = this.nextRv();
      const { resourceVersion: _rv, deletionTimestamp: _dt, uid: _uid, generation: _g, ...meta } = obj.metadata;
      const stored = {
        ...obj,
        metadata: {
          ...meta,
          namespace,
          uid: randomUUID(),
          resourceVersion: String(rv),
          generation: 1,
          creationTimestamp: new Date().toISOString(),
        },
      } as KindMap[K];
      delete (stored as { status?: unknown }).status;
      this.db
        .prepare('INSERT INTO objects (kind, namespace, name, uid, rv, json) VALUES (?, ?, ?, ?, ?, ?)')
        .run(kind, namespace, stored.metadata.name, stored.metadata.uid, rv, JSON.stringify(stored));
      this.writeOwners(kind, stored);
      this.recordChange(rv, kind, 'ADDED', stored);
      return stored;
    });
  }

  async update<K extends Kind>(kind: K, input: KindMap[K]): Promise<KindMap[K]> {
    return this.write(() => {
      const current = this.current(kind, input);
      const obj = validateResource(kind, { ...structuredClone(input), status: current.status });
      if (kind === 'AgentRevision' && canonicalJson(obj.spec) !== canonicalJson(current.spec)) {
        throw new ValidationError('AgentRevision spec is immutable', [
          { loc: ['spec'], msg: 'spec is immutable', type: 'immutable' },
        ]);
      }
      const specChanged = canonicalJson(obj.spec) !== canonicalJson(current.spec);
      const m = obj.metadata;
      // A deleting object may lose finalizers but not gain new ones (as on the API server).
      const finalizers = current.metadata.deletionTimestamp
        ? (m.finalizers ?? []).filter((f) => current.metadata.finalizers?.includes(f))
        : m.finalizers;
      const next = {
        ...obj,
        metadata: {
          ...current.metadata,
          labels: m.labels,
          annotations: m.annotations,
          finalizers: finalizers?.length ? finalizers : undefined,
          ownerReferences: m.ownerReferences,
          generation: (current.metadata.generation ?? 1) + (specChanged ? 1 : 0),
        },
      } as KindMap[K];
      return this.replace(kind, current, next);
    });
  }

  async updateStatus<K extends Kind>(kind: K, input: KindMap[K]): Promise<KindMap[K]> {
    return this.write(() => {
      const current = this.current(kind, input);
      const next = validateResource(kind, { ...current, status: structuredClone(input.status) });
      return this.replace(kind, current, next);
    });
  }

  async delete(kind: Kind, namespace: string, name: string): Promise<void> {
    this.write(() => {
      const row = this.db
        .prepare('SELECT json FROM objects WHERE kind = ? AND namespace = ? AND name = ?')
        .get(kind, namespace, name) as { json: string } | undefined;
      if (!row) throw notFound(kind, name);
      this.deleteObject(kind, JSON.parse(row.json) as AnyResource);
    });
  }

  async watch<K extends Kind>(
    kind: K,
    namespace: string | undefined,
    resourceVersion: string,
    onEvent: (type: WatchEventType, obj: KindMap[K]) => void,
    onError: (err: unknown) => void,
  ): Promise<() => void> {
    let stopped = false;
    let seen = 0;
    const queue: Change[] = [];
    let draining = false;
    // Delivered asynchronously and in order, so handlers may write to the store without re-entering a write.
    const drain = () => {
      draining = false;
      while (!stopped && queue.length) {
        const c = queue.shift()!;
        onEvent(c.type, structuredClone(c.obj) as KindMap[K]);
      }
    };
    const schedule = () => {
      if (!draining) {
        draining = true;
        queueMicrotask(drain);
      }
    };
    const push = (c: Change) => {
      // `seen` drops what the replay already delivered when the change feed catches up with it.
      if (stopped || c.rv <= seen || c.kind !== kind || (namespace !== undefined && c.namespace !== namespace)) return;
      seen = c.rv;
      queue.push(c);
      schedule();
    };
    const listener = (c: Change | ResourceExpiredError) => {
      if (stopped) return;
      if (c instanceof ResourceExpiredError) {
        stopped = true;
        this.events.off('change', listener);
        queueMicrotask(() => onError(c));
        return;
      }
      push(c);
    };
    // better-sqlite3 is synchronous: replay and subscription happen in one tick, so no change falls between them.
    if (resourceVersion === '' || resourceVersion === '0') {
      const { items, resourceVersion: rv } = this.listSync(kind, namespace);
      for (const obj of items) {
        queue.push({ rv: Number(rv), kind, namespace: obj.metadata.namespace!, type: 'ADDED', obj });
      }
      seen = Number(rv);
      schedule();
    } else {
      const from = Number(resourceVersion);
      const compacted = this.counter('compacted');
      if (!Number.isInteger(from) || from < compacted) {
        queueMicrotask(() =>
          onError(new ResourceExpiredError(`too old resource version: ${resourceVersion} (${compacted})`)),
        );
        return () => {};
      }
      seen = from;
      for (const c of this.changesSince(from)) push(c);
    }
    this.events.on('change', listener);
    this.startPolling();
    return () => {
      stopped = true;
      this.events.off('change', listener);
    };
  }

  // ---- secrets ----

  async putSecrets(
    namespace: string,
    name: string,
    owner: { kind: Kind; name: string; uid: string },
    values: Record<string, string>,
  ): Promise<void> {
    const key = this.secretKey();
    const sealed = Object.fromEntries(
      Object.entries(values).map(([k, v]) => [k, seal(key, v, secretAad(namespace, name, k))]),
    );
    const res = this.db
      .prepare('INSERT OR IGNORE INTO secrets (namespace, name, owner_uid, data, enc) VALUES (?, ?, ?, ?, 1)')
      .run(namespace, name, owner.uid, JSON.stringify(sealed));
    if (res.changes === 0) throw new AlreadyExistsError(`secret "${name}" already exists`);
  }

  async getSecrets(namespace: string, name: string): Promise<Record<string, string>> {
    const row = this.db
      .prepare('SELECT data, enc FROM secrets WHERE namespace = ? AND name = ?')
      .get(namespace, name) as { data: string; enc: number } | undefined;
    if (!row) throw new NotFoundError(`secret "${name}" not found`);
    const data = JSON.parse(row.data) as Record<string, string>;
    if (!row.enc) return data;
    const key = this.secretKey();
    try {
      return Object.fromEntries(
        Object.entries(data).map(([k, v]) => [k, openSealed(key, v, secretAad(namespace, name, k))]),
      );
    } catch (err) {
      if (err instanceof SecretKeyError)
        throw new SecretKeyError(`cannot decrypt secret set "${name}": ${err.message}`);
      throw err;
    }
  }

  async secretNames(namespace: string, name: string): Promise<string[]> {
    const row = this.db.prepare('SELECT data FROM secrets WHERE namespace = ? AND name = ?').get(namespace, name) as
      { data: string } | undefined;
    if (!row) throw new NotFoundError(`secret "${name}" not found`);
    return Object.keys(JSON.parse(row.data) as Record<string, string>);
  }

  /**
   * On open: checks the key against the stored key check (a wrong or missing key fails here, with a message saying
   * which key is meant, instead of later) and encrypts rows written before encryption. Stores without secrets need
   * no key yet.
   */
  prepareSecrets(): void {
    const hasCheck = this.db.prepare('SELECT 1 FROM meta WHERE name = ?').get(KEY_CHECK) !== undefined;
    const plaintext = this.db.prepare('SELECT namespace, name, data FROM secrets WHERE enc = 0').all() as {
      namespace: string;
      name: string;
      data: string;
    }[];
    if (!hasCheck && !plaintext.length) return;
    const key = this.secretKey();
    if (!plaintext.length) return;
    this.write(() => {
      const upd = this.db.prepare('UPDATE secrets SET data = ?, enc = 1 WHERE namespace = ? AND name = ? AND enc = 0');
      for (const r of plaintext) {
        const values = JSON.parse(r.data) as Record<string, string>;
        const sealed = Object.fromEntries(
          Object.entries(values).map(([k, v]) => [k, seal(key, v, secretAad(r.namespace, r.name, k))]),
        );
        upd.run(JSON.stringify(sealed), r.namespace, r.name);
      }
    });
    // Move the rewritten pages into the main file and empty the WAL, which still holds the plaintext pages.
    this.db.pragma('wal_checkpoint(TRUNCATE)');
  }

  /** The key of secret values: given, or read (made on first use) from the key file; checked once per process. */
  private secretKey(): Buffer {
    if (this.key) return this.key;
    const check = this.db.prepare('SELECT value FROM meta WHERE name = ?').get(KEY_CHECK) as
      { value: string } | undefined;
    const file = this.keys.dir ? join(this.keys.dir, KEY_FILE) : undefined;
    const key = this.keys.given ?? (this.keys.dir ? readKeyFile(this.keys.dir, !check) : undefined);
    if (!key) {
      throw new SecretKeyError(
        `the secret values in this store are encrypted, but there is no key: set AGENTPLANE_SECRET_KEY (--secret-key) or restore ${file}`,
      );
    }
    if (check) {
      try {
        openSealed(key, check.value, KEY_CHECK);
      } catch {
        const which = this.keys.given ? 'AGENTPLANE_SECRET_KEY (--secret-key)' : file;
        throw new SecretKeyError(`${which} is not the key the secret values in this store were encrypted with`);
      }
    } else {
      this.db
        .prepare('INSERT OR IGNORE INTO meta (name, value) VALUES (?, ?)')
        .run(KEY_CHECK, seal(key, KEY_CHECK_TEXT, KEY_CHECK));
      // Another process may have written its check first: ours must match it.
      const stored = (this.db.prepare('SELECT value FROM meta WHERE name = ?').get(KEY_CHECK) as { value: string })
        .value;
      openSealed(key, stored, KEY_CHECK);
    }
    this.key = key;
    return key;
  }

  async deleteSecrets(namespace: string, name: string): Promise<void> {
    this.db.prepare('DELETE FROM secrets WHERE namespace = ? AND name = ?').run(namespace, name);
  }

  // ---- api keys ----

  async putApiKey(record: ApiKeyRecord, keyHash: string): Promise<void> {
    this.db
      .prepare('INSERT INTO api_keys (id, hash, name, tenants, created_at, listener_id) VALUES (?, ?, ?, ?, ?, ?)')
      .run(
        record.id,
        keyHash,
        record.name,
        JSON.stringify(record.tenants),
        record.createdAt,
        record.listenerId ?? null,
      );
  }

  async findApiKey(keyHash: string): Promise<ApiKeyRecord | undefined> {
    const row = this.db.prepare('SELECT * FROM api_keys WHERE hash = ?').get(keyHash) as
      { id: string; name: string; tenants: string; created_at: string; listener_id: string | null } | undefined;
    if (!row) return undefined;
    return {
      id: row.id,
      name: row.name,
      tenants: JSON.parse(row.tenants) as string[],
      createdAt: row.created_at,
      ...(row.listener_id ? { listenerId: row.listener_id } : {}),
    };
  }

  async listApiKeys(): Promise<(ApiKeyRecord & { hash: string })[]> {
    const rows = this.db.prepare('SELECT * FROM api_keys ORDER BY created_at, id').all() as {
      id: string;
      hash: string;
      name: string;
      tenants: string;
      created_at: string;
      listener_id: string | null;
    }[];
    return rows.map((r) => ({
      id: r.id,
      hash: r.hash,
      name: r.name,
      tenants: JSON.parse(r.tenants) as string[],
      createdAt: r.created_at,
      ...(r.listener_id ? { listenerId: r.listener_id } : {}),
    }));
  }

  async deleteApiKey(id: string): Promise<boolean> {
    return this.db.prepare('DELETE FROM api_keys WHERE id = ?').run(id).changes > 0;
  }

  // ---- listeners: a JSON row each; (tenant, compute_id) unique ----

  async createListener(r: ListenerRecord): Promise<void> {
    try {
      this.db
        .prepare('INSERT INTO listeners (id, tenant, compute_id, json) VALUES (?, ?, ?, ?)')
        .run(r.id, r.tenant, r.computeId, JSON.stringify(r));
    } catch (err) {
      if ((err as { code?: string }).code?.startsWith('SQLITE_CONSTRAINT')) {
        throw new AlreadyExistsError(`A listener with compute_id "${r.computeId}" already exists in this tenant.`);
      }
      throw err;
    }
  }

  async getListener(tenant: string, id: string): Promise<ListenerRecord | undefined> {
    const row = this.db.prepare('SELECT json FROM listeners WHERE tenant = ? AND id = ?').get(tenant, id) as
      { json: string } | undefined;
    return row && (JSON.parse(row.json) as ListenerRecord);
  }

  async listListeners(tenant: string): Promise<ListenerRecord[]> {
    const rows = this.db.prepare('SELECT json FROM listeners WHERE tenant = ?').all(tenant) as { json: string }[];
    return rows
      .map((r) => JSON.parse(r.json) as ListenerRecord)
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
  }

  async updateListener(r: ListenerRecord): Promise<void> {
    const found = await this.getListener(r.tenant, r.id);
    if (!found) throw new NotFoundError(`Listener ID ${r.id} not found.`);
    const next: ListenerRecord = { ...r, computeId: found.computeId, computeType: found.computeType };
    this.db
      .prepare('UPDATE listeners SET json = ? WHERE tenant = ? AND id = ?')
      .run(JSON.stringify(next), r.tenant, r.id);
  }

  async deleteListener(tenant: string, id: string): Promise<boolean> {
    return this.db.prepare('DELETE FROM listeners WHERE tenant = ? AND id = ?').run(tenant, id).changes > 0;
  }

  // ---- integrations: the token sealed with the secret key, its id and tenant as additional data ----

  async putIntegration(r: IntegrationRecord, token: string): Promise<void> {
    const sealed = seal(this.secretKey(), token, integrationAad(r.tenant, r.id));
    try {
      this.db
        .prepare(
          'INSERT INTO integrations (id, tenant, name, host, username, created_at, token, details, installation_id) ' +
            'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
        )
        .run(
          r.id,
          r.tenant,
          r.name,
          r.host,
          r.username ?? null,
          r.createdAt,
          sealed,
          JSON.stringify(integrationDetails(r)),
          r.installationId ?? null,
        );
    } catch (err) {
      if ((err as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE')
        throw new AlreadyExistsError(`GitHub installation ${r.installationId} is already an integration`);
      throw err;
    }
  }

  async findIntegrations(where: { id?: string; installationId?: number }): Promise<IntegrationRecord[]> {
    const rows =
      where.id !== undefined
        ? this.db.prepare('SELECT * FROM integrations WHERE id = ?').all(where.id)
        : where.installationId !== undefined
          ? this.db.prepare('SELECT * FROM integrations WHERE installation_id = ?').all(where.installationId)
          : [];
    return (rows as IntegrationRow[]).map(integrationOf);
  }

  async listIntegrations(tenant: string): Promise<IntegrationRecord[]> {
    const rows = this.db
      .prepare('SELECT * FROM integrations WHERE tenant = ? ORDER BY created_at, id')
      .all(tenant) as IntegrationRow[];
    return rows.map(integrationOf);
  }

  async getIntegration(tenant: string, id: string): Promise<IntegrationRecord | undefined> {
    const row = this.db.prepare('SELECT * FROM integrations WHERE tenant = ? AND id = ?').get(tenant, id) as
      IntegrationRow | undefined;
    return row && integrationOf(row);
  }

  async integrationToken(tenant: string, id: string): Promise<string | undefined> {
    const row = this.db.prepare('SELECT token FROM integrations WHERE tenant = ? AND id = ?').get(tenant, id) as
      { token: string } | undefined;
    return row && openSealed(this.secretKey(), row.token, integrationAad(tenant, id));
  }

  async deleteIntegration(tenant: string, id: string): Promise<boolean> {
    return this.db.prepare('DELETE FROM integrations WHERE tenant = ? AND id = ?').run(tenant, id).changes > 0;
  }

  // ---- auth service records: the service seals their secret part before they get here ----

  async createAuthObject(o: Omit<AuthObject, 'version'>): Promise<void> {
    const res = this.db
      .prepare(
        'INSERT OR IGNORE INTO auth_objects (kind, name, tenant, record, sealed, version) VALUES (?, ?, ?, ?, ?, 1)',
      )
      .run(o.kind, o.name, o.tenant, o.record, o.sealed);
    if (res.changes === 0) throw new AlreadyExistsError(`auth ${o.kind} "${o.name}" already exists`);
  }

  async getAuthObject(kind: AuthObjectKind, name: string): Promise<AuthObject | undefined> {
    const row = this.db.prepare('SELECT * FROM auth_objects WHERE kind = ? AND name = ?').get(kind, name) as
      AuthRow | undefined;
    return row && authObjectOf(row);
  }

  async listAuthObjects(kind: AuthObjectKind, tenant: string): Promise<AuthObject[]> {
    const rows = this.db
      .prepare('SELECT * FROM auth_objects WHERE kind = ? AND tenant = ? ORDER BY name')
      .all(kind, tenant) as AuthRow[];
    return rows.map(authObjectOf);
  }

  async replaceAuthObject(o: AuthObject): Promise<void> {
    this.write(() => {
      const res = this.db
        .prepare(
          'UPDATE auth_objects SET record = ?, sealed = ?, version = version + 1 WHERE kind = ? AND name = ? AND version = ? AND tenant = ?',
        )
        .run(o.record, o.sealed, o.kind, o.name, Number(o.version), o.tenant);
      if (res.changes > 0) return;
      if (this.db.prepare('SELECT 1 FROM auth_objects WHERE kind = ? AND name = ?').get(o.kind, o.name)) {
        throw new StaleResourceVersionError(`auth ${o.kind} "${o.name}" changed since it was read`);
      }
      throw new NotFoundError(`auth ${o.kind} "${o.name}" not found`);
    });
  }

  async deleteAuthObject(kind: AuthObjectKind, name: string, version?: string): Promise<boolean> {
    const res =
      version === undefined
        ? this.db.prepare('DELETE FROM auth_objects WHERE kind = ? AND name = ?').run(kind, name)
        : this.db
            .prepare('DELETE FROM auth_objects WHERE kind = ? AND name = ? AND version = ?')
            .run(kind, name, Number(version));
    return res.changes > 0;
  }

  // ---- deployment name claims: one row per (tenant, name); the primary key and an IMMEDIATE transaction make a
  // claim atomic across processes on the same file; removed with the owning deployment ----

  async claimName(namespace: string, tenant: string, name: string, owner: NameClaimOwner): Promise<void> {
    const claim = claimObjectName(tenant, name);
    this.write(() => {
      const row = this.db
        .prepare('SELECT owner_name, owner_uid FROM name_claims WHERE namespace = ? AND claim = ?')
        .get(namespace, claim) as { owner_name: string; owner_uid: string } | undefined;
      if (row?.owner_uid === owner.uid) return;
      if (row && this.holds(namespace, row.owner_name, row.owner_uid)) {
        throw new AlreadyExistsError(`the name "${name}" is held by AgentDeployment "${row.owner_name}"`);
      }
      // Free, or stale (its deployment is gone or being deleted): take it.
      this.db
        .prepare(
          'INSERT OR REPLACE INTO name_claims (namespace, claim, tenant, name, owner_name, owner_uid) VALUES (?, ?, ?, ?, ?, ?)',
        )
        .run(namespace, claim, tenant, name, owner.name, owner.uid);
    });
  }

  async releaseName(namespace: string, tenant: string, name: string, owner: NameClaimOwner): Promise<void> {
    this.db
      .prepare('DELETE FROM name_claims WHERE namespace = ? AND claim = ? AND owner_uid = ?')
      .run(namespace, claimObjectName(tenant, name), owner.uid);
  }

  async listNameClaims(namespace: string): Promise<NameClaim[]> {
    const rows = this.db
      .prepare('SELECT tenant, name, owner_name, owner_uid FROM name_claims WHERE namespace = ? ORDER BY claim')
      .all(namespace) as { tenant: string; name: string; owner_name: string; owner_uid: string }[];
    return rows.map((r) => ({ tenant: r.tenant, name: r.name, owner: { name: r.owner_name, uid: r.owner_uid } }));
  }

  /** The deployment a claim names still exists (same uid) and is not being deleted. */
  private holds(namespace: string, ownerName: string, ownerUid: string): boolean {
    const dep = this.db
      .prepare("SELECT json FROM objects WHERE kind = 'AgentDeployment' AND namespace = ? AND name = ?")
      .get(namespace, ownerName) as { json: string } | undefined;
    const holder = dep && (JSON.parse(dep.json) as AnyResource);
    return Boolean(holder && holder.metadata.uid === ownerUid && !holder.metadata.deletionTimestamp);
  }

  // ---- custom host claims: like name claims, keyed by the host alone (every tenant shares them) ----

  async claimHost(namespace: string, host: string, owner: NameClaimOwner): Promise<void> {
    const key = host.toLowerCase();
    this.write(() => {
      const row = this.db
        .prepare('SELECT owner_name, owner_uid FROM host_claims WHERE namespace = ? AND host = ?')
        .get(namespace, key) as { owner_name: string; owner_uid: string } | undefined;
      if (row?.owner_uid === owner.uid) return;
      if (row && this.holds(namespace, row.owner_name, row.owner_uid)) {
        throw new AlreadyExistsError(`the host "${key}" is held by AgentDeployment "${row.owner_name}"`);
      }
      this.db
        .prepare('INSERT OR REPLACE INTO host_claims (namespace, host, owner_name, owner_uid) VALUES (?, ?, ?, ?)')
        .run(namespace, key, owner.name, owner.uid);
    });
  }

  async releaseHost(namespace: string, host: string, owner: NameClaimOwner): Promise<void> {
    this.db
      .prepare('DELETE FROM host_claims WHERE namespace = ? AND host = ? AND owner_uid = ?')
      .run(namespace, host.toLowerCase(), owner.uid);
  }

  async listHostClaims(namespace: string): Promise<HostClaim[]> {
    const rows = this.db
      .prepare('SELECT host, owner_name, owner_uid FROM host_claims WHERE namespace = ? ORDER BY host')
      .all(namespace) as { host: string; owner_name: string; owner_uid: string }[];
    return rows.map((r) => ({ host: r.host, owner: { name: r.owner_name, uid: r.owner_uid } }));
  }

  // ---- revision logs ----

  async appendLogs(namespace: string, revision: string, type: LogType, lines: string[]): Promise<void> {
    const ins = this.db.prepare(
      'INSERT INTO revision_logs (namespace, revision, type, ts, message) VALUES (?, ?, ?, ?, ?)',
    );
    const ts = new Date().toISOString();
    this.db.transaction(() => {
      for (const line of lines) ins.run(namespace, revision, type, ts, line);
    })();
  }

  async readLogs(
    namespace: string,
    revision: string,
    opts: { type: LogType; limit: number; offset?: string; order: 'asc' | 'desc' },
  ): Promise<LogPage> {
    const cursor = opts.offset ? Number(opts.offset) : undefined;
    const asc = opts.order === 'asc';
    const where = cursor === undefined ? '' : asc ? 'AND id > ?' : 'AND id < ?';
    const params: unknown[] = [namespace, revision, opts.type];
    if (cursor !== undefined) params.push(cursor);
    const rows = this.db
      .prepare(
        `SELECT id, ts, type, message FROM revision_logs WHERE namespace = ? AND revision = ? AND type = ? ${where}
         ORDER BY id ${asc ? 'ASC' : 'DESC'} LIMIT ?`,
      )
      .all(...params, opts.limit + 1) as { id: number; ts: string; type: LogType; message: string }[];
    const more = rows.length > opts.limit;
    const page = rows.slice(0, opts.limit);
    return {
      logs: page.map((r) => ({ id: String(r.id), timestamp: r.ts, type: r.type, message: r.message })),
      next_offset: more ? String(page[page.length - 1]!.id) : null,
    };
  }

  // ---- internals ----

  /** Runs `fn` in a transaction and publishes its changes only after it committed. */
  private write<T>(fn: () => T): T {
    // IMMEDIATE: take the write lock before the first read, so a check-then-write is atomic across processes
    // sharing the file (a deferred transaction would fail with SQLITE_BUSY when another process wrote in between).
    const result = this.db.transaction(fn).immediate();
    this.publish();
    return result;
  }

  private changesSince(rv: number): Change[] {
    const rows = this.db.prepare('SELECT * FROM changes WHERE rv > ? ORDER BY rv').all(rv) as {
      rv: number;
      kind: Kind;
      namespace: string;
      type: WatchEventType;
      json: string;
    }[];
    return rows.map((r) => ({
      rv: r.rv,
      kind: r.kind,
      namespace: r.namespace,
      type: r.type,
      obj: JSON.parse(r.json) as AnyResource,
    }));
  }

  /**
   * Sends watchers every change after the last one published, in resourceVersion order: this process's writes
   * right after they commit, other processes' writes (e.g. `api-key create`, a separate operator) when polled.
   */
  private publish(): void {
    if (this.events.listenerCount('change') === 0) {
      this.published = this.currentRv();
      return;
    }
    if (this.counter('compacted') > this.published) {
      this.published = this.currentRv();
      this.events.emit('change', new ResourceExpiredError('watch fell behind the kept history'));
      return;
    }
    for (const c of this.changesSince(this.published)) {
      this.published = c.rv;
      this.events.emit('change', c);
    }
  }

  private startPolling(): void {
    if (this.poller || this.pollMs <= 0) return;
    this.poller = setInterval(() => {
      try {
        this.publish();
      } catch {
        // closed database: close() stops the poller
      }
    }, this.pollMs);
    this.poller.unref();
  }

  private current<K extends Kind>(kind: K, input: KindMap[K]): KindMap[K] {
    const namespace = input.metadata.namespace ?? this.namespace;
    const row = this.db
      .prepare('SELECT json FROM objects WHERE kind = ? AND namespace = ? AND name = ?')
      .get(kind, namespace, input.metadata.name) as { json: string } | undefined;
    if (!row) throw notFound(kind, input.metadata.name);
    const current = JSON.parse(row.json) as KindMap[K];
    if (input.metadata.uid && input.metadata.uid !== current.metadata.uid) {
      throw new StaleResourceVersionError(`${kind} "${input.metadata.name}": uid precondition failed`);
    }
    if (input.metadata.resourceVersion && input.metadata.resourceVersion !== current.metadata.resourceVersion) {
      throw new StaleResourceVersionError(
        `Operation cannot be fulfilled on ${kind} "${input.metadata.name}": the object has been modified; ` +
          'please apply your changes to the latest version and try again',
      );
    }
    return current;
  }

  private replace<K extends Kind>(kind: K, current: KindMap[K], next: KindMap[K]): KindMap[K] {
    if (canonicalJson(next) === canonicalJson(current)) return current;
    if (next.metadata.deletionTimestamp && !next.metadata.finalizers?.length) {
      this.deleteObject(kind, next);
      return next;
    }
    const rv = this.nextRv();
    next.metadata.resourceVersion = String(rv);
    this.db
      .prepare('UPDATE objects SET rv = ?, json = ? WHERE kind = ? AND namespace = ? AND name = ?')
      .run(rv, JSON.stringify(next), kind, next.metadata.namespace, next.metadata.name);
    this.writeOwners(kind, next);
    this.recordChange(rv, kind, 'MODIFIED', next);
    return next;
  }

  /** Marks for deletion while finalizers remain; otherwise removes and garbage-collects dependents. */
  private deleteObject(kind: Kind, obj: AnyResource): void {
    const m = obj.metadata;
    if (m.finalizers?.length) {
      if (m.deletionTimestamp) return;
      const rv = this.nextRv();
      const next = {
        ...obj,
        metadata: { ...m, deletionTimestamp: new Date().toISOString(), resourceVersion: String(rv) },
      };
      this.db
        .prepare('UPDATE objects SET rv = ?, json = ? WHERE kind = ? AND namespace = ? AND name = ?')
        .run(rv, JSON.stringify(next), kind, m.namespace, m.name);
      this.recordChange(rv, kind, 'MODIFIED', next as AnyResource);
      return;
    }
    const rv = this.nextRv();
    this.db.prepare('DELETE FROM objects WHERE kind = ? AND namespace = ? AND name = ?').run(kind, m.namespace, m.name);
    this.db.prepare('DELETE FROM owners WHERE kind = ? AND namespace = ? AND name = ?').run(kind, m.namespace, m.name);
    this.recordChange(rv, kind, 'DELETED', { ...obj, metadata: { ...m, resourceVersion: String(rv) } } as AnyResource);
    if (kind === 'AgentRevision') {
      this.db.prepare('DELETE FROM revision_logs WHERE namespace = ? AND revision = ?').run(m.namespace, m.name);
    }
    this.db.prepare('DELETE FROM secrets WHERE owner_uid = ?').run(m.uid);
    this.db.prepare('DELETE FROM name_claims WHERE owner_uid = ?').run(m.uid);
    this.db.prepare('DELETE FROM host_claims WHERE owner_uid = ?').run(m.uid);
    const dependents = this.db.prepare('SELECT kind, namespace, name FROM owners WHERE owner_uid = ?').all(m.uid) as {
      kind: Kind;
      namespace: string;
      name: string;
    }[];
    this.db.prepare('DELETE FROM owners WHERE owner_uid = ?').run(m.uid);
    for (const d of dependents) {
      const row = this.db
        .prepare('SELECT json FROM objects WHERE kind = ? AND namespace = ? AND name = ?')
        .get(d.kind, d.namespace, d.name) as { json: string } | undefined;
      if (row) this.deleteObject(d.kind, JSON.parse(row.json) as AnyResource);
    }
  }

  private writeOwners(kind: Kind, obj: AnyResource): void {
    const m = obj.metadata;
    this.db.prepare('DELETE FROM owners WHERE kind = ? AND namespace = ? AND name = ?').run(kind, m.namespace, m.name);
    const ins = this.db.prepare('INSERT OR IGNORE INTO owners (owner_uid, kind, namespace, name) VALUES (?, ?, ?, ?)');
    for (const o of m.ownerReferences ?? []) ins.run(o.uid, kind, m.namespace, m.name);
  }

  private recordChange(rv: number, kind: Kind, type: WatchEventType, obj: AnyResource): void {
    const namespace = obj.metadata.namespace ?? this.namespace;
    this.db
      .prepare('INSERT INTO changes (rv, kind, namespace, type, json) VALUES (?, ?, ?, ?, ?)')
      .run(rv, kind, namespace, type, JSON.stringify(obj));
    if (rv % 100 === 0) {
      const cutoff = rv - this.historyLimit;
      if (cutoff > this.counter('compacted')) {
        this.db.prepare('DELETE FROM changes WHERE rv <= ?').run(cutoff);
        this.db.prepare("UPDATE counters SET value = ? WHERE name = 'compacted'").run(cutoff);
      }
    }
  }

  private nextRv(): number {
    const row = this.db.prepare("UPDATE counters SET value = value + 1 WHERE name = 'rv' RETURNING value").get() as {
      value: number;
    };
    return row.value;
  }

  private currentRv(): number {
    return this.counter('rv');
  }

  private counter(name: string): number {
    return (this.db.prepare('SELECT value FROM counters WHERE name = ?').get(name) as { value: number }).value;
  }
}

/** Binds a ciphertext to its place, so it cannot be copied to another variable or set. */
function secretAad(namespace: string, set: string, variable: string): string {
  return JSON.stringify([namespace, set, variable]);
}

function notFound(kind: Kind, name: string): NotFoundError {
  return new NotFoundError(`${kind} "${name}" not found`);
}

type AuthRow = { kind: AuthObjectKind; name: string; tenant: string; record: string; sealed: string; version: number };

function authObjectOf(r: AuthRow): AuthObject {
  return {
    kind: r.kind,
    name: r.name,
    tenant: r.tenant,
    record: r.record,
    sealed: r.sealed,
    version: String(r.version),
  };
}

type IntegrationRow = {
  id: string;
  tenant: string;
  name: string;
  host: string;
  username: string | null;
  created_at: string;
  details: string | null;
};

function integrationOf(r: IntegrationRow): IntegrationRecord {
  const details = r.details ? (JSON.parse(r.details) as Partial<IntegrationRecord>) : {};
  return {
    id: r.id,
    tenant: r.tenant,
    name: r.name,
    host: r.host,
    ...(r.username === null ? {} : { username: r.username }),
    createdAt: r.created_at,
    ...integrationDetails(details as IntegrationRecord),
  };
}

const integrationAad = (tenant: string, id: string) => `integration/${tenant}/${id}`;
