// CORS for browsers calling the agent server (the SDK in a web app). Without "http.cors" in langgraph.json any
// origin may call, as on the reference servers; preflights are answered here, before authentication. Hand-written
// because @fastify/cors is not a dependency and the rules fit in one hook.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

export interface CorsConfig {
  allow_origins?: string[];
  allow_origin_regex?: string;
  allow_methods?: string[];
  allow_headers?: string[];
  allow_credentials?: boolean;
  expose_headers?: string[];
  max_age?: number;
}

/** Response headers the SDK reads: run ids (Content-Location), stream reconnects (Location), paging. */
export const SDK_RESPONSE_HEADERS = ['Content-Location', 'Location', 'X-Pagination-Next', 'X-Pagination-Total'];
const DEFAULT_METHODS = ['GET', 'HEAD', 'PUT', 'POST', 'DELETE', 'PATCH'];

interface Policy {
  origin(origin: string): string | null;
  methods: string;
  /** null: echo the preflight's Access-Control-Request-Headers (any header). */
  headers: string | null;
  credentials: boolean;
  expose: string;
  maxAge: number | null;
}

export function corsPolicy(cfg: CorsConfig | undefined): Policy {
  const wildcard = !cfg || (!cfg.allow_origin_regex && (cfg.allow_origins ?? []).includes('*'));
  const credentials = cfg?.allow_credentials ?? false;
  const regex = cfg?.allow_origin_regex ? new RegExp(`^(?:${cfg.allow_origin_regex})$`) : null;
  const listed = new Set(cfg?.allow_origins ?? []);
  // The SDK's headers stay readable even when a project lists its own.
  const expose = [...new Set([...(cfg?.expose_headers ?? []), ...SDK_RESPONSE_HEADERS].map((h) => h.toLowerCase()))];
  const allowHeaders = cfg?.allow_headers;
  return {
    origin(origin) {
      // With credentials a literal "*" is refused by browsers: echo the origin instead.
      if (wildcard) return credentials ? origin : '*';
      if (listed.has(origin) || regex?.test(origin)) return origin;
      return null;
    },
    methods: (cfg?.allow_methods?.includes('*') || !cfg?.allow_methods ? DEFAULT_METHODS : cfg.allow_methods).join(
      ', ',
    ),
    headers: !allowHeaders || allowHeaders.includes('*') ? null : allowHeaders.join(', '),
    credentials,
    expose: expose.join(', '),
    maxAge: cfg?.max_age ?? (cfg ? 600 : null),
  };
}

function header(req: FastifyRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Adds CORS headers to every answer to a cross-origin request and answers preflights (204) itself. */
export function installCors(app: FastifyInstance, cfg: CorsConfig | undefined): void {
  const policy = corsPolicy(cfg);
  // Callback style: an async hook costs every request a promise and a microtask turn.
  app.addHook('onRequest', (req: FastifyRequest, reply: FastifyReply, done: () => void) => {
    const origin = header(req, 'origin');
    if (!origin) return done();
    const allowed = policy.origin(origin);
    // Headers go on the raw response too, so streamed (hijacked) answers carry them.
    const set = (name: string, value: string) => {
      reply.header(name, value);
      reply.raw.setHeader(name, value);
    };
    if (allowed !== '*') set('Vary', 'Origin');
    const preflight = req.method === 'OPTIONS' && header(req, 'access-control-request-method') !== undefined;
    if (!allowed) {
      // An answer sent from a callback hook ends the request there (done is not called).
      if (preflight) return void reply.code(400).send({ detail: `CORS: origin ${origin} is not allowed` });
      return done();
    }
    set('Access-Control-Allow-Origin', allowed);
    if (policy.credentials) set('Access-Control-Allow-Credentials', 'true');
    if (!preflight) {
      set('Access-Control-Expose-Headers', policy.expose);
      return done();
    }
    reply.header('Access-Control-Allow-Methods', policy.methods);
    const requested = header(req, 'access-control-request-headers');
    const allowHeaders = policy.headers ?? requested;
    if (allowHeaders) reply.header('Access-Control-Allow-Headers', allowHeaders);
    if (policy.maxAge !== null) reply.header('Access-Control-Max-Age', String(policy.maxAge));
    // Chrome's Private Network Access: a page on a public origin (LangGraph Studio) calling a server on a private
    // address or localhost first asks in the preflight; without the answer Chrome blocks the call. Only an origin
    // the policy already allows gets it, so http.cors stays the one list of who may call.
    if (header(req, 'access-control-request-private-network') === 'true') {
      reply.header('Access-Control-Allow-Private-Network', 'true');
    }
    reply.code(204).send();
  });
}
