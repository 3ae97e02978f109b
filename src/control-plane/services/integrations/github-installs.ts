// GitHub integrations: installations of the control plane's GitHub App, registered by id (admins) or through the
// App's setup URL with a single-use state bound to a workspace and a GitHub account.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { ConflictError, NotFoundError, ValidationError } from '../../../lib/errors.ts';
import { AlreadyExistsError } from '../../../state/errors.ts';
import { type IntegrationRecord } from '../../../state/integrations.ts';
import { GitHubError } from '../../../git/github-app.ts';
import { sealBundle } from '../../../git/credentials.ts';
import { admit, getRecord, requireGitHub, toApi, type IntegrationDeps, type IntegrationOut } from './records.ts';

// Setup-URL states: random, bound to the workspace that asked, single-use (a compare-and-delete), short-lived.
// Stored (only their hash) with the auth service's records, so the redirect may reach any control-plane replica.
const STATE_TTL_MS = 15 * 60_000;
const stateName = (state: string) => createHash('sha256').update(state).digest('hex');

async function registerInstallation(deps: IntegrationDeps, tenant: string, installationId: number, name?: string) {
  const { store } = deps;
  const gh = requireGitHub(deps);
  const inst = await gh.installation(installationId).catch((err: unknown) => {
    if (err instanceof GitHubError && err.githubStatus === 404)
      throw new NotFoundError(`GitHub installation ${installationId} not found for this App.`);
    throw err;
  });
  const record: IntegrationRecord = {
    id: randomUUID(),
    tenant,
    name: name ?? inst.account,
    host: gh.webHost,
    type: 'github',
    installationId,
    account: inst.account,
    createdAt: new Date().toISOString(),
  };
  try {
    if ((await store.findIntegrations({ installationId })).length) throw new AlreadyExistsError('taken');
    await admit(deps, tenant, () => store.putIntegration(record, sealBundle({})));
  } catch (err) {
    // Answered alike whether this workspace or another holds it.
    if (err instanceof AlreadyExistsError)
      throw new ConflictError(`GitHub installation ${installationId} is already an integration.`);
    throw err;
  }
  return { record, createdAt: inst.createdAt };
}

export async function githubInstallations({ store }: IntegrationDeps, tenant: string) {
  return (await store.listIntegrations(tenant))
    .filter((r) => r.type === 'github')
    .map((r) => ({ id: r.id, installation_id: r.installationId!, name: r.name }));
}

/** Registers an installation by id (admin keys only: the id alone does not prove who installed it). */
export async function registerGitHub(
  deps: IntegrationDeps,
  tenant: string,
  installationId: number,
  name?: string,
): Promise<IntegrationOut> {
  return toApi((await registerInstallation(deps, tenant, installationId, name)).record);
}

/**
 * A single-use state for the App's setup URL, bound to `tenant` and to the GitHub `account` (user or
 * organization login) the App is being installed on, and the link that installs the App.
 */
export async function startGitHubInstall(
  deps: IntegrationDeps,
  tenant: string,
  account: string,
): Promise<{ state: string; install_url: string | null; expires_at: string; account: string }> {
  const { store } = deps;
  const gh = requireGitHub(deps);
  const now = Date.now();
  for (const o of await store.listAuthObjects('setup', tenant)) {
    if ((JSON.parse(o.record) as { expires: number }).expires < now)
      await store.deleteAuthObject('setup', o.name, o.version);
  }
  const state = randomBytes(24).toString('base64url');
  await store.createAuthObject({
    kind: 'setup',
    name: stateName(state),
    tenant,
    record: JSON.stringify({ expires: now + STATE_TTL_MS, account }),
    sealed: '',
  });
  return {
    state,
    install_url: gh.installUrl(state) ?? null,
    expires_at: new Date(now + STATE_TTL_MS).toISOString(),
    account,
  };
}

/**
 * The setup-URL redirect after "install": the state names the workspace and the account (once). GitHub must say
 * that the installation is on that account and new (created since the state was issued, give or take): another
 * workspace's installation, or an id copied from elsewhere, is refused whatever state comes with it.
 */
export async function completeGitHubInstall(
  deps: IntegrationDeps,
  state: string,
  installationId: number,
  code?: string,
): Promise<IntegrationOut> {
  const { store } = deps;
  const obj = state ? await store.getAuthObject('setup', stateName(state)) : undefined;
  // Single use: of two redirects with one state (on any replicas), one deletes it and the other finds it gone.
  const taken = obj ? await store.deleteAuthObject('setup', obj.name, obj.version) : false;
  const pending = taken
    ? { tenant: obj!.tenant, ...(JSON.parse(obj!.record) as { expires: number; account?: string }) }
    : undefined;
  // A state made before states named their account binds nothing: refused like an unknown one.
  if (!pending || pending.expires < Date.now() || !pending.account)
    throw new ValidationError('state: unknown, used or expired; start the installation again', [
      { loc: ['query', 'state'], msg: 'unknown, used or expired', type: 'value_error' },
    ]);
  const gh = requireGitHub(deps);
  if (gh.settings.clientId) {
    // With the App's OAuth client, only the installing user's own redirect completes: its code must belong to
    // a user who can reach the installation (another workspace's user, or a copied id, cannot).
    const reachable = code
      ? await gh.userInstallations(code).catch((err: unknown) => {
          // A made-up, used or foreign code: GitHub refuses it (400/401), the redirect proves nothing.
          if (err instanceof GitHubError && (err.githubStatus === 400 || err.githubStatus === 401)) return [];
          throw err;
        })
      : [];
    if (!reachable.includes(installationId))
      throw new ValidationError('code: not the redirect of a user who can reach this installation', [
        {
          loc: ['query', code ? 'installation_id' : 'code'],
          msg: code ? 'not an installation the signed-in user can reach' : 'required (user authorization)',
          type: 'value_error',
        },
      ]);
  }
  const inst = await gh.installation(installationId);
  if (inst.account.toLowerCase() !== pending.account.toLowerCase())
    throw new ValidationError('installation_id: not an installation on the account this setup was started for', [
      {
        loc: ['query', 'installation_id'],
        msg: `not an installation on ${pending.account}, the account this setup was started for`,
        type: 'value_error',
      },
    ]);
  const issued = pending.expires - STATE_TTL_MS;
  if (!inst.createdAt || Date.parse(inst.createdAt) < issued - 60_000)
    throw new ValidationError('installation_id: not an installation made after this setup began', [
      {
        loc: ['query', 'installation_id'],
        msg: 'not an installation made after this setup began',
        type: 'value_error',
      },
    ]);
  return toApi((await registerInstallation(deps, pending.tenant, installationId)).record);
}

export async function githubRepos(deps: IntegrationDeps, tenant: string, id: string) {
  const r = await getRecord(deps, tenant, id, 'github');
  const repos = await requireGitHub(deps).repositories(r.installationId!);
  return repos.map((repo) => ({ host_integration_id: r.id, ...repo }));
}
