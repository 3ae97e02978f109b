// What every auth service operation works over: the store, the OAuth client, the keyring that seals client secrets
// and tokens, and the public URL. Records are named by hashes of (tenant, ...) or by random ids, and every read
// checks the tenant: another workspace's records answer as missing.
import { createHash } from 'node:crypto';
import { NotFoundError } from '../../../lib/errors.ts';
import type { Logger } from '../../../lib/logger.ts';
import type { AuthObject, AuthObjectKind, AuthObjectStore } from '../../../state/auth-objects.ts';
import { AuthKeyError, openValue, sealValue, type AuthKeyring } from '../../../lib/auth-crypto.ts';
import type { Quotas } from '../quotas.ts';
import { flowBinding } from './flow-binding.ts';
import type { OAuth, OAuthClient } from './oauth.ts';
import { AuthServiceUnavailableError, type ProviderRecord } from './types.ts';

export type AuthServiceDeps = {
  store: AuthObjectStore;
  oauth: OAuth;
  /** Undefined: every call answers 503 naming the setting (AGENTPLANE_AUTH_ENCRYPTION_KEYS). */
  keyring?: AuthKeyring;
  /**
   * The control plane's public base URL (--public-url; a function when it is known only once listening): redirect
   * URIs and start links are built from it, never from a request's Host. Undefined: flows answer 503.
   */
  publicUrl?: string | (() => string);
  logger: Logger;
  /** Milliseconds since the epoch (tests move it to expire tokens and states). */
  now?: () => number;
  /** Per-workspace quotas (default: DEFAULT_QUOTAS). */
  quotas?: Quotas;
};

/** The service's settings with their defaults filled in. */
export type AuthDeps = AuthServiceDeps & { now: () => number; quotas: Quotas };

const hash = (...parts: string[]) => createHash('sha256').update(JSON.stringify(parts)).digest('hex').slice(0, 40);
export const providerName = (tenant: string, providerId: string) => hash('provider', tenant, providerId);
export const tokenName = (tenant: string, providerId: string, userId: string) =>
  hash('token', tenant, providerId, userId);
const aad = (kind: AuthObjectKind, tenant: string, name: string) => `auth/${kind}/${tenant}/${name}`;
export const sha256 = (s: string) => createHash('sha256').update(s).digest();

export const uniq = (scopes: string[]) => [...new Set(scopes.filter(Boolean))];

function ring(deps: AuthDeps): AuthKeyring {
  if (!deps.keyring) {
    throw new AuthServiceUnavailableError(
      'The auth service is off: it needs --public-url (AGENTPLANE_PUBLIC_URL) and, with the kubernetes store, ' +
        'encryption keys (AGENTPLANE_AUTH_ENCRYPTION_KEYS, --auth-encryption-keys).',
    );
  }
  return deps.keyring;
}

export function publicBase(deps: AuthDeps): string {
  const url = typeof deps.publicUrl === 'function' ? deps.publicUrl() : deps.publicUrl;
  if (!url) throw new AuthServiceUnavailableError('The auth service needs the public URL (--public-url).');
  return url.replace(/\/+$/, '');
}

export function seal(
  deps: AuthDeps,
  o: { kind: AuthObjectKind; tenant: string; name: string },
  secret: unknown,
): string {
  return sealValue(ring(deps), JSON.stringify(secret), aad(o.kind, o.tenant, o.name));
}

/** Opens the secret part; a value sealed with an older key is re-sealed with the current one (rotation). */
export async function unseal<T>(deps: AuthDeps, o: AuthObject): Promise<T> {
  let opened: { value: string; stale: boolean };
  try {
    opened = openValue(ring(deps), o.sealed, aad(o.kind, o.tenant, o.name));
  } catch (err) {
    if (err instanceof AuthKeyError) {
      deps.logger.error({ kind: o.kind, err: err.message }, 'cannot decrypt an auth service record');
      throw new AuthServiceUnavailableError(`A stored ${o.kind} cannot be decrypted: ${err.message}.`);
    }
    throw err;
  }
  if (opened.stale) {
    await deps.store
      .replaceAuthObject({ ...o, sealed: sealValue(ring(deps), opened.value, aad(o.kind, o.tenant, o.name)) })
      .catch(() => undefined); // someone else rewrote it first; fine
  }
  return JSON.parse(opened.value) as T;
}

/** Opening flows by their state and binding them to a browser (flow-binding.ts), over these deps. */
export function bindingOf(deps: AuthDeps) {
  return flowBinding({
    store: deps.store,
    unseal: <T>(o: AuthObject) => unseal<T>(deps, o),
    now: deps.now,
    publicBase: () => publicBase(deps),
  });
}

export async function getOwned(
  { store }: AuthDeps,
  kind: AuthObjectKind,
  tenant: string,
  name: string,
): Promise<AuthObject | undefined> {
  const o = await store.getAuthObject(kind, name);
  return o && o.tenant === tenant ? o : undefined;
}

export async function providerObject(deps: AuthDeps, tenant: string, providerId: string) {
  const o = await getOwned(deps, 'provider', tenant, providerName(tenant, providerId));
  if (!o) throw new NotFoundError(`Provider ${providerId} not found.`);
  return { obj: o, record: JSON.parse(o.record) as ProviderRecord };
}

export async function oauthClient(deps: AuthDeps, obj: AuthObject, record: ProviderRecord): Promise<OAuthClient> {
  const secret = await unseal<{ client_secret?: string }>(deps, obj);
  return {
    metadata: record.metadata,
    clientId: record.client_id,
    authMethod: record.token_auth_method,
    ...(secret.client_secret ? { clientSecret: secret.client_secret } : {}),
  };
}
