// The auth service's answers, inputs and stored records, and the errors it answers with.
import { AppError } from '../../../lib/errors.ts';
import type { ProviderMetadata, TokenAuthMethod } from './oauth.ts';

export type ProviderOut = {
  provider_id: string;
  name: string;
  issuer_url: string | null;
  auth_url: string;
  token_url: string;
  client_id: string;
  has_client_secret: boolean;
  token_auth_method: TokenAuthMethod;
  scopes: string[];
  created_at: string;
  updated_at: string;
};

export type ProviderCreateInput = {
  provider_id: string;
  name?: string;
  issuer_url?: string | null;
  auth_url?: string | null;
  token_url?: string | null;
  client_id: string;
  client_secret?: string | null;
  token_auth_method?: TokenAuthMethod;
  scopes?: string[];
};

export type ProviderPatchInput = Partial<Omit<ProviderCreateInput, 'provider_id'>>;

export type TokenOut = {
  id: string;
  provider_id: string;
  user_id: string;
  scopes: string[];
  expires_at: string | null;
  created_at: string;
  updated_at: string;
};

export type AuthenticateInput = { provider: string; scopes: string[]; user_id: string };

export type AuthenticateOut =
  | { status: 'completed'; token: string; expires_at: string | null; url: null; auth_id: null }
  | { status: 'pending'; url: string; auth_id: string; token: null };

export type WaitOut =
  | { status: 'completed'; auth_id: string; token: string; expires_at: string | null }
  | { status: 'pending' | 'timeout' | 'not_found'; auth_id: string }
  | { status: 'failed'; auth_id: string; error: string };

/** What the callback page tells the user; `cookie`: a Set-Cookie that ends the flow's browser binding. */
export type CallbackResult = ({ ok: true } | { ok: false; status: 400 | 502; message: string }) & { cookie?: string };

export type ProviderRecord = {
  provider_id: string;
  name: string;
  issuer_url: string | null;
  metadata: ProviderMetadata;
  client_id: string;
  token_auth_method: TokenAuthMethod;
  scopes: string[];
  created_at: string;
  updated_at: string;
};

export type TokenRecord = {
  id: string;
  provider_id: string;
  user_id: string;
  scopes: string[];
  expires_at: string | null;
  created_at: string;
  updated_at: string;
};
export type TokenSecret = { access_token: string; refresh_token?: string; id_token?: string; token_type: string };

/** 503: the auth service has no encryption key configured. */
export class AuthServiceUnavailableError extends AppError {
  constructor(message: string) {
    super(message, 503);
  }
}

/** 429: too many authorizations in progress in one workspace. */
export class TooManyRequestsError extends AppError {
  constructor(message: string) {
    super(message, 429);
  }
}

/** 502: the provider failed; the message names what failed, never a secret. */
export class BadGatewayError extends AppError {
  constructor(message: string) {
    super(message, 502);
  }
}
