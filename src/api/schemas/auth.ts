// Bodies, answers, queries and path parameters of the Auth Service v2 API: OAuth providers, authenticate / wait,
// stored tokens, and the browser-facing start link and provider callback.
import { z } from 'zod';
import { noControl } from './common.ts';

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

export const ProviderOut = z.object({
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

export const ProviderCreate = z
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

export const ProviderPatch = z
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

export const ProviderParams = z.object({ provider_id: ProviderId });

const UserId = z.string().min(1).max(256).regex(noControl, 'must not contain control characters');

export const AuthenticateBody = z
  .object({
    provider: ProviderId,
    scopes: Scopes,
    user_id: UserId,
    ls_user_id: z.string().max(256).nullable().optional(),
    agent_id: z.string().max(256).nullable().optional(),
  })
  .strict();

export const AuthenticateOut = z.object({
  status: z.enum(['completed', 'pending']),
  url: z.string().nullable().describe('Where the user grants access (pending)'),
  auth_id: z.string().nullable().describe('Pass to GET /v2/auth/wait/{auth_id} (pending)'),
  token: z.string().nullable().describe('The access token (completed)'),
  expires_at: z.string().nullable().optional(),
});

export const WaitOut = z.object({
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

export const TokenFilter = z.object({ provider_id: ProviderId.optional(), user_id: UserId.optional() }).strict();

export const ProviderList = z.object({ resources: z.array(ProviderOut) });

export const AuthWaitParams = z.object({ auth_id: z.string().max(100) });
export const AuthWaitQuery = z.object({ timeout: z.coerce.number().int().min(0).max(60).default(30) });

export const TokenList = z.object({ resources: z.array(TokenOut) });
export const TokenParams = z.object({ token_id: z.string().uuid() });

export const CallbackParams = z.object({ provider_id: z.string().max(100) });
/** The redirect's parameters (code, state, iss, error...): strings only, bounded. */
export const CallbackQuery = z.record(z.string().max(100), z.string().max(8192));

export const AuthStartQuery = z.object({ state: z.string().max(300) });
