// Auth Service v2: OAuth providers, authentication flows on behalf of end users, stored tokens. Registered under
// /v2 and /api-host/v2. `authRoutes` need an API key or a deployment token (see services/oauth/principal.ts);
// `authCallbackRoutes` are reached by the end user's browser, which carries neither: the state is their only proof.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AuthService } from '../../services/oauth/index.ts';
import type { CallbackResult } from '../../services/oauth/types.ts';
import {
  AuthStartQuery,
  AuthWaitParams,
  AuthWaitQuery,
  AuthenticateBody,
  AuthenticateOut,
  CallbackParams,
  CallbackQuery,
  ProviderCreate,
  ProviderList,
  ProviderOut,
  ProviderParams,
  ProviderPatch,
  TokenFilter,
  TokenList,
  TokenParams,
  WaitOut,
} from '../../../api/schemas/auth.ts';
import { ErrorBody } from '../../../api/schemas/common.ts';

const errors = {
  429: ErrorBody,
  401: ErrorBody,
  403: ErrorBody,
  404: ErrorBody,
  409: ErrorBody,
  422: ErrorBody,
  502: ErrorBody,
  503: ErrorBody,
};
const security = [{ apiKey: [], tenantId: [] }];
const tags = ['auth'];

const tenantOf = (req: FastifyRequest): string => req.principal!.tenant;

export const authRoutes =
  (service: AuthService): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/auth/providers',
      {
        schema: {
          tags,
          summary: 'Create an OAuth provider',
          security,
          body: ProviderCreate,
          response: { 201: ProviderOut, ...errors },
        },
      },
      async (req, reply) => reply.code(201).send(await service.createProvider(tenantOf(req), req.body)),
    );
    app.get(
      '/auth/providers',
      {
        schema: {
          tags,
          summary: 'List OAuth providers',
          security,
          response: { 200: ProviderList, ...errors },
        },
      },
      async (req) => ({ resources: await service.listProviders(tenantOf(req)) }),
    );
    app.get(
      '/auth/providers/:provider_id',
      {
        schema: {
          tags,
          summary: 'Get an OAuth provider',
          security,
          params: ProviderParams,
          response: { 200: ProviderOut, ...errors },
        },
      },
      async (req) => service.getProvider(tenantOf(req), req.params.provider_id),
    );
    app.patch(
      '/auth/providers/:provider_id',
      {
        schema: {
          tags,
          summary: 'Update an OAuth provider',
          security,
          params: ProviderParams,
          body: ProviderPatch,
          response: { 200: ProviderOut, ...errors },
        },
      },
      async (req) => service.updateProvider(tenantOf(req), req.params.provider_id, req.body),
    );
    app.delete(
      '/auth/providers/:provider_id',
      {
        schema: {
          tags,
          summary: 'Delete an OAuth provider and its tokens',
          security,
          params: ProviderParams,
          response: { 204: z.null(), ...errors },
        },
      },
      async (req, reply) => {
        await service.deleteProvider(tenantOf(req), req.params.provider_id);
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/auth/authenticate',
      {
        schema: {
          tags,
          summary: "A user's token for a provider and scopes, or the URL where the user grants it",
          security,
          body: AuthenticateBody,
          response: { 200: AuthenticateOut, ...errors },
        },
      },
      async (req) => service.authenticate(tenantOf(req), req.body),
    );
    app.get(
      '/auth/wait/:auth_id',
      {
        schema: {
          tags,
          summary: 'Wait (long poll) until a pending authentication completes',
          security,
          params: AuthWaitParams,
          querystring: AuthWaitQuery,
          response: { 200: WaitOut, ...errors },
        },
      },
      async (req) => {
        const abort = new AbortController();
        req.raw.once('close', () => abort.abort());
        return service.wait(tenantOf(req), req.params.auth_id, req.query.timeout, abort.signal);
      },
    );

    app.get(
      '/auth/tokens',
      {
        schema: {
          tags,
          summary: 'List stored tokens (never the tokens themselves)',
          security,
          querystring: TokenFilter,
          response: { 200: TokenList, ...errors },
        },
      },
      async (req) => ({ resources: await service.listTokens(tenantOf(req), req.query) }),
    );
    app.delete(
      '/auth/tokens',
      {
        schema: {
          tags,
          summary: 'Delete stored tokens (all, or those of a provider / user)',
          security,
          querystring: TokenFilter,
          response: { 204: z.null(), ...errors },
        },
      },
      async (req, reply) => {
        await service.deleteTokens(tenantOf(req), req.query);
        return reply.code(204).send(null);
      },
    );
    app.delete(
      '/auth/tokens/:token_id',
      {
        schema: {
          tags,
          summary: 'Delete a stored token',
          security,
          params: TokenParams,
          response: { 204: z.null(), ...errors },
        },
      },
      async (req, reply) => {
        await service.deleteToken(tenantOf(req), req.params.token_id);
        return reply.code(204).send(null);
      },
    );
  };

/**
 * The provider's redirect, opened by the end user's browser. No API key: the state binds the request to a flow of
 * one workspace, user and provider, once. Request logging is off here (the URL carries the code and the state).
 */
export const authCallbackRoutes =
  (service: AuthService): FastifyPluginAsyncZod =>
  async (app) => {
    // response_mode=form_post sends the parameters as a form.
    app.addContentTypeParser(
      'application/x-www-form-urlencoded',
      { parseAs: 'string', bodyLimit: 64 * 1024 },
      (_req, body, done) => done(null, Object.fromEntries(new URLSearchParams(body as string))),
    );
    const schema = {
      tags,
      summary: "The OAuth provider's redirect (opened by the user's browser; authenticated by state, not by API key)",
      params: CallbackParams,
    };
    app.get(
      '/auth/callback/:provider_id',
      { logLevel: 'warn', schema: { ...schema, querystring: CallbackQuery } },
      async (req, reply) => page(reply, await service.callback(req.params.provider_id, req.query, req.headers.cookie)),
    );
    app.post(
      '/auth/callback/:provider_id',
      { logLevel: 'warn', schema: { ...schema, body: CallbackQuery } },
      async (req, reply) => page(reply, await service.callback(req.params.provider_id, req.body, req.headers.cookie)),
    );
    // The link an agent hands its user (authenticate's `url`): binds the flow to this browser, then on to the provider.
    app.get(
      '/auth/start',
      {
        logLevel: 'warn',
        schema: {
          tags,
          summary:
            'The sign-in link a user opens: binds the flow to this browser (a cookie) and redirects to the provider',
          querystring: AuthStartQuery,
        },
      },
      async (req, reply) => {
        const result = await service.start(req.query.state, req.headers.cookie);
        if (!result.ok) return page(reply, result);
        if (result.cookie) reply.header('set-cookie', result.cookie);
        return reply
          .code(302)
          .header('location', result.location)
          .header('cache-control', 'no-store')
          .header('referrer-policy', 'no-referrer')
          .send();
      },
    );
  };

function page(reply: FastifyReply, result: CallbackResult) {
  if (result.cookie) reply.header('set-cookie', result.cookie);
  const title = result.ok ? 'Signed in' : 'Sign-in failed';
  const text = result.ok ? 'Access was granted. You can close this page and return to the agent.' : result.message;
  return reply
    .code(result.ok ? 200 : result.status)
    .header('content-type', 'text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .header('referrer-policy', 'no-referrer')
    .header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'")
    .send(
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${title}</title>` +
        '<meta name="viewport" content="width=device-width, initial-scale=1">' +
        '<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}</style>' +
        `</head><body><h1>${title}</h1><p>${escapeHtml(text)}</p></body></html>`,
    );
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
