// Who a push webhook is for: the generic webhook names a git integration (and its secret); a GitHub delivery
// names an installation, which may be an integration of several workspaces.
import { isUuid } from '../../../resources/index.ts';
import type { IntegrationRecord } from '../../../state/integrations.ts';
import { openBundle } from '../../../git/credentials.ts';
import type { IntegrationDeps } from './records.ts';

/** The integration a generic webhook names and its secret, across workspaces (undefined: none / no webhook). */
export async function webhookTarget(
  { store }: IntegrationDeps,
  id: string,
): Promise<{ record: IntegrationRecord; secret: string } | undefined> {
  if (!isUuid(id)) return undefined;
  const [r] = await store.findIntegrations({ id });
  if (!r || r.type === 'github' || !r.webhook) return undefined;
  const secret = openBundle(await store.integrationToken(r.tenant, r.id))?.webhook_secret;
  return secret ? { record: r, secret } : undefined;
}

export async function installationOwners(
  { store }: IntegrationDeps,
  installationId: number,
): Promise<IntegrationRecord[]> {
  return store.findIntegrations({ installationId });
}
