// Registry push tokens for `langgraph deploy`'s local-build path, the way registries delegate authentication (the
// Docker/Distribution token spec): the control plane hands a workspace a short-lived push token for one deployment;
// docker (or any registry client) logs in with it; the registry sends the client to our token endpoint (its
// auth.token.realm), which trades the push token for a JWT the registry verifies with our public key, granting push
// and pull on that deployment's own repository (where its source builds push too) and nothing else.
import { randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import { BadRequestError, UnauthorizedError } from '../../../lib/errors.ts';
import { deploymentName, imageRepositoryOf } from '../../../resources/names.ts';
import { mintPushToken, verifyPushToken } from './push-token.ts';
import { grantedAccess, parseScopes } from './scopes.ts';
import type { RegistrySigner } from './signer.ts';

export type { RegistrySigner } from './signer.ts';
export { registrySignerFromPem } from './signer.ts';

export type RegistryTokenOptions = {
  signer: RegistrySigner;
  /** The registry's auth.token.issuer. */
  issuer: string;
  /** The registry's auth.token.service (the tokens' audience). */
  service: string;
  /** The build registry prefix (`registry.example.com/agents`, the operator's --registry): host, then a path. */
  registry: string;
  /** Lifetime of push tokens (default 15 minutes: a local build's push, with docker's retries). */
  pushTokenSeconds?: number;
  /** Lifetime of the registry's bearer tokens (default 5 minutes; clients ask again with the push token). */
  bearerSeconds?: number;
  /** Milliseconds since the epoch (tests move it). */
  now?: () => number;
};

/** The username the answer names; the token endpoint takes any (the push token alone is the credential). */
export const PUSH_USERNAME = 'agentplane';

export type PushTokenAnswer = {
  token: string;
  username: string;
  registry_url: string;
  repository_url: string;
  expires_at: string;
};

export type RegistryTokenAnswer = { token: string; access_token: string; expires_in: number; issued_at: string };

export type RegistryTokens = {
  pushToken(tenant: string, deploymentId: string): PushTokenAnswer;
  /**
   * The token endpoint: a registry token for the push token in HTTP Basic `authorization`, granting what it opens of
   * the scopes asked for. `stillOwns` says whether the workspace still has the deployment (a deleted one's token dies).
   */
  exchange(
    authorization: string | undefined,
    query: { service?: string; scope?: string | string[] },
    stillOwns: (tenant: string, deploymentId: string) => Promise<boolean>,
  ): Promise<RegistryTokenAnswer>;
};

export function createRegistryTokens(opts: RegistryTokenOptions): RegistryTokens {
  const now = opts.now ?? Date.now;
  const prefix = opts.registry.replace(/^[a-z]+:\/\//i, '').replace(/\/+$/, '');
  const slash = prefix.indexOf('/');
  const host = slash < 0 ? prefix : prefix.slice(0, slash);
  // The repository a deployment's images live in, with the registry host (`<prefix>/ag-<id>`).
  const repositoryOf = (deploymentId: string) => imageRepositoryOf(prefix, deploymentName(deploymentId));
  // Scopes name repositories without the registry host.
  const pathOf = (deploymentId: string) => repositoryOf(deploymentId).slice(host.length + 1);
  const pushSeconds = opts.pushTokenSeconds ?? 15 * 60;
  const bearerSeconds = opts.bearerSeconds ?? 5 * 60;

  return {
    pushToken(tenant, deploymentId) {
      const expires = Math.floor(now() / 1000) + pushSeconds;
      return {
        token: mintPushToken(opts.signer.pushTokenKey, { tenant, deploymentId, expires }),
        username: PUSH_USERNAME,
        registry_url: prefix,
        repository_url: repositoryOf(deploymentId),
        expires_at: new Date(expires * 1000).toISOString(),
      };
    },
    async exchange(authorization, query, stillOwns) {
      const password = basicPassword(authorization);
      if (password === undefined) {
        throw new UnauthorizedError(
          'Log in with HTTP Basic: any username, the password a push token (POST /v2/deployments/<id>/push-token).',
        );
      }
      const claims = verifyPushToken(opts.signer.pushTokenKey, password);
      if (!claims) throw new UnauthorizedError('The password is not a push token of this control plane.');
      const nowSeconds = Math.floor(now() / 1000);
      if (claims.expires <= nowSeconds) {
        throw new UnauthorizedError(
          `The push token expired at ${new Date(claims.expires * 1000).toISOString()}: ask for a new one.`,
        );
      }
      if (query.service !== undefined && query.service !== opts.service) {
        throw new BadRequestError(
          `This token endpoint serves the registry service "${opts.service}", not "${query.service}".`,
        );
      }
      const parsed = parseScopes(query.scope === undefined ? [] : [query.scope].flat());
      if ('malformed' in parsed) {
        throw new BadRequestError(
          `scope "${parsed.malformed}" is not <type>:<name>:<actions> (e.g. repository:a/b:push,pull).`,
        );
      }
      if (!(await stillOwns(claims.tenant, claims.deploymentId))) {
        throw new UnauthorizedError('The push token is for a deployment that no longer exists.');
      }
      const access = grantedAccess(parsed.scopes, pathOf(claims.deploymentId));
      const token = await new SignJWT({ access })
        .setProtectedHeader({ alg: opts.signer.alg, kid: opts.signer.kid, typ: 'JWT' })
        .setIssuer(opts.issuer)
        .setSubject(`${claims.tenant}/${claims.deploymentId}`)
        .setAudience(opts.service)
        .setIssuedAt(nowSeconds)
        .setNotBefore(nowSeconds)
        // Never past the push token's own end: its holder gets no longer than it was given.
        .setExpirationTime(Math.min(nowSeconds + bearerSeconds, claims.expires))
        .setJti(randomUUID())
        .sign(opts.signer.privateKey);
      const expiresIn = Math.min(bearerSeconds, claims.expires - nowSeconds);
      return {
        token,
        access_token: token,
        expires_in: expiresIn,
        issued_at: new Date(nowSeconds * 1000).toISOString(),
      };
    },
  };
}

/** The password of an `Authorization: Basic` header, or undefined. */
function basicPassword(authorization: string | undefined): string | undefined {
  const m = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(authorization ?? '');
  if (!m) return undefined;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? undefined : decoded.slice(colon + 1);
}
