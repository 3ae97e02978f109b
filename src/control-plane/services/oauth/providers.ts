// OAuth providers of a workspace: their endpoints (from discovery or as given) and client credentials; the client
// secret is sealed with the provider's record and never answered.
import { ConflictError, NotFoundError, ValidationError } from '../../../lib/errors.ts';
import { AlreadyExistsError, StaleResourceVersionError } from '../../../state/errors.ts';
import { getOwned, providerName, providerObject, seal, uniq, unseal, type AuthDeps } from './core.ts';
import { ProviderError, type OAuthClient, type ProviderMetadata } from './oauth.ts';
import type { ProviderCreateInput, ProviderOut, ProviderPatchInput, ProviderRecord, TokenRecord } from './types.ts';

const providerOut = (r: ProviderRecord, hasSecret: boolean): ProviderOut => ({
  provider_id: r.provider_id,
  name: r.name,
  issuer_url: r.issuer_url,
  auth_url: r.metadata.authorization_endpoint,
  token_url: r.metadata.token_endpoint,
  client_id: r.client_id,
  has_client_secret: hasSecret,
  token_auth_method: r.token_auth_method,
  scopes: r.scopes,
  created_at: r.created_at,
  updated_at: r.updated_at,
});

/** Endpoints from discovery (issuer_url) or as given (auth_url + token_url); 422 naming the field otherwise. */
async function resolveMetadata(
  deps: AuthDeps,
  input: { issuer_url?: string | null; auth_url?: string | null; token_url?: string | null },
  c: Omit<OAuthClient, 'metadata'>,
): Promise<{ issuerUrl: string | null; metadata: ProviderMetadata }> {
  const invalid = (field: string, msg: string) =>
    new ValidationError(`${field}: ${msg}`, [{ loc: ['body', field], msg, type: 'value_error' }]);
  for (const field of ['issuer_url', 'auth_url', 'token_url'] as const) {
    const v = input[field];
    const problem = v ? deps.oauth.urlProblem(v) : undefined;
    if (problem) throw invalid(field, problem);
  }
  if (input.issuer_url) {
    if (input.auth_url || input.token_url) {
      throw invalid('issuer_url', 'give issuer_url (discovery) or auth_url and token_url, not both');
    }
    try {
      const metadata = await deps.oauth.discover(input.issuer_url, c);
      if (metadata.code_challenge_methods_supported && !metadata.code_challenge_methods_supported.includes('S256')) {
        throw invalid('issuer_url', 'the provider does not support PKCE with S256, which the auth service always uses');
      }
      return { issuerUrl: input.issuer_url, metadata };
    } catch (err) {
      if (err instanceof ProviderError) throw invalid('issuer_url', err.message);
      throw err;
    }
  }
  if (!input.auth_url || !input.token_url) {
    throw invalid(input.auth_url ? 'token_url' : 'auth_url', 'give issuer_url, or both auth_url and token_url');
  }
  return {
    issuerUrl: null,
    metadata: {
      issuer: new URL(input.auth_url).origin,
      authorization_endpoint: input.auth_url,
      token_endpoint: input.token_url,
    },
  };
}

export async function createProvider(deps: AuthDeps, tenant: string, input: ProviderCreateInput): Promise<ProviderOut> {
  const name = providerName(tenant, input.provider_id);
  if (await getOwned(deps, 'provider', tenant, name)) {
    throw new ConflictError(`Provider ${input.provider_id} already exists.`);
  }
  const providerCount = async () => (await deps.store.listAuthObjects('provider', tenant)).length;
  // Refused before the provider's discovery document is fetched, and checked again where it is written.
  await deps.quotas.admit(tenant, 'authProviders', providerCount, async () => undefined);
  const authMethod = input.token_auth_method ?? (input.client_secret ? 'client_secret_basic' : 'none');
  const { issuerUrl, metadata } = await resolveMetadata(deps, input, {
    clientId: input.client_id,
    authMethod,
    ...(input.client_secret ? { clientSecret: input.client_secret } : {}),
  });
  const at = new Date(deps.now()).toISOString();
  const record: ProviderRecord = {
    provider_id: input.provider_id,
    name: input.name ?? input.provider_id,
    issuer_url: issuerUrl,
    metadata,
    client_id: input.client_id,
    token_auth_method: authMethod,
    scopes: uniq(input.scopes ?? []),
    created_at: at,
    updated_at: at,
  };
  const base = { kind: 'provider' as const, tenant, name };
  try {
    await deps.quotas.admit(tenant, 'authProviders', providerCount, () =>
      deps.store.createAuthObject({
        ...base,
        record: JSON.stringify(record),
        sealed: seal(deps, base, input.client_secret ? { client_secret: input.client_secret } : {}),
      }),
    );
  } catch (err) {
    if (err instanceof AlreadyExistsError) throw new ConflictError(`Provider ${input.provider_id} already exists.`);
    throw err;
  }
  return providerOut(record, Boolean(input.client_secret));
}

