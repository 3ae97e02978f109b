// Tokens the flows produce, per (workspace, provider, user): stored sealed, refreshed when near expiry, revoked at
// the provider when deleted.
import { randomUUID } from 'node:crypto';
import { NotFoundError } from '../../../lib/errors.ts';
import { AlreadyExistsError, StaleResourceVersionError } from '../../../state/errors.ts';
import { type AuthObject } from '../../../state/auth-objects.ts';
import { getOwned, oauthClient, providerObject, seal, tokenName, uniq, unseal, type AuthDeps } from './core.ts';
import type { FlowRecord } from './flow-binding.ts';
import { ProviderError } from './oauth.ts';
import { BadGatewayError, type ProviderRecord, type TokenOut, type TokenRecord, type TokenSecret } from './types.ts';

/** A token this close to its expiry is refreshed first. */
const EXPIRY_MARGIN_MS = 30_000;

const tokenOut = (r: TokenRecord): TokenOut => ({
  id: r.id,
  provider_id: r.provider_id,
  user_id: r.user_id,
  scopes: r.scopes,
  expires_at: r.expires_at,
  created_at: r.created_at,
  updated_at: r.updated_at,
});

export async function saveToken(
  deps: AuthDeps,
  tenant: string,
  flow: Pick<FlowRecord, 'provider_id' | 'user_id' | 'scopes'>,
  t: {
    accessToken: string;
    refreshToken?: string;
    idToken?: string;
    tokenType: string;
    expiresIn?: number;
    scope?: string;
  },
  previous?: { obj: AuthObject; record: TokenRecord; secret: TokenSecret },
): Promise<TokenRecord> {
  const name = tokenName(tenant, flow.provider_id, flow.user_id);
  const at = new Date(deps.now()).toISOString();
  const record: TokenRecord = {
    id: previous?.record.id ?? randomUUID(),
    provider_id: flow.provider_id,
    user_id: flow.user_id,
    // The provider's word when it gave one; otherwise what was asked for.
    scopes: t.scope !== undefined ? uniq(t.scope.split(' ')) : flow.scopes,
    expires_at: t.expiresIn !== undefined ? new Date(deps.now() + t.expiresIn * 1000).toISOString() : null,
    created_at: previous?.record.created_at ?? at,
    updated_at: at,
  };
  const secret: TokenSecret = {
    access_token: t.accessToken,
    // A refresh answer without a new refresh token keeps the old one (RFC 6749 section 6).
    ...((t.refreshToken ?? previous?.secret.refresh_token)
      ? { refresh_token: t.refreshToken ?? previous?.secret.refresh_token }
      : {}),
    ...(t.idToken ? { id_token: t.idToken } : {}),
    token_type: t.tokenType,
  };
  const base = { kind: 'token' as const, tenant, name };
  for (let attempt = 0; ; attempt++) {
    const current = previous?.obj ?? (await getOwned(deps, 'token', tenant, name));
    try {
      if (current) {
        await deps.store.replaceAuthObject({
          ...current,
          record: JSON.stringify(record),
          sealed: seal(deps, base, secret),
        });
      } else {
        await deps.store.createAuthObject({
          ...base,
          record: JSON.stringify(record),
          sealed: seal(deps, base, secret),
        });
      }
      return record;
    } catch (err) {
      if (attempt >= 2 || !(err instanceof StaleResourceVersionError || err instanceof AlreadyExistsError)) throw err;
      previous = undefined; // re-read and write over whatever won
    }
  }
}

