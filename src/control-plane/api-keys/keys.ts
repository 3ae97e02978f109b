// API keys: random, shown once, stored only as a SHA-256 hash (keys are high-entropy, so a slow hash adds nothing).
import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { API_KEY_PREFIX } from '../../lib/deployment-token.ts';
import { ForbiddenError, UnauthorizedError, ValidationError } from '../../lib/errors.ts';
import { isLabelValue } from '../../resources/index.ts';
import type { ApiKeyRecord, ApiKeyStore } from '../../state/api-keys.ts';

export const KEY_PREFIX = API_KEY_PREFIX;

export function hashKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

export function generateKey(): string {
  return KEY_PREFIX + randomBytes(32).toString('base64url');
}

/** Tenant ids become Kubernetes label values, so they follow the label value rules. */
export function assertTenantId(tenant: string): void {
  if (!tenant || !isLabelValue(tenant)) {
    throw new ValidationError(`invalid workspace id "${tenant}"`, [
      {
        loc: ['tenant'],
        msg: 'tenant ids are 1-63 characters: letters, digits, "-", "_", "." (alphanumeric at both ends)',
        type: 'value_error',
      },
    ]);
  }
}

export async function createApiKey(
  store: ApiKeyStore,
  opts: { tenants: string[]; name?: string; listenerId?: string },
): Promise<{ key: string; record: ApiKeyRecord }> {
  for (const t of opts.tenants) if (t !== '*') assertTenantId(t);
  if (opts.listenerId && (opts.tenants.length !== 1 || opts.tenants[0] === '*')) {
    throw new ValidationError('a listener key acts for exactly one workspace', [
      { loc: ['tenants'], msg: 'a listener key acts for exactly one workspace', type: 'value_error' },
    ]);
  }
  const key = generateKey();
  const record: ApiKeyRecord = {
    id: randomUUID(),
    name: opts.name ?? 'api-key',
    tenants: opts.tenants,
    createdAt: new Date().toISOString(),
    ...(opts.listenerId ? { listenerId: opts.listenerId } : {}),
  };
  await store.putApiKey(record, hashKey(key));
  return { key, record };
}

export type BootstrapKey = { key: string; tenants: string[] };

/**
 * `admin`: the key may act for every tenant ('*'), which also lets it manage API keys. `listenerId`: a listener key,
 * good only for that listener's own endpoints.
 */
export type Principal = { keyId: string; tenant: string; admin: boolean; listenerId?: string };

/** Who the request's X-Api-Key (and X-Tenant-Id) is; throws 401/403 errors. */
export type Authenticator = (key: string | undefined, tenant: string | undefined) => Promise<Principal>;

export function createAuthenticator(store: ApiKeyStore, bootstrap: BootstrapKey[] = []): Authenticator {
  const boot = bootstrap.map((b) => ({ hash: Buffer.from(hashKey(b.key), 'hex'), tenants: b.tenants }));
  return async function authenticate(key: string | undefined, tenant: string | undefined): Promise<Principal> {
    if (!key) throw new UnauthorizedError('Missing API key (X-Api-Key header).');
    const hash = hashKey(key);
    const hashBuf = Buffer.from(hash, 'hex');
    let record: { id: string; tenants: string[]; listenerId?: string } | undefined = boot
      .filter((b) => timingSafeEqual(b.hash, hashBuf))
      .map((b) => ({ id: 'bootstrap', tenants: b.tenants }))[0];
    record ??= await store.findApiKey(hash);
    if (!record) throw new UnauthorizedError('Invalid API key.');
    // A key of one workspace names it: X-Tenant-Id may be left out. A key of several (or of all) must say which.
    const only = record.tenants.length === 1 && record.tenants[0] !== '*' ? record.tenants[0] : undefined;
    tenant ||= only;
    if (!tenant) {
      throw new ForbiddenError(
        `Missing tenant (X-Tenant-Id header): this API key acts for ${record.tenants.includes('*') ? 'every workspace' : 'several workspaces'}; name one.`,
      );
    }
    if (!record.tenants.includes('*') && !record.tenants.includes(tenant)) {
      throw new ForbiddenError(`This API key may not act for workspace ${tenant}.`);
    }
    // Only '*' keys reach here with arbitrary tenants; they still must be usable as labels.
    if (!isLabelValue(tenant)) throw new ForbiddenError(`Invalid workspace id ${JSON.stringify(tenant)}.`);
    if (record.listenerId) return { keyId: record.id, tenant, admin: false, listenerId: record.listenerId };
    return { keyId: record.id, tenant, admin: record.tenants.includes('*') };
  };
}

/**
 * For what stands in front of agents: true when `key` is a credential tenant code must never see — the bootstrap
 * key, an admin ('*') key, a listener key, or a key of any workspace but `tenant` alone.
 */
export function createForeignKeyCheck(store: ApiKeyStore, bootstrap: BootstrapKey[] = []) {
  const boot = new Set(bootstrap.map((b) => hashKey(b.key)));
  return async function isForeign(key: string, tenant: string): Promise<boolean> {
    const hash = hashKey(key);
    if (boot.has(hash)) return true;
    const record = await store.findApiKey(hash);
    if (!record) return false;
    return Boolean(record.listenerId) || record.tenants.length !== 1 || record.tenants[0] !== tenant;
  };
}
