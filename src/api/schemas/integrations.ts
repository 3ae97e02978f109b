// Bodies, answers, queries and path parameters of the Integrations v1 API: git credential integrations, GitHub App
// installations and their repositories, and the push webhooks' answers.
import { z } from 'zod';
import { canonicalHost, knownHostsProblem } from '../../git/credentials.ts';
import { noControl } from './common.ts';

export const IntegrationOut = z.object({
  id: z.string(),
  name: z.string(),
  type: z.enum(['git', 'github']),
  host: z.string(),
  username: z.string().nullable(),
  auth: z.enum(['token', 'ssh', 'github_app']),
  installation_id: z.number().int().nullable(),
  account: z.string().nullable(),
  webhook: z.boolean(),
  created_at: z.string(),
});
export const IntegrationCreated = IntegrationOut.extend({
  webhook_secret: z
    .string()
    .optional()
    .describe('Only when the control plane made it (webhook_secret: true); shown once'),
});

export const IntegrationCreate = z
  .object({
    name: z.string().min(1).max(200).regex(noControl, 'must not contain control characters'),
    type: z.literal('git').default('git'),
    host: z
      .string()
      .max(260)
      .refine(
        (h) => canonicalHost(h) !== undefined,
        'a repository host name, optionally with :port (no scheme, path or credentials)',
      ),
    username: z
      .string()
      .min(1)
      .max(200)
      .regex(/^[^\p{Cc}:]*$/u, 'must not contain ":" or control characters')
      .nullable()
      .optional(),
    token: z
      .string()
      .min(1)
      .max(16_384)
      .regex(noControl, 'must not contain control characters')
      .optional()
      .describe('Write-only: never returned. HTTPS token (or password); or give ssh_private_key'),
    ssh_private_key: z
      .string()
      .max(16_384)
      .regex(
        /^\s*-----BEGIN ([A-Z]+ )?PRIVATE KEY-----\r?\n[\s\S]+\r?\n-----END ([A-Z]+ )?PRIVATE KEY-----\s*$/,
        'must be a PEM / OpenSSH private key without a passphrase',
      )
      .optional()
      .describe('Write-only: never returned. Used with repo_url ssh://... or user@host:path'),
    known_hosts: z
      .string()
      .max(65_536)
      .superRefine((v, ctx) => {
        const p = knownHostsProblem(v);
        if (p) ctx.addIssue({ code: 'custom', message: p });
      })
      .optional()
      .describe('Host keys git checks the server against (StrictHostKeyChecking=yes); required with ssh_private_key'),
    webhook_secret: z
      .union([z.literal(true), z.string().min(16).max(256).regex(noControl, 'must not contain control characters')])
      .optional()
      .describe('true: a secret is made and returned once; or the secret itself (16+ characters), never returned'),
  })
  .strict()
  .superRefine((v, ctx) => {
    const ssh = v.ssh_private_key !== undefined;
    if (ssh === (v.token !== undefined))
      ctx.addIssue({ code: 'custom', path: ['token'], message: 'give exactly one of token and ssh_private_key' });
    if (ssh && v.known_hosts === undefined)
      ctx.addIssue({ code: 'custom', path: ['known_hosts'], message: 'required with ssh_private_key' });
    if (!ssh && v.known_hosts !== undefined)
      ctx.addIssue({ code: 'custom', path: ['known_hosts'], message: 'only with ssh_private_key' });
  });

export const IntegrationParams = z.object({ integration_id: z.string().uuid() });
const InstallationId = z.coerce.number().int().positive().max(Number.MAX_SAFE_INTEGER);
const Installation = z.object({ id: z.string(), installation_id: z.number().int(), name: z.string() });
const Repo = z.object({
  host_integration_id: z.string(),
  id: z.number().int(),
  name: z.string(),
  owner: z.string(),
  url: z.string(),
  default_branch: z.string(),
});

export const InstallationList = z.array(Installation);
export const RepoList = z.array(Repo);

export const IntegrationList = z.object({ resources: z.array(IntegrationOut) });

export const GitHubInstallRegister = z
  .object({
    installation_id: InstallationId,
    name: z.string().min(1).max(200).regex(noControl, 'must not contain control characters').optional(),
  })
  .strict();

export const GitHubInstallStart = z
  .object({
    account: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/, 'a GitHub user or organization login')
      .describe('The GitHub user or organization the App will be installed on'),
  })
  .strict();

export const GitHubInstallStarted = z.object({
  state: z.string(),
  install_url: z.string().nullable(),
  expires_at: z.string(),
  account: z.string(),
});

export const PushAnswer = z.union([
  z.object({
    revisions: z.array(z.object({ deployment_id: z.string(), revision_id: z.string() })),
    repeated: z.number().int(),
  }),
  z.object({ ignored: z.string() }),
]);

export const WebhookParams = z.object({ integration_id: z.string().max(100) });

export const GitHubSetupQuery = z.object({
  installation_id: InstallationId,
  state: z.string().min(1).max(200),
  setup_action: z.string().max(50).optional(),
  code: z.string().min(1).max(200).optional(),
});
