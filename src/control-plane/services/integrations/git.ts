// Git integrations: a stored credential for one repository host, write-only (accepted at creation, handed only to
// builds), optionally with a secret for the generic push webhook.
import { randomBytes, randomUUID } from 'node:crypto';
import { NotFoundError } from '../../../lib/errors.ts';
import type { IntegrationRecord } from '../../../state/integrations.ts';
import { canonicalHost, sealBundle, type CredentialBundle } from '../../../git/credentials.ts';
import { admit, getRecord, toApi, type IntegrationDeps, type IntegrationOut } from './records.ts';

export type IntegrationCreateInput = {
  name: string;
  host: string;
  username?: string | null;
  token?: string;
  ssh_private_key?: string;
  known_hosts?: string;
  /** true: a random secret is made and answered once; a string: that secret. */
  webhook_secret?: string | boolean;
};

export async function createGitIntegration(
  deps: IntegrationDeps,
  tenant: string,
  input: IntegrationCreateInput,
): Promise<IntegrationOut & { webhook_secret?: string }> {
  const ssh = input.ssh_private_key !== undefined;
  const webhookSecret =
    input.webhook_secret === true
      ? randomBytes(32).toString('base64url')
      : typeof input.webhook_secret === 'string'
        ? input.webhook_secret
        : undefined;
  const record: IntegrationRecord = {
    id: randomUUID(),
    tenant,
    name: input.name,
    host: canonicalHost(input.host)!,
    ...(input.username ? { username: input.username } : {}),
    createdAt: new Date().toISOString(),
    type: 'git',
    auth: ssh ? 'ssh' : 'token',
    ...(webhookSecret ? { webhook: true } : {}),
  };
  const bundle: CredentialBundle = ssh
    ? { ssh_key: input.ssh_private_key!.replace(/\r\n/g, '\n').trimEnd() + '\n', known_hosts: input.known_hosts }
    : { token: input.token };
  await admit(deps, tenant, () =>
    deps.store.putIntegration(
      record,
      sealBundle({ ...bundle, ...(webhookSecret ? { webhook_secret: webhookSecret } : {}) }),
    ),
  );
  // The webhook secret is answered here only when the control plane made it; a given one is never echoed.
  return { ...toApi(record), ...(input.webhook_secret === true ? { webhook_secret: webhookSecret } : {}) };
}

export async function listIntegrations({ store }: IntegrationDeps, tenant: string): Promise<IntegrationOut[]> {
  return (await store.listIntegrations(tenant)).map(toApi);
}

export async function getIntegration(deps: IntegrationDeps, tenant: string, id: string): Promise<IntegrationOut> {
  return toApi(await getRecord(deps, tenant, id));
}

export async function deleteIntegration({ store }: IntegrationDeps, tenant: string, id: string): Promise<void> {
  if (!(await store.deleteIntegration(tenant, id))) throw new NotFoundError(`Integration ${id} not found.`);
}
