// Integrations v1: git credentials (HTTPS token or SSH key) and GitHub App installations of a workspace, under /v1
// and /api-host/v1 with the same authentication as /v2. Answers never carry a token or a key. The webhooks and the
// App's setup redirect are called by GitHub / a git server / a browser without an API key: `integrationHookRoutes`.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ForbiddenError } from '../../../lib/errors.ts';
import { canonicalHost, knownHostsProblem } from '../../../git/credentials.ts';
import type { IntegrationService } from '../../services/integrations/index.ts';
import type { PushWebhooks } from '../../services/integrations-webhooks.ts';

const ErrorBody = z.object({ detail: z.unknown() });
const errors = {
  401: ErrorBody,
  403: ErrorBody,
  404: ErrorBody,
  409: ErrorBody,
  422: ErrorBody,
  502: ErrorBody,
  503: ErrorBody,
};
const security = [{ apiKey: [], tenantId: [] }];
const noControl = /^[^\p{Cc}]*$/u;

const IntegrationOut = z.object({
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
const IntegrationCreated = IntegrationOut.extend({
  webhook_secret: z
    .string()
    .optional()
    .describe('Only when the control plane made it (webhook_secret: true); shown once'),
});

const IntegrationCreate = z
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

const IntegrationParams = z.object({ integration_id: z.string().uuid() });
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

const tenantOf = (req: FastifyRequest): string => req.principal!.tenant;

export const integrationRoutes =
  (service: IntegrationService): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/integrations',
      {
        schema: {
          tags: ['integrations'],
          summary: 'Create a git credential integration (HTTPS token or SSH key)',
          security,
          body: IntegrationCreate,
          response: { 201: IntegrationCreated, ...errors },
        },
      },
      async (req, reply) => reply.code(201).send(await service.create(tenantOf(req), req.body)),
    );
    app.get(
      '/integrations',
      {
        schema: {
          tags: ['integrations'],
          summary: 'List integrations',
          security,
          response: { 200: z.object({ resources: z.array(IntegrationOut) }), ...errors },
        },
      },
      async (req) => ({ resources: await service.list(tenantOf(req)) }),
    );

    // ---- GitHub App ----
    app.get(
      '/integrations/github/install',
      {
        schema: {
          tags: ['integrations'],
          summary: "The workspace's GitHub App installations",
          security,
          response: { 200: z.array(Installation), ...errors },
        },
      },
      async (req) => service.githubInstallations(tenantOf(req)),
    );
    app.post(
      '/integrations/github/install',
      {
        schema: {
          tags: ['integrations'],
          summary: 'Register a GitHub App installation by id (admin keys only)',
          security,
          body: z
            .object({
              installation_id: InstallationId,
              name: z.string().min(1).max(200).regex(noControl, 'must not contain control characters').optional(),
            })
            .strict(),
          response: { 201: IntegrationOut, ...errors },
        },
      },
      async (req, reply) => {
        // The id alone does not show who installed the App; workspaces use the setup redirect (its state) instead.
        if (!req.principal!.admin)
          throw new ForbiddenError('Registering an installation by id needs an admin key; use install/start.');
        return reply
          .code(201)
          .send(await service.registerGitHub(tenantOf(req), req.body.installation_id, req.body.name));
      },
    );
    app.post(
      '/integrations/github/install/start',
      {
        schema: {
          tags: ['integrations'],
          summary:
            "A single-use state for the App's setup URL (bound to this workspace and to the GitHub account the App is installed on) and the install link",
          security,
          body: z
            .object({
              account: z
                .string()
                .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/, 'a GitHub user or organization login')
                .describe('The GitHub user or organization the App will be installed on'),
            })
            .strict(),
          response: {
            201: z.object({
              state: z.string(),
              install_url: z.string().nullable(),
              expires_at: z.string(),
              account: z.string(),
            }),
            ...errors,
          },
        },
      },
      async (req, reply) => reply.code(201).send(await service.startGitHubInstall(tenantOf(req), req.body.account)),
    );
    app.get(
      '/integrations/github/:integration_id/repos',
      {
        schema: {
          tags: ['integrations'],
          summary: 'Repositories the installation can see (all pages)',
          security,
          params: IntegrationParams,
          response: { 200: z.array(Repo), ...errors },
        },
      },
      async (req) => service.githubRepos(tenantOf(req), req.params.integration_id),
    );

    app.get(
      '/integrations/:integration_id',
      {
        schema: {
          tags: ['integrations'],
          summary: 'Get an integration',
          security,
          params: IntegrationParams,
          response: { 200: IntegrationOut, ...errors },
        },
      },
      async (req) => service.get(tenantOf(req), req.params.integration_id),
    );
    app.delete(
      '/integrations/:integration_id',
      {
        schema: {
          tags: ['integrations'],
          summary: 'Delete an integration',
          security,
          params: IntegrationParams,
          response: { 204: z.null(), ...errors },
        },
      },
      async (req, reply) => {
        await service.delete(tenantOf(req), req.params.integration_id);
        return reply.code(204).send(null);
      },
    );
  };

const PushAnswer = z.union([
  z.object({
    revisions: z.array(z.object({ deployment_id: z.string(), revision_id: z.string() })),
    repeated: z.number().int(),
  }),
  z.object({ ignored: z.string() }),
]);

const headersOf = (req: FastifyRequest): Record<string, string | undefined> =>
  Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v[0] : v]));

/** Routes without an API key: each proves itself (HMAC signature, single-use state). */
export const integrationHookRoutes =
  (service: IntegrationService, hooks: PushWebhooks): FastifyPluginAsyncZod =>
  async (app) => {
    // Signatures are over the exact bytes: these routes read the body as text and parse it themselves.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', { parseAs: 'string', bodyLimit: 1024 * 1024 }, (_req, body, done) =>
      done(null, body),
    );
    const text = (b: unknown) => (typeof b === 'string' ? b : '');
    app.post(
      '/integrations/github/webhook',
      {
        schema: {
          tags: ['integrations'],
          summary: "The GitHub App's webhook (X-Hub-Signature-256): a push builds deployments with build_on_push",
          response: { 200: PushAnswer, 400: ErrorBody, 401: ErrorBody },
        },
      },
      async (req) => hooks.github(text(req.body), headersOf(req)),
    );
    app.post(
      '/integrations/:integration_id/webhook',
      {
        schema: {
          tags: ['integrations'],
          summary: "A git integration's push webhook (X-Hub-Signature-256 with its webhook secret)",
          params: z.object({ integration_id: z.string().max(100) }),
          response: { 200: PushAnswer, 400: ErrorBody, 401: ErrorBody },
        },
      },
      async (req) => hooks.generic(req.params.integration_id, text(req.body), headersOf(req)),
    );
    app.get(
      '/integrations/github/setup',
      {
        schema: {
          tags: ['integrations'],
          summary:
            "The GitHub App's setup URL: GitHub redirects here after an install, with the state of install/start",
          querystring: z.object({
            installation_id: InstallationId,
            state: z.string().min(1).max(200),
            setup_action: z.string().max(50).optional(),
            code: z.string().min(1).max(200).optional(),
          }),
          // 200, as every GET of the API (the integration is made by the redirect GitHub sends the browser on).
          response: {
            200: IntegrationOut,
            404: ErrorBody,
            409: ErrorBody,
            422: ErrorBody,
            502: ErrorBody,
            503: ErrorBody,
          },
        },
      },
      async (req) => service.completeGitHubInstall(req.query.state, req.query.installation_id, req.query.code),
    );
  };
