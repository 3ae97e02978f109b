// Integrations v1: git credentials (HTTPS token or SSH key) and GitHub App installations of a workspace, under /v1
// and /api-host/v1 with the same authentication as /v2. Answers never carry a token or a key. The webhooks and the
// App's setup redirect are called by GitHub / a git server / a browser without an API key: `integrationHookRoutes`.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ForbiddenError } from '../../../lib/errors.ts';
import type { IntegrationService } from '../../services/integrations/index.ts';
import type { PushWebhooks } from '../../services/integrations-webhooks.ts';
import {
  GitHubInstallRegister,
  GitHubInstallStart,
  GitHubInstallStarted,
  GitHubSetupQuery,
  InstallationList,
  IntegrationCreate,
  IntegrationCreated,
  IntegrationList,
  IntegrationOut,
  IntegrationParams,
  PushAnswer,
  RepoList,
  WebhookParams,
} from '../../../api/schemas/integrations.ts';
import { ErrorBody } from '../../../api/schemas/common.ts';

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
          response: { 200: IntegrationList, ...errors },
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
          response: { 200: InstallationList, ...errors },
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
          body: GitHubInstallRegister,
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
          body: GitHubInstallStart,
          response: { 201: GitHubInstallStarted, ...errors },
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
          response: { 200: RepoList, ...errors },
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
          params: WebhookParams,
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
          querystring: GitHubSetupQuery,
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
