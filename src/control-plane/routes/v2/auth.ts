// Auth Service v2: OAuth providers, authentication flows on behalf of end users, stored tokens. Registered under
// /v2 and /api-host/v2. `authRoutes` need an API key or a deployment token (see services/auth/principal.ts);
// `authCallbackRoutes` are reached by the end user's browser, which carries neither: the state is their only proof.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AuthService } from '../../services/auth/index.ts';
import type { CallbackResult } from '../../services/auth/types.ts';

const ErrorBody = z.object({ detail: z.unknown() });
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
const noControl = /^[^\p{Cc}]*$/u;

const ProviderId = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/, '1-63 letters, digits, "_", "." or "-", starting with a letter or digit');
/** RFC 6749 section 3.3 scope-token characters. */
const Scope = z
  .string()
  .regex(/^[\x21\x23-\x5B\x5D-\x7E]{1,200}$/, 'a scope token (printable ASCII without spaces, " or \\)');
const Scopes = z.array(Scope).max(50);
const Url = z.string().max(2048);
const TokenAuthMethod = z.enum(['client_secret_basic', 'client_secret_post', 'none']);

const ProviderOut = z.object({
  provider_id: z.string(),
  name: z.string(),
  issuer_url: z.string().nullable(),
  auth_url: z.string(),
  token_url: z.string(),
  client_id: z.string(),
  has_client_secret: z.boolean().describe('The client secret itself is write-only'),
  token_auth_method: TokenAuthMethod,
  scopes: z.array(z.string()),
  created_at: z.string(),
  updated_at: z.string(),
});

const providerFields = {
  name: z.string().min(1).max(200).regex(noControl, 'must not contain control characters'),
  issuer_url: Url.nullable().describe('OpenID Connect / RFC 8414 issuer: endpoints come from discovery'),
  auth_url: Url.nullable().describe('Authorization endpoint, when the provider has no discovery'),
  token_url: Url.nullable().describe('Token endpoint, when the provider has no discovery'),
  client_id: z.string().min(1).max(512).regex(noControl, 'must not contain control characters'),
  client_secret: z
    .string()
    .min(1)
    .max(4096)
    .regex(noControl, 'must not contain control characters')
    .nullable()
    .describe('Write-only: never returned'),
  token_auth_method: TokenAuthMethod.describe('How the client authenticates at the token endpoint'),
  scopes: Scopes.describe('Default scopes, asked for in every authorization'),
};

const ProviderCreate = z
  .object({
    provider_id: ProviderId,
    name: providerFields.name.optional(),
    issuer_url: providerFields.issuer_url.optional(),
    auth_url: providerFields.auth_url.optional(),
    token_url: providerFields.token_url.optional(),
    client_id: providerFields.client_id,
    client_secret: providerFields.client_secret.optional(),
    token_auth_method: providerFields.token_auth_method.optional(),
    scopes: providerFields.scopes.optional(),
  })
  .strict();

const ProviderPatch = z
  .object({
    name: providerFields.name.optional(),
    issuer_url: providerFields.issuer_url.optional(),
    auth_url: providerFields.auth_url.optional(),
    token_url: providerFields.token_url.optional(),
    client_id: providerFields.client_id.optional(),
    client_secret: providerFields.client_secret.optional(),
    token_auth_method: providerFields.token_auth_method.optional(),
    scopes: providerFields.scopes.optional(),
  })
  .strict();

const ProviderParams = z.object({ provider_id: ProviderId });

const UserId = z.string().min(1).max(256).regex(noControl, 'must not contain control characters');

const AuthenticateBody = z
  .object({
    provider: ProviderId,
    scopes: Scopes,
    user_id: UserId,
    ls_user_id: z.string().max(256).nullable().optional(),
    agent_id: z.string().max(256).nullable().optional(),
  })
  .strict();

const AuthenticateOut = z.object({
  status: z.enum(['completed', 'pending']),
  url: z.string().nullable().describe('Where the user grants access (pending)'),
  auth_id: z.string().nullable().describe('Pass to GET /v2/auth/wait/{auth_id} (pending)'),
  token: z.string().nullable().describe('The access token (completed)'),
  expires_at: z.string().nullable().optional(),
});

const WaitOut = z.object({
  status: z.enum(['completed', 'pending', 'timeout', 'not_found', 'failed']),
  auth_id: z.string(),
  token: z.string().optional(),
  expires_at: z.string().nullable().optional(),
  error: z.string().optional(),
});

const TokenOut = z.object({
  id: z.string(),
  provider_id: z.string(),
  user_id: z.string(),
  scopes: z.array(z.string()),
  expires_at: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});

const TokenFilter = z.object({ provider_id: ProviderId.optional(), user_id: UserId.optional() }).strict();

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
          response: { 200: z.object({ resources: z.array(ProviderOut) }), ...errors },
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
          params: z.object({ auth_id: z.string().max(100) }),
          querystring: z.object({ timeout: z.coerce.number().int().min(0).max(60).default(30) }),
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
          response: { 200: z.object({ resources: z.array(TokenOut) }), ...errors },
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
          params: z.object({ token_id: z.string().uuid() }),
          response: { 204: z.null(), ...errors },
        },
      },
      async (req, reply) => {
        await service.deleteToken(tenantOf(req), req.params.token_id);
        return reply.code(204).send(null);
      },
    );
  };

const CallbackParams = z.object({ provider_id: z.string().max(100) });
/** The redirect's parameters (code, state, iss, error...): strings only, bounded. */
const CallbackQuery = z.record(z.string().max(100), z.string().max(8192));

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
          querystring: z.object({ state: z.string().max(300) }),
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
