// Integrations v1 of a workspace:
//   git: a stored credential for one repository host: an HTTPS token (optionally with a username) or an SSH private
//     key with its known_hosts. Write-only: accepted at creation, kept by the store (encrypted / in a Secret), handed
//     only to builds. Optionally a webhook secret for the generic push webhook (shown once, in the creation answer).
//   github: an installation of the control plane's GitHub App; builds get a fresh installation token each.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { ConflictError, NotFoundError, ValidationError, type ValidationIssue } from '../../lib/errors.ts';
import { isUuid } from '../../resources/index.ts';
import {
  AlreadyExistsError,
  type AuthObjectStore,
  type IntegrationRecord,
  type IntegrationStore,
} from '../store/types.ts';
import { GitHubError, githubRepoOf, type GitHubApp } from './integrations-github.ts';
import { createQuotas, type Quotas } from './quotas.ts';

export type IntegrationOut = {
  id: string;
  name: string;
  type: 'git' | 'github';
  host: string;
  username: string | null;
  auth: 'token' | 'ssh' | 'github_app';
  installation_id: number | null;
  account: string | null;
  webhook: boolean;
  created_at: string;
};

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

/** What the store keeps as the integration's secret value (one sealed string / Secret key). */
type CredentialBundle = { token?: string; ssh_key?: string; known_hosts?: string; webhook_secret?: string };
const BUNDLE_PREFIX = 'agentplane-credential-v2:';

/** A bare HTTPS token stays a bare string (what integrations held before bundles); anything else is a bundle. */
function sealBundle(b: CredentialBundle): string {
  if (b.token !== undefined && Object.keys(b).length === 1 && !b.token.startsWith(BUNDLE_PREFIX)) return b.token;
  return BUNDLE_PREFIX + JSON.stringify(b);
}

/** Integrations made before bundles hold the bare HTTPS token. */
function openBundle(raw: string | undefined): CredentialBundle | undefined {
  if (raw === undefined) return undefined;
  if (!raw.startsWith(BUNDLE_PREFIX)) return { token: raw };
  return JSON.parse(raw.slice(BUNDLE_PREFIX.length)) as CredentialBundle;
}

/** Canonical host (lowercase, default port dropped), or undefined when `host` is not a bare host[:port]. */
export function canonicalHost(host: string): string | undefined {
  if (!/^[A-Za-z0-9.-]+(:\d{1,5})?$/.test(host)) return undefined;
  let url: URL;
  try {
    url = new URL(`https://${host}`);
  } catch {
    return undefined;
  }
  if (!url.hostname.includes('.') && url.hostname !== 'localhost') return undefined;
  return url.host;
}

const out = (r: IntegrationRecord): IntegrationOut => ({
  id: r.id,
  name: r.name,
  type: r.type ?? 'git',
  host: r.host,
  username: r.username ?? null,
  auth: r.type === 'github' ? 'github_app' : (r.auth ?? 'token'),
  installation_id: r.installationId ?? null,
  account: r.account ?? null,
  webhook: r.type === 'github' ? true : (r.webhook ?? false),
  created_at: r.createdAt,
});

/** Lines of an OpenSSH known_hosts file: "[host]:port" / "host" / hashed names, a key type and a base64 key. */
export function knownHostsProblem(text: string): string | undefined {
  const lines = text.split('\n').filter((l) => l.trim() && !l.trim().startsWith('#'));
  if (!lines.length) return 'must hold at least one host key line';
  for (const l of lines)
    if (!/^(@(cert-authority|revoked) )?\S+ (ssh-|ecdsa-|sk-)\S+ [A-Za-z0-9+/=]+( .*)?$/.test(l.trim()))
      return 'each line must be "<host> <key type> <base64 key>" (ssh-keyscan output)';
  return undefined;
}

