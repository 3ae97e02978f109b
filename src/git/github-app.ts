// The platform's GitHub App (github.com or GitHub Enterprise Server): installations become integrations of a
// workspace (control plane), their repositories are listed, and each build gets an installation access token of its
// own (control plane, operator or dev, whichever builds), scoped to the one repository it clones, read-only. All
// GitHub calls go through Octokit (App JWT and token minting included).
import { createAppAuth } from '@octokit/auth-app';
import { Octokit } from '@octokit/rest';
import { verify } from '@octokit/webhooks-methods';
import { AppError } from '../lib/errors.ts';
import { trimTrailing } from '../lib/text.ts';
import type { Logger } from '../lib/logger.ts';

export type GitHubAppSettings = {
  appId: string;
  /** PEM of the App's private key. */
  privateKey: string;
  /** Secret of the App's webhook (X-Hub-Signature-256); without it the webhook endpoint answers 404. */
  webhookSecret?: string;
  /** REST API base: https://api.github.com, or https://<ghes host>/api/v3. */
  apiUrl: string;
  /** Where repositories live (their clone URLs' origin): https://github.com, or https://<ghes host>. */
  webUrl: string;
  /** The App's slug (github.com/apps/<slug>): the install link a workspace is sent to. */
  appSlug?: string;
  /**
   * The App's OAuth client ("Request user authorization during installation"): the setup redirect then carries a
   * code, exchanged for the installing user's token, and the installation must be one that user can reach.
   */
  clientId?: string;
  clientSecret?: string;
};

/** The web origin that goes with an API base URL (api.github.com → github.com; <ghes>/api/v3 → <ghes>). */
export function githubWebUrlOf(apiUrl: string): string {
  const u = new URL(apiUrl);
  if (u.hostname === 'api.github.com') return 'https://github.com';
  return `${u.origin}${u.pathname.replace(/\/+$/, '').replace(/\/api\/v3$/, '')}`;
}

/**
 * A GitHub failure worth one line in a revision's status or an answer; never carries a token. `githubStatus` is
 * GitHub's (0: unreachable); the API answers 404/422 as such, a rate limit as 503, anything else as 502.
 */
export class GitHubError extends AppError {
  constructor(
    message: string,
    readonly githubStatus: number,
  ) {
    super(message, githubStatus === 404 || githubStatus === 422 ? githubStatus : githubStatus === 429 ? 503 : 502);
  }
}

type OctokitFailure = { status?: number; response?: { headers?: Record<string, string | number | undefined> } };

function githubFailure(err: unknown, what: string): GitHubError {
  const e = err as OctokitFailure;
  const status = typeof e?.status === 'number' ? e.status : 0;
  const headers = e?.response?.headers ?? {};
  if (status === 429 || (status === 403 && String(headers['x-ratelimit-remaining']) === '0')) {
    const reset = Number(headers['x-ratelimit-reset']);
    const when = Number.isFinite(reset) && reset > 0 ? ` until ${new Date(reset * 1000).toISOString()}` : '';
    return new GitHubError(`GitHub rate limit reached while ${what}; retry later${when}`, 429);
  }
  if (status === 401) return new GitHubError(`GitHub refused the App's credentials (401) while ${what}`, 401);
  if (status === 404) return new GitHubError(`GitHub answered 404 while ${what}: no such installation`, 404);
  if (status === 422)
    return new GitHubError(`GitHub answered 422 while ${what}: the repository is not visible to the installation`, 422);
  if (status) return new GitHubError(`GitHub answered ${status} while ${what}`, status);
  return new GitHubError(`GitHub is unreachable while ${what}`, 502);
}

export type GitHubRepo = { id: number; name: string; owner: string; url: string; default_branch: string };
export type GitHubInstallation = { id: number; account: string; createdAt?: string };

/** `owner/name` of a repository URL on `webUrl`'s host (https or http, optional .git), else undefined. */
export function githubRepoOf(webUrl: string, repoUrl: string): { owner: string; name: string } | undefined {
  let u: URL;
  const web = new URL(webUrl);
  try {
    u = new URL(repoUrl);
  } catch {
    return undefined;
  }
  if (u.host.toLowerCase() !== web.host.toLowerCase() || u.username || u.password || u.search || u.hash)
    return undefined;
  const base = trimTrailing(web.pathname, '/');
  if (!u.pathname.startsWith(`${base}/`)) return undefined;
  const parts = trimTrailing(u.pathname.slice(base.length + 1), '/')
    .replace(/\.git$/, '')
    .split('/');
  if (parts.length !== 2 || !parts.every((p) => /^[A-Za-z0-9_.-]+$/.test(p) && p !== '.' && p !== '..'))
    return undefined;
  return { owner: parts[0]!, name: parts[1]! };
}

