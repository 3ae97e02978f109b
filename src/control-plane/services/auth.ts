// Auth Service v2: OAuth providers of a workspace, authorization flows on behalf of the agents' end users, and the
// tokens those flows produce. Client secrets and tokens are sealed (auth-crypto.ts) before they reach the store and
// never leave this module except as the `token` of a completed authentication. Records are named by hashes of
// (tenant, ...) or by random ids, and every read checks the tenant: another workspace's records answer as missing.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { AppError, ConflictError, NotFoundError, ValidationError } from '../../lib/errors.ts';
import type { Logger } from '../../lib/logger.ts';
import { isUuid } from '../../resources/index.ts';
import {
  AlreadyExistsError,
  StaleResourceVersionError,
  type AuthObject,
  type AuthObjectKind,
  type AuthObjectStore,
} from '../store/types.ts';
import { flowBinding, flowCookie, flowCookieName, type FlowRecord, type FlowSecret } from './auth-flow.ts';
import { AuthKeyError, openValue, sealValue, type AuthKeyring } from './auth-crypto.ts';
import { createQuotas, type Quotas } from './quotas.ts';
import {
  ProviderError,
  type OAuth,
  type OAuthClient,
  type ProviderMetadata,
  type TokenAuthMethod,
} from './auth-oauth.ts';

/** How long a user has to finish a flow (the state is refused afterwards). */
const FLOW_TTL_MS = 10 * 60_000;
/** A token this close to its expiry is refreshed first. */
const EXPIRY_MARGIN_MS = 30_000;
const WAIT_POLL_MS = 250;
/** Authorizations in progress per workspace (each is a record; a looping agent must not fill the store). */
const MAX_OPEN_FLOWS = 200;

export type ProviderOut = {
  provider_id: string;
  name: string;
  issuer_url: string | null;
  auth_url: string;
  token_url: string;
  client_id: string;
  has_client_secret: boolean;
  token_auth_method: TokenAuthMethod;
  scopes: string[];
  created_at: string;
  updated_at: string;
};

export type ProviderCreateInput = {
  provider_id: string;
  name?: string;
  issuer_url?: string | null;
  auth_url?: string | null;
  token_url?: string | null;
  client_id: string;
  client_secret?: string | null;
  token_auth_method?: TokenAuthMethod;
  scopes?: string[];
};

export type ProviderPatchInput = Partial<Omit<ProviderCreateInput, 'provider_id'>>;

export type TokenOut = {
  id: string;
  provider_id: string;
  user_id: string;
  scopes: string[];
  expires_at: string | null;
  created_at: string;
  updated_at: string;
};

export type AuthenticateInput = { provider: string; scopes: string[]; user_id: string };

export type AuthenticateOut =
  | { status: 'completed'; token: string; expires_at: string | null; url: null; auth_id: null }
  | { status: 'pending'; url: string; auth_id: string; token: null };

export type WaitOut =
  | { status: 'completed'; auth_id: string; token: string; expires_at: string | null }
  | { status: 'pending' | 'timeout' | 'not_found'; auth_id: string }
  | { status: 'failed'; auth_id: string; error: string };

/** What the callback page tells the user; `cookie`: a Set-Cookie that ends the flow's browser binding. */
export type CallbackResult = ({ ok: true } | { ok: false; status: 400 | 502; message: string }) & { cookie?: string };

/** The start link: on to the provider (binding the flow to this browser), or a page saying why not. */

type ProviderRecord = {
  provider_id: string;
  name: string;
  issuer_url: string | null;
  metadata: ProviderMetadata;
  client_id: string;
  token_auth_method: TokenAuthMethod;
  scopes: string[];
  created_at: string;
  updated_at: string;
};

type TokenRecord = {
  id: string;
  provider_id: string;
  user_id: string;
  scopes: string[];
  expires_at: string | null;
  created_at: string;
  updated_at: string;
};
type TokenSecret = { access_token: string; refresh_token?: string; id_token?: string; token_type: string };

/** 503: the auth service has no encryption key configured. */
export class AuthServiceUnavailableError extends AppError {
  constructor(message: string) {
    super(message, 503);
  }
}

/** 429: too many authorizations in progress in one workspace. */
export class TooManyRequestsError extends AppError {
  constructor(message: string) {
    super(message, 429);
  }
}

