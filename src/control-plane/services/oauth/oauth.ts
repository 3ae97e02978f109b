// The OAuth side of the auth service: discovery, authorization URLs with PKCE, code exchange and refresh, all
// through openid-client. Every request to a provider goes through a fetch that refuses private, loopback and
// link-local addresses (a workspace chooses the URLs: without it, discovery and token calls would reach the
// cluster's internal services) unless the install allows private providers (one-machine use, tests).
import { lookup } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';
import * as client from 'openid-client';
import { isPublicAddress } from '../../../lib/addresses.ts';
import { redactUrlsIn } from '../../../lib/redact.ts';

/** The parts of a provider's server metadata the service keeps (discovered or given). */
export type ProviderMetadata = {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  revocation_endpoint?: string;
  code_challenge_methods_supported?: string[];
  authorization_response_iss_parameter_supported?: boolean;
};

export type TokenAuthMethod = 'client_secret_basic' | 'client_secret_post' | 'none';

export type OAuthClient = {
  metadata: ProviderMetadata;
  clientId: string;
  clientSecret?: string;
  authMethod: TokenAuthMethod;
};

export type TokenSet = {
  accessToken: string;
  refreshToken?: string;
  idToken?: string;
  tokenType: string;
  /** Seconds, as the provider said (expires_in). */
  expiresIn?: number;
  /** Space-separated scopes the provider granted, when it said. */
  scope?: string;
};

/** A provider answered with an error or could not be reached; `message` is safe to show and log (no secrets). */
export class ProviderError extends Error {
  constructor(
    message: string,
    /** OAuth error code (invalid_grant...) when the provider gave one. */
    readonly oauthError?: string,
  ) {
    super(message);
  }
}

const REQUEST_TIMEOUT_SECONDS = 10;

export function createOAuth(opts: { allowPrivate: boolean }) {
  async function assertPublicHost(url: URL): Promise<void> {
    if (opts.allowPrivate) return;
    if (url.protocol !== 'https:') throw new ProviderError(`${url.origin}: only https URLs are allowed`);
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const addresses = ipaddr.isValid(host) ? [host] : (await lookup(host, { all: true })).map((a) => a.address);
    for (const a of addresses) {
      if (!isPublicAddress(a)) {
        throw new ProviderError(`${url.hostname} resolves to a private or reserved address, which is not allowed`);
      }
    }
  }

  const guardedFetch: client.CustomFetch = async (url, options) => {
    const target = new URL(url);
    try {
      await assertPublicHost(target);
    } catch (err) {
      if (err instanceof ProviderError) throw err;
      throw new ProviderError(`cannot resolve ${target.hostname}`);
    }
    // Never follow redirects: a redirect could point at an address the check above would refuse.
    return fetch(url, { ...options, redirect: 'manual' } as RequestInit);
  };

  function configure(config: client.Configuration): client.Configuration {
    config[client.customFetch] = guardedFetch;
    config.timeout = REQUEST_TIMEOUT_SECONDS;
    if (opts.allowPrivate) client.allowInsecureRequests(config);
    return config;
  }

  function clientAuth(c: Pick<OAuthClient, 'authMethod' | 'clientSecret'>): client.ClientAuth {
    if (c.authMethod === 'none' || !c.clientSecret) return client.None();
    return c.authMethod === 'client_secret_post'
      ? client.ClientSecretPost(c.clientSecret)
      : client.ClientSecretBasic(c.clientSecret);
  }

  function configuration(c: OAuthClient): client.Configuration {
    return configure(new client.Configuration({ ...c.metadata }, c.clientId, undefined, clientAuth(c)));
  }

  return {
    /** URL checks shared by discovery and explicit endpoints: https (unless private providers are allowed), no credentials. */
    urlProblem(value: string): string | undefined {
      let url: URL;
      try {
        url = new URL(value);
      } catch {
        return 'must be an absolute URL';
      }
      if (url.username || url.password) return 'must not carry credentials';
      if (url.protocol !== 'https:' && !(opts.allowPrivate && url.protocol === 'http:')) return 'must be an https URL';
      return undefined;
    },

    async discover(issuerUrl: string, c: Omit<OAuthClient, 'metadata'>): Promise<ProviderMetadata> {
      let config: client.Configuration;
      try {
        config = await client.discovery(new URL(issuerUrl), c.clientId, undefined, clientAuth(c), {
          execute: opts.allowPrivate ? [client.allowInsecureRequests] : [],
          timeout: REQUEST_TIMEOUT_SECONDS,
          [client.customFetch]: guardedFetch,
        });
      } catch (err) {
        throw new ProviderError(`discovery at ${new URL(issuerUrl).origin} failed: ${describe(err)}`);
      }
      const m = config.serverMetadata();
      if (!m.authorization_endpoint || !m.token_endpoint) {
        throw new ProviderError('the discovery document names no authorization_endpoint or token_endpoint');
      }
      return {
        issuer: m.issuer,
        authorization_endpoint: m.authorization_endpoint,
        token_endpoint: m.token_endpoint,
        ...(m.revocation_endpoint ? { revocation_endpoint: m.revocation_endpoint } : {}),
        ...(m.code_challenge_methods_supported
          ? { code_challenge_methods_supported: [...m.code_challenge_methods_supported] }
          : {}),
        ...(m.authorization_response_iss_parameter_supported
          ? { authorization_response_iss_parameter_supported: true }
          : {}),
      };
    },

    /** The authorization URL (PKCE S256 always) and the verifier to keep for the exchange. */
    async authorizationUrl(
      c: OAuthClient,
      p: { redirectUri: string; scopes: string[]; state: string },
    ): Promise<{ url: string; codeVerifier: string }> {
      const codeVerifier = client.randomPKCECodeVerifier();
      const url = client.buildAuthorizationUrl(configuration(c), {
        redirect_uri: p.redirectUri,
        ...(p.scopes.length ? { scope: p.scopes.join(' ') } : {}),
        state: p.state,
        code_challenge: await client.calculatePKCECodeChallenge(codeVerifier),
        code_challenge_method: 'S256',
      });
      return { url: url.href, codeVerifier };
    },

    /** Checks the redirect's parameters (state, iss, error) and exchanges the code. */
    async exchange(
      c: OAuthClient,
      p: { redirectUri: string; params: Record<string, string>; state: string; codeVerifier: string },
    ): Promise<TokenSet> {
      const current = new URL(p.redirectUri);
      for (const [k, v] of Object.entries(p.params)) current.searchParams.set(k, v);
      try {
        const t = await client.authorizationCodeGrant(configuration(c), current, {
          pkceCodeVerifier: p.codeVerifier,
          expectedState: p.state,
          idTokenExpected: false,
        });
        return tokenSet(t);
      } catch (err) {
        throw asProviderError('the authorization', err);
      }
    },

    async refresh(c: OAuthClient, refreshToken: string): Promise<TokenSet> {
      try {
        return tokenSet(await client.refreshTokenGrant(configuration(c), refreshToken));
      } catch (err) {
        throw asProviderError('the token refresh', err);
      }
    },

    /** Asks the provider to revoke a token (when it has a revocation endpoint); failures are the caller's to log. */
    async revoke(c: OAuthClient, token: string): Promise<void> {
      if (!c.metadata.revocation_endpoint) return;
      try {
        await client.tokenRevocation(configuration(c), token);
      } catch (err) {
        throw asProviderError('the revocation', err);
      }
    },
  };
}