export function createGitHubApp(settings: GitHubAppSettings, logger?: Logger) {
  const baseUrl = settings.apiUrl.replace(/\/+$/, '');
  // Octokit's own lines (a request and its status; never a token) go to the logger, failures at debug: they are
  // reported once, by whoever called.
  const quiet = () => undefined;
  const log = {
    debug: (msg: string) => logger?.debug({ component: 'github' }, msg) ?? quiet(),
    info: (msg: string) => logger?.debug({ component: 'github' }, msg) ?? quiet(),
    warn: (msg: string) => logger?.warn({ component: 'github' }, msg) ?? quiet(),
    error: (msg: string) => logger?.debug({ component: 'github' }, msg) ?? quiet(),
  };
  const app = new Octokit({
    baseUrl,
    log,
    authStrategy: createAppAuth,
    auth: { appId: settings.appId, privateKey: settings.privateKey },
    // No retries hidden in the client: a failure is reported once, with its reason.
    request: { retries: 0 },
  });
  const webHost = new URL(settings.webUrl).host.toLowerCase();

  async function installationToken(
    installationId: number,
    what: string,
    scope?: { repositoryNames: string[] },
  ): Promise<{ token: string; expiresAt?: string }> {
    try {
      const auth = (await app.auth({
        type: 'installation',
        installationId,
        // A new token every time (never the client's cache) and, for a build, only the repository it clones.
        refresh: true,
        ...(scope ? { repositoryNames: scope.repositoryNames, permissions: { contents: 'read' } } : {}),
      })) as { token: string; expiresAt?: string };
      return { token: auth.token, expiresAt: auth.expiresAt };
    } catch (err) {
      throw githubFailure(err, what);
    }
  }

  return {
    settings,
    /** Host of repository URLs (lower case, with port): repo_url of a GitHub integration must be on it. */
    webHost,
    installUrl(state: string): string | undefined {
      if (!settings.appSlug) return undefined;
      const u = new URL(
        `${settings.webUrl.replace(/\/+$/, '')}/apps/${encodeURIComponent(settings.appSlug)}/installations/new`,
      );
      u.searchParams.set('state', state);
      return u.toString();
    },
    /** The installation as the App sees it (App JWT). */
    async installation(installationId: number): Promise<GitHubInstallation> {
      try {
        const { data } = await app.rest.apps.getInstallation({ installation_id: installationId });
        const account = data.account && ('login' in data.account ? data.account.login : data.account.slug);
        return { id: data.id, account: account ?? String(data.id), createdAt: data.created_at };
      } catch (err) {
        throw githubFailure(err, `reading installation ${installationId}`);
      }
    },
    /**
     * The installations the user who signed in with `code` (the setup redirect's) can reach, asked with that
     * user's own token.
     */
    async userInstallations(code: string): Promise<number[]> {
      if (!settings.clientId || !settings.clientSecret) throw new GitHubError('The App has no OAuth client', 404);
      const oauth = createAppAuth({
        appId: settings.appId,
        privateKey: settings.privateKey,
        clientId: settings.clientId,
        clientSecret: settings.clientSecret,
        request: app.request.defaults({ baseUrl }),
      });
      let token: string;
      try {
        ({ token } = (await oauth({ type: 'oauth-user', code })) as { token: string });
      } catch (err) {
        throw githubFailure(err, 'exchanging the setup code for the installing user');
      }
      const user = new Octokit({ baseUrl, auth: token, log, request: { retries: 0 } });
      try {
        const list = await user.paginate(user.rest.apps.listInstallationsForAuthenticatedUser, { per_page: 100 });
        return list.map((i) => i.id);
      } catch (err) {
        throw githubFailure(err, "listing the installing user's installations");
      }
    },
    /** Every repository the installation can see (all pages). */
    async repositories(installationId: number): Promise<GitHubRepo[]> {
      const { token } = await installationToken(
        installationId,
        `listing the repositories of installation ${installationId}`,
      );
      const client = new Octokit({ baseUrl, auth: token, log, request: { retries: 0 } });
      try {
        const repos = await client.paginate(client.rest.apps.listReposAccessibleToInstallation, { per_page: 100 });
        return repos.map((r) => ({
          id: r.id,
          name: r.name,
          owner: r.owner.login,
          url: r.html_url,
          default_branch: r.default_branch ?? 'main',
        }));
      } catch (err) {
        throw githubFailure(err, `listing the repositories of installation ${installationId}`);
      } finally {
        await client.request('DELETE /installation/token').catch(() => undefined);
      }
    },
    /**
     * A fresh read-only token for cloning `repoUrl`, valid for that repository only. Refuses a URL that is not a
     * repository on the App's host; GitHub refuses (422) a repository the installation cannot see.
     */
    async cloneToken(installationId: number, repoUrl: string): Promise<{ token: string; expiresAt?: string }> {
      const repo = githubRepoOf(settings.webUrl, repoUrl);
      if (!repo) throw new GitHubError(`repo_url is not a repository URL on ${webHost}`, 422);
      return installationToken(installationId, `minting a token for ${repo.owner}/${repo.name}`, {
        repositoryNames: [repo.name],
      });
    },
    /** X-Hub-Signature-256 check (constant-time, in @octokit/webhooks-methods). */
    async verifyWebhook(payload: string, signature: string | undefined): Promise<boolean> {
      if (!settings.webhookSecret || !signature) return false;
      try {
        return await verify(settings.webhookSecret, payload, signature);
      } catch {
        return false;
      }
    },
  };
}

export type GitHubApp = ReturnType<typeof createGitHubApp>;
