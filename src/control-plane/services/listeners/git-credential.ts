// Clone credentials for builds on a listener's machine.
import { AppError, ConflictError, NotFoundError } from '../../../lib/errors.ts';
import { redactUrlsIn } from '../../../lib/redact.ts';
import { deploymentsOf, requireListener, type ListenerDeps } from './records.ts';
import type { ListenerGitCredential, ListenerGitCredentialRequest } from '../../../api/schemas/listeners.ts';

/**
 * A clone credential for a build on the listener: only for an integration_id + repo_url pair that a deployment
 * assigned to this listener uses, and only of a GitHub App integration (a fresh token, read-only, for that one
 * repository). The stored token or SSH key of a git integration is never handed out: a listener key is an
 * ordinary workspace key, and this must not read back a write-only secret. Never logs the token.
 */
export async function gitCredential(
  deps: ListenerDeps,
  tenant: string,
  id: string,
  req: ListenerGitCredentialRequest,
): Promise<ListenerGitCredential> {
  await requireListener(deps, tenant, id);
  const uses = (await deploymentsOf(deps, tenant, id)).some(
    (d) =>
      !d.metadata.deletionTimestamp &&
      d.spec.sourceConfig.integrationId === req.integration_id &&
      d.spec.sourceConfig.repoUrl === req.repo_url,
  );
  if (!uses)
    throw new ConflictError(
      `No deployment assigned to listener ${id} uses integration ${req.integration_id} with this repo_url.`,
    );
  const integration = await deps.store.getIntegration(tenant, req.integration_id);
  if (!integration) throw new NotFoundError(`Integration ${req.integration_id} not found.`);
  if (integration.type !== 'github')
    throw new ConflictError(
      `Integration ${req.integration_id} holds a stored credential, and stored credentials are not handed to ` +
        'data planes: use a GitHub App integration, or give the data plane its own git credentials.',
    );
  const credential = await deps.resolveCredential(tenant, req.integration_id, req.repo_url).catch((err: unknown) => {
    // GitHub's refusals are AppErrors (their status, a one-line message); the resolver's own are conflicts.
    if (err instanceof Error && !(err instanceof AppError)) throw new ConflictError(err.message);
    throw err;
  });
  if (!credential || !('token' in credential))
    throw new ConflictError(`Integration ${req.integration_id} gives no token for this repo_url.`);
  deps.logger.info(
    { listener_id: id, tenant, integration_id: req.integration_id, repo_url: redactUrlsIn(req.repo_url) },
    'git credential handed to listener',
  );
  return {
    host: credential.host,
    username: credential.username ?? 'x-access-token',
    token: credential.token,
    ...(credential.expiresAt ? { expires_at: credential.expiresAt } : {}),
  };
}
