// The GitHub App settings of a control plane, an operator (it mints clone tokens) and `agentplane dev`: flags and
// environment variables shared by the three commands. The private key and the webhook secret are best given as
// environment variables (a Secret in the chart); the key may also be a file.
import { readFileSync } from 'node:fs';
import type { PlainOption } from '../lib/cli-args.ts';
import { UsageError } from '../lib/cli-args.ts';
import { githubWebUrlOf, type GitHubAppSettings } from './github-app.ts';

export const githubAppOptions: Record<string, PlainOption> = {
  'github-app-id': {
    type: 'string',
    description: 'GitHub App id: enables GitHub integrations (installations, repository listing, build on push)',
    env: ['AGENTPLANE_GITHUB_APP_ID'],
  },
  'github-app-private-key-file': {
    type: 'string',
    description: "PEM file of the GitHub App's private key (or the PEM itself in AGENTPLANE_GITHUB_APP_PRIVATE_KEY)",
    env: ['AGENTPLANE_GITHUB_APP_PRIVATE_KEY_FILE'],
  },
  'github-app-slug': {
    type: 'string',
    description: "The App's slug (github.com/apps/<slug>): install/start answers its install link",
    env: ['AGENTPLANE_GITHUB_APP_SLUG'],
  },
  'github-app-client-id': {
    type: 'string',
    description:
      "The App's OAuth client id (with AGENTPLANE_GITHUB_APP_CLIENT_SECRET): the setup redirect's code must show the installing user can reach the installation",
    env: ['AGENTPLANE_GITHUB_APP_CLIENT_ID'],
  },
  'github-api-url': {
    type: 'string',
    description: 'GitHub REST API base URL (GitHub Enterprise Server: https://<host>/api/v3)',
    default: 'https://api.github.com',
    env: ['AGENTPLANE_GITHUB_API_URL'],
  },
  'github-web-url': {
    type: 'string',
    description:
      'Origin of repository URLs of GitHub integrations; default: from --github-api-url (github.com, or the GHES host)',
    env: ['AGENTPLANE_GITHUB_WEB_URL'],
  },
};

const httpUrl = (flag: string, v: string): string => {
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new UsageError(`${flag}: must be an http(s) URL`);
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new UsageError(`${flag}: must be an http(s) URL`);
  if (u.username || u.password || u.search || u.hash)
    throw new UsageError(`${flag}: must not carry credentials, a query or a fragment`);
  return v.replace(/\/+$/, '');
};

/**
 * The App's settings, or undefined when no App id is given. The webhook secret comes from
 * AGENTPLANE_GITHUB_WEBHOOK_SECRET only (environment), the key from the file flag or AGENTPLANE_GITHUB_APP_PRIVATE_KEY.
 */
export function githubAppSettingsFrom(
  pick: (name: string) => string | undefined,
  env: NodeJS.ProcessEnv,
): GitHubAppSettings | undefined {
  const appId = pick('github-app-id');
  if (!appId) return undefined;
  if (!/^\d+$/.test(appId)) throw new UsageError('--github-app-id: must be the numeric App id');
  const file = pick('github-app-private-key-file');
  let privateKey = env.AGENTPLANE_GITHUB_APP_PRIVATE_KEY;
  if (file) {
    try {
      privateKey = readFileSync(file, 'utf8');
    } catch {
      throw new UsageError(`--github-app-private-key-file: cannot read ${file}`);
    }
  }
  if (!privateKey || !/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(privateKey))
    throw new UsageError(
      '--github-app-id needs the App private key (PEM) in --github-app-private-key-file or AGENTPLANE_GITHUB_APP_PRIVATE_KEY',
    );
  const apiUrl = httpUrl('--github-api-url', pick('github-api-url') ?? 'https://api.github.com');
  const web = pick('github-web-url');
  const slug = pick('github-app-slug');
  if (slug !== undefined && !/^[a-z0-9][a-z0-9-]{0,99}$/i.test(slug))
    throw new UsageError('--github-app-slug: letters, digits and "-"');
  const webhookSecret = env.AGENTPLANE_GITHUB_WEBHOOK_SECRET || undefined;
  const clientId = pick('github-app-client-id');
  const clientSecret = env.AGENTPLANE_GITHUB_APP_CLIENT_SECRET || undefined;
  if (!clientId !== !clientSecret)
    throw new UsageError('--github-app-client-id and AGENTPLANE_GITHUB_APP_CLIENT_SECRET go together');
  return {
    appId,
    privateKey,
    apiUrl,
    webUrl: web ? httpUrl('--github-web-url', web) : githubWebUrlOf(apiUrl),
    ...(slug ? { appSlug: slug } : {}),
    ...(webhookSecret ? { webhookSecret } : {}),
    ...(clientId && clientSecret ? { clientId, clientSecret } : {}),
  };
}
