// Deployment tokens: the credential the operator gives each deployed agent so it can call the control plane's auth
// service for its own workspace and nothing else. Stateless: `apd_<tenant, base64url>.<deployment id>.<HMAC-SHA256>` under a
// key the control plane and the operator share (AGENTPLANE_DEPLOYMENT_TOKEN_KEY). The control plane also checks the
// deployment still exists, so deleting a deployment revokes its token; changing the key revokes every token.
import { createHmac, timingSafeEqual } from 'node:crypto';

export const DEPLOYMENT_TOKEN_PREFIX = 'apd_';

/** How every API key the control plane makes starts (control-plane/api-keys/keys.ts). */
export const API_KEY_PREFIX = 'apk_';

/** Environment variables a deployed agent gets (documented in docs/auth-service.md). */
export const AGENT_ENV = {
  url: 'AGENTPLANE_CONTROL_PLANE_URL',
  token: 'AGENTPLANE_DEPLOYMENT_TOKEN',
  tenant: 'AGENTPLANE_TENANT_ID',
} as const;

function signature(key: Buffer, tenant: string, deploymentId: string): Buffer {
  return createHmac('sha256', key).update(`agentplane deployment token\n${tenant}\n${deploymentId}`).digest();
}

export function mintDeploymentToken(key: Buffer, tenant: string, deploymentId: string): string {
  const t = Buffer.from(tenant, 'utf8').toString('base64url');
  return `${DEPLOYMENT_TOKEN_PREFIX}${t}.${deploymentId}.${signature(key, tenant, deploymentId).toString('base64url')}`;
}

/** The (tenant, deployment) a token was minted for, or undefined when it is not one of ours. */
export function verifyDeploymentToken(
  key: Buffer,
  token: string,
): { tenant: string; deploymentId: string } | undefined {
  if (!token.startsWith(DEPLOYMENT_TOKEN_PREFIX)) return undefined;
  const parts = token.slice(DEPLOYMENT_TOKEN_PREFIX.length).split('.');
  if (parts.length !== 3) return undefined;
  const [t, deploymentId, sig] = parts as [string, string, string];
  const tenant = Buffer.from(t, 'base64url').toString('utf8');
  const given = Buffer.from(sig, 'base64url');
  const expected = signature(key, tenant, deploymentId);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  return { tenant, deploymentId };
}

/** The variables that let an agent call the auth service (none when the platform was not given a URL and key). */
export function deploymentAuthEnv(
  settings: { controlPlaneUrl?: string; tokenKey?: Buffer } | undefined,
  tenant: string,
  deploymentId: string,
): Record<string, string> {
  if (!settings?.controlPlaneUrl || !settings.tokenKey) return {};
  return {
    [AGENT_ENV.url]: settings.controlPlaneUrl,
    [AGENT_ENV.token]: mintDeploymentToken(settings.tokenKey, tenant, deploymentId),
    [AGENT_ENV.tenant]: tenant,
  };
}

// Access tokens: what a browser (the console's playground) calls one agent with instead of a person's API key.
// `apa_<deployment id>.<expiry, unix seconds>.<HMAC-SHA256>`, keyed with that deployment's own token: the control
// plane can compute it from its key, the agent has it in its environment, and no other deployment has it, so a
// token works on one deployment only, for minutes, and is never a key of the workspace or of the platform.
export const ACCESS_TOKEN_PREFIX = 'apa_';

/** How long an access token works; the console asks for a new one well before. */
const ACCESS_TOKEN_TTL_SECONDS = 15 * 60;

function accessSignature(deploymentToken: string, deploymentId: string, expires: number): Buffer {
  return createHmac('sha256', deploymentToken).update(`agentplane access token\n${deploymentId}\n${expires}`).digest();
}

export function mintAccessToken(
  key: Buffer,
  tenant: string,
  deploymentId: string,
  now = Date.now(),
): { token: string; expiresAt: Date } {
  const expires = Math.floor(now / 1000) + ACCESS_TOKEN_TTL_SECONDS;
  const sig = accessSignature(mintDeploymentToken(key, tenant, deploymentId), deploymentId, expires);
  return {
    token: `${ACCESS_TOKEN_PREFIX}${deploymentId}.${expires}.${sig.toString('base64url')}`,
    expiresAt: new Date(expires * 1000),
  };
}

/** True when `token` is an unexpired access token for the deployment whose own token is `deploymentToken`. */
export function verifyAccessToken(deploymentToken: string, token: string, now = Date.now()): boolean {
  const own = deploymentIdOf(deploymentToken);
  if (!own || !token.startsWith(ACCESS_TOKEN_PREFIX)) return false;
  const parts = token.slice(ACCESS_TOKEN_PREFIX.length).split('.');
  if (parts.length !== 3) return false;
  const [deploymentId, exp, sig] = parts as [string, string, string];
  if (deploymentId !== own.deploymentId || !/^\d{1,12}$/.test(exp) || Number(exp) * 1000 <= now) return false;
  const given = Buffer.from(sig, 'base64url');
  const expected = accessSignature(deploymentToken, deploymentId, Number(exp));
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** The deployment id a deployment token names (its signature is not checked: the agent cannot, and need not). */
function deploymentIdOf(token: string): { deploymentId: string } | undefined {
  if (!token.startsWith(DEPLOYMENT_TOKEN_PREFIX)) return undefined;
  const parts = token.slice(DEPLOYMENT_TOKEN_PREFIX.length).split('.');
  return parts.length === 3 && parts[1] ? { deploymentId: parts[1] } : undefined;
}