export function createIntegrationService(
  store: IntegrationStore & AuthObjectStore,
  github?: GitHubApp,
  quotas: Quotas = createQuotas({ store }),
) {
  const admit = <T>(tenant: string, create: () => Promise<T>) =>
    quotas.admit(tenant, 'integrations', async () => (await store.listIntegrations(tenant)).length, create);
  // Setup-URL states: random, bound to the workspace that asked, single-use (a compare-and-delete), short-lived.
  // Stored (only their hash) with the auth service's records, so the redirect may reach any control-plane replica.
  const STATE_TTL_MS = 15 * 60_000;
  const stateName = (state: string) => createHash('sha256').update(state).digest('hex');

  function requireGitHub(): GitHubApp {
    if (!github) throw new NotFoundError('This control plane has no GitHub App configured.');
    return github;
  }

  async function getRecord(tenant: string, id: string, type?: 'git' | 'github'): Promise<IntegrationRecord> {
    const r = isUuid(id) ? await store.getIntegration(tenant, id) : undefined;
    if (!r || (type && (r.type ?? 'git') !== type)) throw new NotFoundError(`Integration ${id} not found.`);
    return r;
  }

  async function registerInstallation(tenant: string, installationId: number, name?: string) {
    const gh = requireGitHub();
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
      await admit(tenant, () => store.putIntegration(record, sealBundle({})));
    } catch (err) {
      // Answered alike whether this workspace or another holds it.
      if (err instanceof AlreadyExistsError)
        throw new ConflictError(`GitHub installation ${installationId} is already an integration.`);
      throw err;
    }
    return { record, createdAt: inst.createdAt };
  }

  return {
    github,
    async create(tenant: string, input: IntegrationCreateInput): Promise<IntegrationOut & { webhook_secret?: string }> {
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
      await admit(tenant, () =>
        store.putIntegration(
          record,
          sealBundle({ ...bundle, ...(webhookSecret ? { webhook_secret: webhookSecret } : {}) }),
        ),
      );
      // The webhook secret is answered here only when the control plane made it; a given one is never echoed.
      return { ...out(record), ...(input.webhook_secret === true ? { webhook_secret: webhookSecret } : {}) };
    },
    async list(tenant: string): Promise<IntegrationOut[]> {
      return (await store.listIntegrations(tenant)).map(out);
    },
    async get(tenant: string, id: string): Promise<IntegrationOut> {
      return out(await getRecord(tenant, id));
    },
    async delete(tenant: string, id: string): Promise<void> {
      if (!(await store.deleteIntegration(tenant, id))) throw new NotFoundError(`Integration ${id} not found.`);
    },

    // ---- GitHub App installations ----
    async githubInstallations(tenant: string) {
      return (await store.listIntegrations(tenant))
        .filter((r) => r.type === 'github')
        .map((r) => ({ id: r.id, installation_id: r.installationId!, name: r.name }));
    },
    /** Registers an installation by id (admin keys only: the id alone does not prove who installed it). */
    async registerGitHub(tenant: string, installationId: number, name?: string): Promise<IntegrationOut> {
      return out((await registerInstallation(tenant, installationId, name)).record);
    },
    /**
     * A single-use state for the App's setup URL, bound to `tenant` and to the GitHub `account` (user or
     * organization login) the App is being installed on, and the link that installs the App.
     */
    async startGitHubInstall(
      tenant: string,
      account: string,
    ): Promise<{ state: string; install_url: string | null; expires_at: string; account: string }> {
      const gh = requireGitHub();
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
    },
    /**
     * The setup-URL redirect after "install": the state names the workspace and the account (once). GitHub must say
     * that the installation is on that account and new (created since the state was issued, give or take): another
     * workspace's installation, or an id copied from elsewhere, is refused whatever state comes with it.
     */
    async completeGitHubInstall(state: string, installationId: number, code?: string): Promise<IntegrationOut> {
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
      const gh = requireGitHub();
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
      return out((await registerInstallation(pending.tenant, installationId)).record);
    },
    async githubRepos(tenant: string, id: string) {
      const r = await getRecord(tenant, id, 'github');
      const repos = await requireGitHub().repositories(r.installationId!);
      return repos.map((repo) => ({ host_integration_id: r.id, ...repo }));
    },

    // ---- webhooks ----
    /** The integration a generic webhook names and its secret, across workspaces (undefined: none / no webhook). */
    async webhookTarget(id: string): Promise<{ record: IntegrationRecord; secret: string } | undefined> {
      if (!isUuid(id)) return undefined;
      const [r] = await store.findIntegrations({ id });
      if (!r || r.type === 'github' || !r.webhook) return undefined;
      const secret = openBundle(await store.integrationToken(r.tenant, r.id))?.webhook_secret;
      return secret ? { record: r, secret } : undefined;
    },
    async installationOwners(installationId: number): Promise<IntegrationRecord[]> {
      return store.findIntegrations({ installationId });
    },
  };
}

export type IntegrationService = ReturnType<typeof createIntegrationService>;

/** A credential a build hands to git (see runtimes/types.ts GitCredential); a minted token says when it expires. */
export type BuildCredential =
  | { host: string; username?: string; token: string; expiresAt?: string }
  | { host: string; sshKey: string; knownHosts: string };

