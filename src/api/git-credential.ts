// Clone credentials for builds on a listener's data plane (the local runtime of `agentplane listener`, or the
// operator of a data-plane-only cluster): asked of the control plane (POST /v2/listeners/{id}/git-credential) with
// the listener's key, once per build. The control plane answers only a fresh GitHub App token for a repository
// a deployment assigned to this listener uses; anything else is refused, and the refusal (one line, no secret)
// becomes the build's failure reason.
import { isUuid } from '../resources/index.ts';
import { redactUrlsIn } from '../lib/redact.ts';
import type { GitCredential } from '../git/credentials.ts';
import { ApiError } from './client.ts';
import { listenerClient, type ListenerConnection } from './listener-connection.ts';

/** One line, bounded, no URL credentials: what a refusal may say in a build's status. */
function oneLine(text: string): string {
  const line = redactUrlsIn(text).replace(/\s+/g, ' ').trim();
  return line.length > 300 ? `${line.slice(0, 300)}…` : line;
}

export function listenerCredentialResolver(
  opts: ListenerConnection & { timeoutMs?: number },
): (tenantId: string, integrationId: string, repoUrl: string) => Promise<GitCredential | undefined> {
  const api = listenerClient(opts);
  return async (tenantId, integrationId, repoUrl) => {
    // As on the control plane: an integration_id that is not a UUID is a label carrying no credential.
    if (!isUuid(integrationId)) return undefined;
    if (tenantId !== opts.tenant)
      throw new Error(`this listener serves workspace ${opts.tenant}, not ${tenantId}: no git credential`);
    let body: Awaited<ReturnType<typeof api.gitCredential>>;
    try {
      body = await api.gitCredential({ integration_id: integrationId, repo_url: repoUrl });
    } catch (err) {
      if (err instanceof ApiError)
        throw new Error(`the control plane refused a git credential (${err.status}): ${oneLine(err.detail)}`, {
          cause: err,
        });
      throw new Error(`asking the control plane for a git credential failed: ${oneLine((err as Error).message)}`, {
        cause: err,
      });
    }
    if (typeof body?.host !== 'string' || typeof body.token !== 'string' || !body.token)
      throw new Error('the control plane answered no git credential');
    return {
      host: body.host,
      token: body.token,
      ...(typeof body.username === 'string' ? { username: body.username } : {}),
    };
  };
}
