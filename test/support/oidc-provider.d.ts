// The few parts of oidc-provider (which ships no types) the auth service tests use.
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';

  type Client = { grantTypeAllowed(type: string): boolean };
  type Account = { accountId: string; claims(): Promise<Record<string, unknown>> };
  type Context = { body: unknown };

  export type Configuration = {
    clients?: Record<string, unknown>[];
    scopes?: string[];
    claims?: Record<string, string[]>;
    features?: Record<string, { enabled: boolean }>;
    issueRefreshToken?: (ctx: Context, client: Client, code: unknown) => Promise<boolean>;
    findAccount?: (ctx: Context, sub: string) => Promise<Account | undefined>;
  };

  export default class Provider {
    constructor(issuer: string, configuration?: Configuration);
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    on(event: 'grant.success', listener: (ctx: Context) => void): this;
  }
}