export async function usableToken(
  deps: AuthDeps,
  tenant: string,
  provider: { obj: AuthObject; record: ProviderRecord },
  userId: string,
  scopes: string[],
  retried = false,
): Promise<{ token: string; expiresAt: string | null } | undefined> {
  const obj = await getOwned(deps, 'token', tenant, tokenName(tenant, provider.record.provider_id, userId));
  if (!obj) return undefined;
  const record = JSON.parse(obj.record) as TokenRecord;
  if (!scopes.every((s) => record.scopes.includes(s))) return undefined;
  const secret = await unseal<TokenSecret>(deps, obj);
  const expired = record.expires_at !== null && Date.parse(record.expires_at) - EXPIRY_MARGIN_MS <= deps.now();
  if (!expired) return { token: secret.access_token, expiresAt: record.expires_at };
  if (!secret.refresh_token) return undefined;
  const c = await oauthClient(deps, provider.obj, provider.record);
  try {
    const t = await deps.oauth.refresh(c, secret.refresh_token);
    const saved = await saveToken(
      deps,
      tenant,
      { provider_id: record.provider_id, user_id: record.user_id, scopes: record.scopes },
      { ...t, scope: t.scope ?? record.scopes.join(' ') },
      { obj, record, secret },
    );
    deps.logger.info({ provider: record.provider_id, token: record.id }, 'auth token refreshed');
    return { token: t.accessToken, expiresAt: saved.expires_at };
  } catch (err) {
    if (!(err instanceof ProviderError)) throw err;
    if (err.oauthError === 'invalid_grant') {
      // Another request may have refreshed first (providers that rotate refresh tokens refuse the old one): then
      // its token is the answer. Otherwise the grant is gone at the provider and the user must grant again.
      if (!(await deps.store.deleteAuthObject('token', obj.name, obj.version)) && !retried) {
        return usableToken(deps, tenant, provider, userId, scopes, true);
      }
      deps.logger.info(
        { provider: record.provider_id, token: record.id },
        'auth token refresh refused; a new grant is needed',
      );
      return undefined;
    }
    deps.logger.warn({ provider: record.provider_id, err: err.message }, 'auth token refresh failed');
    throw new BadGatewayError(`Provider ${record.provider_id}: ${err.message}`);
  }
}

export async function listTokens(
  deps: AuthDeps,
  tenant: string,
  filter: { provider_id?: string; user_id?: string } = {},
): Promise<TokenOut[]> {
  return (await deps.store.listAuthObjects('token', tenant))
    .map((o) => JSON.parse(o.record) as TokenRecord)
    .filter(
      (r) =>
        (!filter.provider_id || r.provider_id === filter.provider_id) &&
        (!filter.user_id || r.user_id === filter.user_id),
    )
    .map(tokenOut)
    .sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id));
}

/** Deletes the tenant's tokens matching `filter` (all without one); asks providers to revoke them. */
export async function deleteTokens(
  deps: AuthDeps,
  tenant: string,
  filter: { provider_id?: string; user_id?: string; id?: string } = {},
): Promise<number> {
  let n = 0;
  for (const o of await deps.store.listAuthObjects('token', tenant)) {
    const r = JSON.parse(o.record) as TokenRecord;
    if (filter.id && r.id !== filter.id) continue;
    if (filter.provider_id && r.provider_id !== filter.provider_id) continue;
    if (filter.user_id && r.user_id !== filter.user_id) continue;
    const secret = await unseal<TokenSecret>(deps, o).catch(() => undefined);
    if (!(await deps.store.deleteAuthObject('token', o.name))) continue;
    n++;
    if (secret) await revokeAtProvider(deps, tenant, r, secret);
  }
  return n;
}

export async function deleteToken(deps: AuthDeps, tenant: string, id: string): Promise<void> {
  if ((await deleteTokens(deps, tenant, { id })) === 0) throw new NotFoundError(`Token ${id} not found.`);
}

async function revokeAtProvider(deps: AuthDeps, tenant: string, r: TokenRecord, secret: TokenSecret): Promise<void> {
  const provider = await providerObject(deps, tenant, r.provider_id).catch(() => undefined);
  if (!provider?.record.metadata.revocation_endpoint) return;
  try {
    const c = await oauthClient(deps, provider.obj, provider.record);
    await deps.oauth.revoke(c, secret.refresh_token ?? secret.access_token);
  } catch (err) {
    deps.logger.warn(
      { provider: r.provider_id, token: r.id, err: (err as Error).message },
      'auth token revocation at the provider failed',
    );
  }
}