export type OAuth = ReturnType<typeof createOAuth>;

function tokenSet(t: client.TokenEndpointResponse): TokenSet {
  return {
    accessToken: t.access_token,
    ...(t.refresh_token ? { refreshToken: t.refresh_token } : {}),
    ...(t.id_token ? { idToken: t.id_token } : {}),
    tokenType: t.token_type ?? 'bearer',
    ...(typeof t.expires_in === 'number' ? { expiresIn: t.expires_in } : {}),
    ...(typeof t.scope === 'string' ? { scope: t.scope } : {}),
  };
}

function asProviderError(what: string, err: unknown): ProviderError {
  if (err instanceof ProviderError) return err;
  if (err instanceof client.ResponseBodyError || err instanceof client.AuthorizationResponseError) {
    const status = err instanceof client.ResponseBodyError ? ` (HTTP ${err.status})` : '';
    const description = err.error_description ? `: ${clip(err.error_description)}` : '';
    return new ProviderError(`${what} failed${status}: ${err.error}${description}`, err.error);
  }
  return new ProviderError(`${what} failed: ${describe(err)}`);
}

/** One line about an error, without URLs' credentials or query strings; never the request or response body. */
function describe(err: unknown): string {
  if (err instanceof ProviderError) return err.message;
  const parts: string[] = [];
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 3; depth++) {
    let msg = e.message;
    const res = (e as { cause?: unknown }).cause;
    if (res instanceof Response) msg += ` (HTTP ${res.status})`;
    parts.push(msg);
    e = res;
  }
  return clip(redactUrlsIn(parts.join(': ') || 'unknown error'));
}

function clip(s: string): string {
  const line = s.replace(/[\p{Cc}]+/gu, ' ').trim();
  return line.length > 300 ? `${line.slice(0, 300)}...` : line;
}