/**
 * What a build of `repoUrl` for `tenant` clones with: the stored credential of a git integration, or a fresh
 * installation token of a GitHub integration (only for a repository the installation can see). Undefined when the
 * integration id is an opaque label or unknown to the tenant; throws (one line, no secret) when GitHub refuses.
 */
export function buildCredentialResolver(store: IntegrationStore, github?: GitHubApp) {
  return async (tenant: string, id: string, repoUrl: string): Promise<BuildCredential | undefined> => {
    if (!isUuid(id)) return undefined;
    const r = await store.getIntegration(tenant, id);
    if (!r) throw new Error(`integration ${id} not found in this workspace`);
    if (r.type === 'github') {
      if (!github) throw new Error('this control plane has no GitHub App configured');
      const repo = githubRepoOf(github.settings.webUrl, repoUrl);
      if (!repo || (r.account && repo.owner.toLowerCase() !== r.account.toLowerCase()))
        throw new Error(`repo_url is not a repository of installation ${r.installationId} (${r.account})`);
      const { token, expiresAt } = await github.cloneToken(r.installationId!, repoUrl);
      return { host: r.host, username: 'x-access-token', token, ...(expiresAt ? { expiresAt } : {}) };
    }
    const bundle = openBundle(await store.integrationToken(tenant, id));
    if (!bundle) return undefined;
    if (r.auth === 'ssh' && bundle.ssh_key && bundle.known_hosts)
      return { host: r.host, sshKey: bundle.ssh_key, knownHosts: bundle.known_hosts };
    return bundle.token ? { host: r.host, username: r.username, token: bundle.token } : undefined;
  };
}

/** Host of a clone URL (https/http/ssh/git URL or scp-like user@host:path), lower case, with port; else undefined. */
export function repoHostOf(repoUrl: string): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(repoUrl)) {
    try {
      return new URL(repoUrl).host.toLowerCase() || undefined;
    } catch {
      return undefined;
    }
  }
  const scp = /^(?:[^@/:]+@)?([^/:]+):(?!\/\/)/.exec(repoUrl);
  return scp ? scp[1]!.toLowerCase() : undefined;
}

/**
 * Checks a new deployment's source_config against the workspace's integrations. Integration ids are UUIDs; an
 * integration_id of that shape must name an integration of this workspace (another workspace's id answers 404,
 * exactly like a missing one) whose host is repo_url's host, and for a GitHub integration a repository the
 * installation can see. Other values are opaque labels that carry no credential (public repositories), as before
 * integrations existed.
 */
export async function integrationIssues(
  store: IntegrationStore,
  tenant: string,
  integrationId: string | null | undefined,
  repoUrl: string | null | undefined,
  github?: GitHubApp,
): Promise<ValidationIssue[]> {
  if (!integrationId || !isUuid(integrationId)) return [];
  const at = ['body', 'source_config'];
  const integration = await store.getIntegration(tenant, integrationId);
  if (!integration) throw new NotFoundError(`Integration ${integrationId} not found.`);
  const host = repoUrl ? repoHostOf(repoUrl) : undefined;
  const sshUrl = repoUrl ? !/^https?:\/\//i.test(repoUrl) : false;
  if (host !== integration.host) {
    return [
      {
        loc: [...at, 'repo_url'],
        msg: `the host of repo_url must be ${integration.host}, the host of integration ${integrationId}`,
        type: 'value_error',
      },
    ];
  }
  if (integration.type !== 'github' && (integration.auth === 'ssh') !== sshUrl)
    return [
      {
        loc: [...at, 'repo_url'],
        msg:
          integration.auth === 'ssh'
            ? `integration ${integrationId} holds an SSH key: repo_url must be an ssh:// or user@host:path URL`
            : `integration ${integrationId} holds an HTTPS token: repo_url must be an https:// URL`,
        type: 'value_error',
      },
    ];
  if (integration.type === 'github') {
    if (!github) throw new NotFoundError('This control plane has no GitHub App configured.');
    const repo = githubRepoOf(github.settings.webUrl, repoUrl!);
    const visible = repo
      ? (await github.repositories(integration.installationId!)).some(
          (r) => r.owner.toLowerCase() === repo.owner.toLowerCase() && r.name.toLowerCase() === repo.name.toLowerCase(),
        )
      : false;
    if (!visible)
      return [
        {
          loc: [...at, 'repo_url'],
          msg: `not a repository that GitHub installation ${integration.installationId} can see`,
          type: 'value_error',
        },
      ];
  }
  return [];
}
