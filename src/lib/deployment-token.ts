// Deployment tokens: the credential the operator gives each deployed agent so it can call the control plane's auth
// service for its own workspace and nothing else. Stateless: `apd_<tenant, base64url>.<deployment id>.<HMAC-SHA256>` under a
// key the control plane and the operator share (AGENTPLANE_DEPLOYMENT_TOKEN_KEY). The control plane also checks the
// deployment still exists, so deleting a deployment revokes its token; changing the key revokes every token.
import { createHmac, timingSafeEqual } from 'node:crypto';

export const DEPLOYMENT_TOKEN_PREFIX = 'apd_';

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