/** 502: the provider failed; the message names what failed, never a secret. */
export class BadGatewayError extends AppError {
  constructor(message: string) {
    super(message, 502);
  }
}

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

const hash = (...parts: string[]) => createHash('sha256').update(JSON.stringify(parts)).digest('hex').slice(0, 40);
const providerName = (tenant: string, providerId: string) => hash('provider', tenant, providerId);
const tokenName = (tenant: string, providerId: string, userId: string) => hash('token', tenant, providerId, userId);
const aad = (kind: AuthObjectKind, tenant: string, name: string) => `auth/${kind}/${tenant}/${name}`;
const sha256 = (s: string) => createHash('sha256').update(s).digest();

const uniq = (scopes: string[]) => [...new Set(scopes.filter(Boolean))];

export function createAuthService(deps: AuthServiceDeps) {
  const { store, oauth, logger } = deps;
  const now = deps.now ?? Date.now;
  const quotas = deps.quotas ?? createQuotas({ store, now });

  function ring(): AuthKeyring {
    if (!deps.keyring) {
      throw new AuthServiceUnavailableError(
        'The auth service is off: it needs --public-url (AGENTPLANE_PUBLIC_URL) and, with the kubernetes store, ' +
          'encryption keys (AGENTPLANE_AUTH_ENCRYPTION_KEYS, --auth-encryption-keys).',
      );
    }
    return deps.keyring;
  }

  function publicBase(): string {
    const url = typeof deps.publicUrl === 'function' ? deps.publicUrl() : deps.publicUrl;
    if (!url) throw new AuthServiceUnavailableError('The auth service needs the public URL (--public-url).');
    return url.replace(/\/+$/, '');
  }

  function seal(o: { kind: AuthObjectKind; tenant: string; name: string }, secret: unknown): string {
    return sealValue(ring(), JSON.stringify(secret), aad(o.kind, o.tenant, o.name));
  }

  /** Opens the secret part; a value sealed with an older key is re-sealed with the current one (rotation). */
  async function unseal<T>(o: AuthObject): Promise<T> {
    let opened: { value: string; stale: boolean };
    try {
      opened = openValue(ring(), o.sealed, aad(o.kind, o.tenant, o.name));
    } catch (err) {
      if (err instanceof AuthKeyError) {
        logger.error({ kind: o.kind, err: err.message }, 'cannot decrypt an auth service record');
        throw new AuthServiceUnavailableError(`A stored ${o.kind} cannot be decrypted: ${err.message}.`);
      }
      throw err;
    }
    if (opened.stale) {
      await store
        .replaceAuthObject({ ...o, sealed: sealValue(ring(), opened.value, aad(o.kind, o.tenant, o.name)) })
        .catch(() => undefined); // someone else rewrote it first; fine
    }
    return JSON.parse(opened.value) as T;
  }

  const { openFlow, sameBrowser, start } = flowBinding({ store, unseal, now, publicBase });

  async function getOwned(kind: AuthObjectKind, tenant: string, name: string): Promise<AuthObject | undefined> {
    const o = await store.getAuthObject(kind, name);
    return o && o.tenant === tenant ? o : undefined;
  }

  async function providerObject(tenant: string, providerId: string) {
    const o = await getOwned('provider', tenant, providerName(tenant, providerId));
    if (!o) throw new NotFoundError(`Provider ${providerId} not found.`);
    return { obj: o, record: JSON.parse(o.record) as ProviderRecord };
  }

  async function oauthClient(obj: AuthObject, record: ProviderRecord): Promise<OAuthClient> {
    const secret = await unseal<{ client_secret?: string }>(obj);
    return {
      metadata: record.metadata,
      clientId: record.client_id,
      authMethod: record.token_auth_method,
      ...(secret.client_secret ? { clientSecret: secret.client_secret } : {}),
    };
  }

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

  const tokenOut = (r: TokenRecord): TokenOut => ({
    id: r.id,
    provider_id: r.provider_id,
    user_id: r.user_id,
    scopes: r.scopes,
    expires_at: r.expires_at,
    created_at: r.created_at,
    updated_at: r.updated_at,
  });

  /** Endpoints from discovery (issuer_url) or as given (auth_url + token_url); 422 naming the field otherwise. */
  async function resolveMetadata(
    input: { issuer_url?: string | null; auth_url?: string | null; token_url?: string | null },
    c: Omit<OAuthClient, 'metadata'>,
  ): Promise<{ issuerUrl: string | null; metadata: ProviderMetadata }> {
    const invalid = (field: string, msg: string) =>
      new ValidationError(`${field}: ${msg}`, [{ loc: ['body', field], msg, type: 'value_error' }]);
    for (const field of ['issuer_url', 'auth_url', 'token_url'] as const) {
      const v = input[field];
      const problem = v ? oauth.urlProblem(v) : undefined;
      if (problem) throw invalid(field, problem);
    }
    if (input.issuer_url) {
      if (input.auth_url || input.token_url) {
        throw invalid('issuer_url', 'give issuer_url (discovery) or auth_url and token_url, not both');
      }
      try {
        const metadata = await oauth.discover(input.issuer_url, c);
        if (metadata.code_challenge_methods_supported && !metadata.code_challenge_methods_supported.includes('S256')) {
          throw invalid(
            'issuer_url',
            'the provider does not support PKCE with S256, which the auth service always uses',
          );
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

  // ---- tokens ----

  async function saveToken(
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
    const at = new Date(now()).toISOString();
    const record: TokenRecord = {
      id: previous?.record.id ?? randomUUID(),
      provider_id: flow.provider_id,
      user_id: flow.user_id,
      // The provider's word when it gave one; otherwise what was asked for.
      scopes: t.scope !== undefined ? uniq(t.scope.split(' ')) : flow.scopes,
      expires_at: t.expiresIn !== undefined ? new Date(now() + t.expiresIn * 1000).toISOString() : null,
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
      const current = previous?.obj ?? (await getOwned('token', tenant, name));
      try {
        if (current) {
          await store.replaceAuthObject({ ...current, record: JSON.stringify(record), sealed: seal(base, secret) });
        } else {
          await store.createAuthObject({ ...base, record: JSON.stringify(record), sealed: seal(base, secret) });
        }
        return record;
      } catch (err) {
        if (attempt >= 2 || !(err instanceof StaleResourceVersionError || err instanceof AlreadyExistsError)) throw err;
        previous = undefined; // re-read and write over whatever won
      }
    }
  }

  async function usableToken(
    tenant: string,
    provider: { obj: AuthObject; record: ProviderRecord },
    userId: string,
    scopes: string[],
    retried = false,
  ): Promise<{ token: string; expiresAt: string | null } | undefined> {
    const obj = await getOwned('token', tenant, tokenName(tenant, provider.record.provider_id, userId));
    if (!obj) return undefined;
    const record = JSON.parse(obj.record) as TokenRecord;
    if (!scopes.every((s) => record.scopes.includes(s))) return undefined;
    const secret = await unseal<TokenSecret>(obj);
    const expired = record.expires_at !== null && Date.parse(record.expires_at) - EXPIRY_MARGIN_MS <= now();
    if (!expired) return { token: secret.access_token, expiresAt: record.expires_at };
    if (!secret.refresh_token) return undefined;
    const c = await oauthClient(provider.obj, provider.record);
    try {
      const t = await oauth.refresh(c, secret.refresh_token);
      const saved = await saveToken(
        tenant,
        { provider_id: record.provider_id, user_id: record.user_id, scopes: record.scopes },
        { ...t, scope: t.scope ?? record.scopes.join(' ') },
        { obj, record, secret },
      );
      logger.info({ provider: record.provider_id, token: record.id }, 'auth token refreshed');
      return { token: t.accessToken, expiresAt: saved.expires_at };
    } catch (err) {
      if (!(err instanceof ProviderError)) throw err;
      if (err.oauthError === 'invalid_grant') {
        // Another request may have refreshed first (providers that rotate refresh tokens refuse the old one): then
        // its token is the answer. Otherwise the grant is gone at the provider and the user must grant again.
        if (!(await store.deleteAuthObject('token', obj.name, obj.version)) && !retried) {
          return usableToken(tenant, provider, userId, scopes, true);
        }
        logger.info(
          { provider: record.provider_id, token: record.id },
          'auth token refresh refused; a new grant is needed',
        );
        return undefined;
      }
      logger.warn({ provider: record.provider_id, err: err.message }, 'auth token refresh failed');
      throw new BadGatewayError(`Provider ${record.provider_id}: ${err.message}`);
    }
  }

  return {
    // ---- providers ----

    async createProvider(tenant: string, input: ProviderCreateInput): Promise<ProviderOut> {
      const name = providerName(tenant, input.provider_id);
      if (await getOwned('provider', tenant, name)) {
        throw new ConflictError(`Provider ${input.provider_id} already exists.`);
      }
      const providerCount = async () => (await store.listAuthObjects('provider', tenant)).length;
      // Refused before the provider's discovery document is fetched, and checked again where it is written.
      await quotas.admit(tenant, 'authProviders', providerCount, async () => undefined);
      const authMethod = input.token_auth_method ?? (input.client_secret ? 'client_secret_basic' : 'none');
      const { issuerUrl, metadata } = await resolveMetadata(input, {
        clientId: input.client_id,
        authMethod,
        ...(input.client_secret ? { clientSecret: input.client_secret } : {}),
      });
      const at = new Date(now()).toISOString();
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
        await quotas.admit(tenant, 'authProviders', providerCount, () =>
          store.createAuthObject({
            ...base,
            record: JSON.stringify(record),
            sealed: seal(base, input.client_secret ? { client_secret: input.client_secret } : {}),
          }),
        );
      } catch (err) {
        if (err instanceof AlreadyExistsError) throw new ConflictError(`Provider ${input.provider_id} already exists.`);
        throw err;
      }
      return providerOut(record, Boolean(input.client_secret));
    },

    async listProviders(tenant: string): Promise<ProviderOut[]> {
      const objs = await store.listAuthObjects('provider', tenant);
      const out: ProviderOut[] = [];
      for (const o of objs) {
        const secret = await unseal<{ client_secret?: string }>(o);
        out.push(providerOut(JSON.parse(o.record) as ProviderRecord, Boolean(secret.client_secret)));
      }
      return out.sort((a, b) => a.created_at.localeCompare(b.created_at) || a.provider_id.localeCompare(b.provider_id));
    },

    async getProvider(tenant: string, providerId: string): Promise<ProviderOut> {
      const { obj, record } = await providerObject(tenant, providerId);
      const secret = await unseal<{ client_secret?: string }>(obj);
      return providerOut(record, Boolean(secret.client_secret));
    },

    async updateProvider(tenant: string, providerId: string, patch: ProviderPatchInput): Promise<ProviderOut> {
      const { obj, record } = await providerObject(tenant, providerId);
      const secret = await unseal<{ client_secret?: string }>(obj);
      const clientSecret =
        patch.client_secret === undefined ? secret.client_secret : (patch.client_secret ?? undefined);
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
        updated_at: new Date(now()).toISOString(),
      };
      try {
        await store.replaceAuthObject({
          ...obj,
          record: JSON.stringify(next),
          sealed: seal(obj, clientSecret ? { client_secret: clientSecret } : {}),
        });
      } catch (err) {
        if (err instanceof StaleResourceVersionError) {
          throw new ConflictError(`Provider ${providerId} changed while it was being updated; try again.`);
        }
        throw err;
      }
      return providerOut(next, Boolean(clientSecret));
    },

    /** Deletes the provider and every token of it. */
    async deleteProvider(tenant: string, providerId: string): Promise<void> {
      const { obj } = await providerObject(tenant, providerId);
      if (!(await store.deleteAuthObject('provider', obj.name)))
        throw new NotFoundError(`Provider ${providerId} not found.`);
      for (const t of await store.listAuthObjects('token', tenant)) {
        if ((JSON.parse(t.record) as TokenRecord).provider_id === providerId)
          await store.deleteAuthObject('token', t.name);
      }
    },

    // ---- flow ----

    async authenticate(tenant: string, input: AuthenticateInput): Promise<AuthenticateOut> {
      const publicUrl = publicBase();
      const redirectUri = `${publicUrl}/v2/auth/callback/${encodeURIComponent(input.provider)}`;
      const provider = await providerObject(tenant, input.provider);
      const scopes = uniq(input.scopes);
      const usable = await usableToken(tenant, provider, input.user_id, scopes);
      if (usable)
        return { status: 'completed', token: usable.token, expires_at: usable.expiresAt, url: null, auth_id: null };

      if ((await sweepFlows(tenant)) >= MAX_OPEN_FLOWS) {
        throw new TooManyRequestsError(
          `This workspace has ${MAX_OPEN_FLOWS} authorizations in progress; wait for them to finish or expire (10 minutes).`,
        );
      }
      const authId = randomUUID();
      const state = `${authId}.${randomBytes(32).toString('base64url')}`;
      const c = await oauthClient(provider.obj, provider.record);
      const allScopes = uniq([...provider.record.scopes, ...scopes]);
      const { url, codeVerifier } = await oauth.authorizationUrl(c, { redirectUri, scopes: allScopes, state });
      const record: FlowRecord = {
        auth_id: authId,
        provider_id: input.provider,
        user_id: input.user_id,
        scopes: allScopes,
        redirect_uri: redirectUri,
        expires_at: new Date(now() + FLOW_TTL_MS).toISOString(),
        status: 'pending',
        created_at: new Date(now()).toISOString(),
      };
      const names = { kind: 'flow' as const, tenant, name: authId };
      const secret: FlowSecret = {
        state_hash: sha256(state).toString('base64'),
        code_verifier: codeVerifier,
        authorization_url: url,
      };
      await store.createAuthObject({ ...names, record: JSON.stringify(record), sealed: seal(names, secret) });
      logger.info({ provider: input.provider, auth_id: authId }, 'auth flow started');
      // The user opens the start link, which binds the flow to their browser and sends them on to the provider.
      const link = `${publicUrl}/v2/auth/start?state=${encodeURIComponent(state)}`;
      return { status: 'pending', url: link, auth_id: authId, token: null };
    },

    start,

    /**
     * The provider's redirect. Reached by the end user's browser, so it carries no API key: the state alone says
     * which workspace, user and provider the flow is for. The state is single-use (the flow is taken with a
     * compare-and-swap before the exchange) and expires with the flow.
     */
    async callback(providerId: string, params: Record<string, string>, cookieHeader?: string): Promise<CallbackResult> {
      const refused = (message: string): CallbackResult => ({ ok: false, status: 400, message });
      const state = params.state ?? '';
      const found = await openFlow(state, providerId);
      if ('refused' in found) return refused(found.refused);
      const { obj, flow, secret } = found;
      const authId = flow.auth_id;
      // Only the browser that opened the start link completes the flow; the flow stays open for it.
      if (!sameBrowser(flow, cookieHeader))
        return refused(
          'This sign-in was not started in this browser: open the link the agent gave you here and sign in again.',
        );
      const ended = flowCookie(publicBase(), flowCookieName(authId), '', 0);
      const taken: FlowRecord = { ...flow, status: 'taken' };
      try {
        await store.replaceAuthObject({ ...obj, record: JSON.stringify(taken) });
      } catch (err) {
        if (err instanceof StaleResourceVersionError || err instanceof NotFoundError) {
          return refused('This link was already used.');
        }
        throw err;
      }
      const takenObj = (await store.getAuthObject('flow', authId))!;
      const finish = async (status: 'completed' | 'failed', error?: string) => {
        const done: FlowRecord = { ...taken, status, ...(error ? { error } : {}) };
        await store.replaceAuthObject({ ...takenObj, record: JSON.stringify(done) });
      };
      const tenant = obj.tenant;
      let provider: { obj: AuthObject; record: ProviderRecord };
      try {
        provider = await providerObject(tenant, providerId);
      } catch (err) {
        if (!(err instanceof NotFoundError)) throw err;
        await finish('failed', `provider ${providerId} was deleted`);
        return { ...refused('The provider of this link no longer exists.'), cookie: ended };
      }
      try {
        const t = await oauth.exchange(await oauthClient(provider.obj, provider.record), {
          redirectUri: flow.redirect_uri,
          params,
          state,
          codeVerifier: secret.code_verifier,
        });
        await saveToken(tenant, flow, t);
      } catch (err) {
        if (!(err instanceof ProviderError)) {
          await finish('failed', 'internal error while storing the token');
          throw err;
        }
        logger.warn({ provider: providerId, auth_id: authId, err: err.message }, 'auth flow failed');
        await finish('failed', err.message);
        const denied = err.oauthError === 'access_denied';
        return {
          ok: false,
          status: denied ? 400 : 502,
          message: denied ? 'Access was not granted.' : `The provider did not complete the sign-in: ${err.message}`,
          cookie: ended,
        };
      }
      await finish('completed');
      logger.info({ provider: providerId, auth_id: authId }, 'auth flow completed');
      return { ok: true, cookie: ended };
    },

    async wait(tenant: string, authId: string, timeoutSeconds: number, signal?: AbortSignal): Promise<WaitOut> {
      // Real time, not `now`: the injectable clock says when records expire, not how long a request waits.
      const deadline = performance.now() + timeoutSeconds * 1000;
      for (;;) {
        const obj = isUuid(authId) ? await getOwned('flow', tenant, authId) : undefined;
        if (!obj) return { status: 'not_found', auth_id: authId };
        const flow = JSON.parse(obj.record) as FlowRecord;
        if (flow.status === 'completed') {
          const provider = await providerObject(tenant, flow.provider_id).catch(() => undefined);
          const usable = provider && (await usableToken(tenant, provider, flow.user_id, []));
          if (!usable) return { status: 'not_found', auth_id: authId };
          return { status: 'completed', auth_id: authId, token: usable.token, expires_at: usable.expiresAt };
        }
        if (flow.status === 'failed') return { status: 'failed', auth_id: authId, error: flow.error ?? 'failed' };
        if (flow.status === 'pending' && Date.parse(flow.expires_at) <= now()) {
          return { status: 'not_found', auth_id: authId };
        }
        if (performance.now() >= deadline || signal?.aborted) {
          return { status: timeoutSeconds > 0 ? 'timeout' : 'pending', auth_id: authId };
        }
        await new Promise((r) => setTimeout(r, Math.min(WAIT_POLL_MS, Math.max(1, deadline - performance.now()))));
      }
    },

    // ---- tokens ----

    async listTokens(tenant: string, filter: { provider_id?: string; user_id?: string } = {}): Promise<TokenOut[]> {
      return (await store.listAuthObjects('token', tenant))
        .map((o) => JSON.parse(o.record) as TokenRecord)
        .filter(
          (r) =>
            (!filter.provider_id || r.provider_id === filter.provider_id) &&
            (!filter.user_id || r.user_id === filter.user_id),
        )
        .map(tokenOut)
        .sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id));
    },

    /** Deletes the tenant's tokens matching `filter` (all without one); asks providers to revoke them. */
    async deleteTokens(
      tenant: string,
      filter: { provider_id?: string; user_id?: string; id?: string } = {},
    ): Promise<number> {
      let n = 0;
      for (const o of await store.listAuthObjects('token', tenant)) {
        const r = JSON.parse(o.record) as TokenRecord;
        if (filter.id && r.id !== filter.id) continue;
        if (filter.provider_id && r.provider_id !== filter.provider_id) continue;
        if (filter.user_id && r.user_id !== filter.user_id) continue;
        const secret = await unseal<TokenSecret>(o).catch(() => undefined);
        if (!(await store.deleteAuthObject('token', o.name))) continue;
        n++;
        if (secret) await revokeAtProvider(tenant, r, secret);
      }
      return n;
    },

    async deleteToken(tenant: string, id: string): Promise<void> {
      if ((await this.deleteTokens(tenant, { id })) === 0) throw new NotFoundError(`Token ${id} not found.`);
    },
  };

  async function revokeAtProvider(tenant: string, r: TokenRecord, secret: TokenSecret): Promise<void> {
    const provider = await providerObject(tenant, r.provider_id).catch(() => undefined);
    if (!provider?.record.metadata.revocation_endpoint) return;
    try {
      const c = await oauthClient(provider.obj, provider.record);
      await oauth.revoke(c, secret.refresh_token ?? secret.access_token);
    } catch (err) {
      logger.warn(
        { provider: r.provider_id, token: r.id, err: (err as Error).message },
        'auth token revocation at the provider failed',
      );
    }
  }

  /**
   * Removes the tenant's flows that expired more than an hour ago (their auth_ids answer not_found either way) and
   * counts the pending ones left.
   */
  async function sweepFlows(tenant: string): Promise<number> {
    const cutoff = now() - 3600_000;
    let open = 0;
    for (const o of await store.listAuthObjects('flow', tenant)) {
      const f = JSON.parse(o.record) as FlowRecord;
      if (Date.parse(f.expires_at) < cutoff) await store.deleteAuthObject('flow', o.name, o.version);
      else if (f.status === 'pending' && Date.parse(f.expires_at) > now()) open++;
    }
    return open;
  }
}

export type AuthService = ReturnType<typeof createAuthService>;
