// The clone credentials of a workspace's integrations, as every builder receives them (the control plane for a
// listener, the operator's runtimes, agentplane dev): a git integration's stored HTTPS token or SSH key, or a fresh
// installation token of a GitHub integration. Also how the stored credential is kept (one sealed string per
// integration) and the checks of what a workspace hands in.
import { isUuid } from '../resources/index.ts';
import { githubRepoOf, type GitHubApp } from './github-app.ts';

/**
 * A git credential for one repository host: an HTTPS token (a plain git integration's, or a GitHub installation
 * token minted for this build, which says when it expires) or an SSH private key with the known_hosts git must
 * check the server against.
 */
export type GitCredential =
  | { host: string; username?: string; token: string; expiresAt?: string }
  | { host: string; sshKey: string; knownHosts: string };

/** What the store keeps as the integration's secret value (one sealed string / Secret key). */
export type CredentialBundle = { token?: string; ssh_key?: string; known_hosts?: string; webhook_secret?: string };
const BUNDLE_PREFIX = 'agentplane-credential-v2:';

/** A bare HTTPS token stays a bare string (what integrations held before bundles); anything else is a bundle. */
export function sealBundle(b: CredentialBundle): string {
  if (b.token !== undefined && Object.keys(b).length === 1 && !b.token.startsWith(BUNDLE_PREFIX)) return b.token;
  return BUNDLE_PREFIX + JSON.stringify(b);
}

/** Integrations made before bundles hold the bare HTTPS token. */
export function openBundle(raw: string | undefined): CredentialBundle | undefined {
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

/** Lines of an OpenSSH known_hosts file: "[host]:port" / "host" / hashed names, a key type and a base64 key. */
export function knownHostsProblem(text: string): string | undefined {
  const lines = text.split('\n').filter((l) => l.trim() && !l.trim().startsWith('#'));
  if (!lines.length) return 'must hold at least one host key line';
  for (const l of lines)
    if (!/^(@(cert-authority|revoked) )?\S+ (ssh-|ecdsa-|sk-)\S+ [A-Za-z0-9+/=]+( .*)?$/.test(l.trim()))
      return 'each line must be "<host> <key type> <base64 key>" (ssh-keyscan output)';
  return undefined;
}

/** The fields of an integration a credential is made from (the control plane's records have them). */
type CredentialIntegration = {
  host: string;
  username?: string;
  type?: 'git' | 'github';
  auth?: 'token' | 'ssh';
  installationId?: number;
  account?: string;
};

/** Where integrations and their sealed credentials are read (the control plane's store). */
export interface CredentialStore {
  getIntegration(tenant: string, id: string): Promise<CredentialIntegration | undefined>;
  integrationToken(tenant: string, id: string): Promise<string | undefined>;
}

/**
 * What a build of `repoUrl` for `tenant` clones with: the stored credential of a git integration, or a fresh
 * installation token of a GitHub integration (only for a repository the installation can see). Undefined when the
 * integration id is an opaque label or unknown to the tenant; throws (one line, no secret) when GitHub refuses.
 */
export function buildCredentialResolver(store: CredentialStore, github?: GitHubApp) {
  return async (tenant: string, id: string, repoUrl: string): Promise<GitCredential | undefined> => {
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