export async function listProviders(deps: AuthDeps, tenant: string): Promise<ProviderOut[]> {
  const objs = await deps.store.listAuthObjects('provider', tenant);
  const out: ProviderOut[] = [];
  for (const o of objs) {
    const secret = await unseal<{ client_secret?: string }>(deps, o);
    out.push(providerOut(JSON.parse(o.record) as ProviderRecord, Boolean(secret.client_secret)));
  }
  return out.sort((a, b) => a.created_at.localeCompare(b.created_at) || a.provider_id.localeCompare(b.provider_id));
}

export async function getProvider(deps: AuthDeps, tenant: string, providerId: string): Promise<ProviderOut> {
  const { obj, record } = await providerObject(deps, tenant, providerId);
  const secret = await unseal<{ client_secret?: string }>(deps, obj);
  return providerOut(record, Boolean(secret.client_secret));
}

export async function updateProvider(
  deps: AuthDeps,
  tenant: string,
  providerId: string,
  patch: ProviderPatchInput,
): Promise<ProviderOut> {
  const { obj, record } = await providerObject(deps, tenant, providerId);
  const secret = await unseal<{ client_secret?: string }>(deps, obj);
  const clientSecret = patch.client_secret === undefined ? secret.client_secret : (patch.client_secret ?? undefined);
  const clientId = patch.client_id ?? record.client_id;
  const authMethod = patch.token_auth_method ?? (clientSecret ? record.token_auth_method : 'none');
  let { issuer_url: issuerUrl, metadata } = record;
  const endpointsChanged =
    patch.issuer_url !== undefined || patch.auth_url !== undefined || patch.token_url !== undefined;
  if (endpointsChanged) {
    // An explicit provider keeps the endpoint the patch does not name.
    const kept =
      !patch.issuer_url && record.issuer_url === null
        ? { auth_url: record.metadata.authorization_endpoint, token_url: record.metadata.token_endpoint }
        : {};
    const resolved = await resolveMetadata(
      deps,
      {
        issuer_url: patch.issuer_url,
        auth_url: patch.auth_url ?? kept.auth_url,
        token_url: patch.token_url ?? kept.token_url,
      },
      { clientId, authMethod, ...(clientSecret ? { clientSecret } : {}) },
    );
    issuerUrl = resolved.issuerUrl;
    metadata = resolved.metadata;
  }
  const next: ProviderRecord = {
    ...record,
    name: patch.name ?? record.name,
    issuer_url: issuerUrl,
    metadata,
    client_id: clientId,
    token_auth_method: authMethod === 'none' && clientSecret ? 'client_secret_basic' : authMethod,
    scopes: patch.scopes ? uniq(patch.scopes) : record.scopes,
    updated_at: new Date(deps.now()).toISOString(),
  };
  try {
    await deps.store.replaceAuthObject({
      ...obj,
      record: JSON.stringify(next),
      sealed: seal(deps, obj, clientSecret ? { client_secret: clientSecret } : {}),
    });
  } catch (err) {
    if (err instanceof StaleResourceVersionError) {
      throw new ConflictError(`Provider ${providerId} changed while it was being updated; try again.`);
    }
    throw err;
  }
  return providerOut(next, Boolean(clientSecret));
}

/** Deletes the provider and every token of it. */
export async function deleteProvider(deps: AuthDeps, tenant: string, providerId: string): Promise<void> {
  const { obj } = await providerObject(deps, tenant, providerId);
  if (!(await deps.store.deleteAuthObject('provider', obj.name)))
    throw new NotFoundError(`Provider ${providerId} not found.`);
  for (const t of await deps.store.listAuthObjects('token', tenant)) {
    if ((JSON.parse(t.record) as TokenRecord).provider_id === providerId)
      await deps.store.deleteAuthObject('token', t.name);
  }
}
