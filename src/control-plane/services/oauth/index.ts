// Auth Service v2: OAuth providers of a workspace, authorization flows on behalf of the agents' end users, and the
// tokens those flows produce. Client secrets and tokens are sealed (auth-crypto.ts) before they reach the store and
// never leave this service except as the `token` of a completed authentication. The operations live next to this
// file (providers, flows, tokens) over the AuthDeps built here.
import { createQuotas } from '../quotas.ts';
import { bindingOf, type AuthDeps, type AuthServiceDeps } from './core.ts';
import { authenticate, callback, wait } from './flows.ts';
import { createProvider, deleteProvider, getProvider, listProviders, updateProvider } from './providers.ts';
import { deleteToken, deleteTokens, listTokens } from './tokens.ts';
import type { AuthenticateInput, ProviderCreateInput, ProviderPatchInput } from './types.ts';

export function createAuthService(options: AuthServiceDeps) {
  const now = options.now ?? Date.now;
  const deps: AuthDeps = { ...options, now, quotas: options.quotas ?? createQuotas({ store: options.store, now }) };
  return {
    // providers
    createProvider: (tenant: string, input: ProviderCreateInput) => createProvider(deps, tenant, input),
    listProviders: (tenant: string) => listProviders(deps, tenant),
    getProvider: (tenant: string, providerId: string) => getProvider(deps, tenant, providerId),
    updateProvider: (tenant: string, providerId: string, patch: ProviderPatchInput) =>
      updateProvider(deps, tenant, providerId, patch),
    /** Deletes the provider and every token of it. */
    deleteProvider: (tenant: string, providerId: string) => deleteProvider(deps, tenant, providerId),

    // flows
    authenticate: (tenant: string, input: AuthenticateInput) => authenticate(deps, tenant, input),
    start: bindingOf(deps).start,
    callback: (providerId: string, params: Record<string, string>, cookieHeader?: string) =>
      callback(deps, providerId, params, cookieHeader),
    wait: (tenant: string, authId: string, timeoutSeconds: number, signal?: AbortSignal) =>
      wait(deps, tenant, authId, timeoutSeconds, signal),

    // tokens
    listTokens: (tenant: string, filter?: { provider_id?: string; user_id?: string }) =>
      listTokens(deps, tenant, filter),
    /** Deletes the tenant's tokens matching `filter` (all without one); asks providers to revoke them. */
    deleteTokens: (tenant: string, filter?: { provider_id?: string; user_id?: string; id?: string }) =>
      deleteTokens(deps, tenant, filter),
    deleteToken: (tenant: string, id: string) => deleteToken(deps, tenant, id),
  };
}

export type AuthService = ReturnType<typeof createAuthService>;
