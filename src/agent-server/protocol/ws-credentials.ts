// Who may open a protocol WebSocket, and with which credential. A browser cannot set headers on a WebSocket, and the
// SDK's WebSocket transport sends none (it refuses defaultHeaders): a page passes its credential as a subprotocol
// through the transport's webSocketFactory, next to a subprotocol of its choice for the server to select, e.g.
//   new WebSocket(url, ['agentplane', `x-api-key.${key}`])      -> X-Api-Key: <key>
//   new WebSocket(url, ['agentplane', `bearer.${token}`])       -> Authorization: Bearer <token> (custom auth)
// Before any auth hook runs, the credential becomes the header it stands for (a header sent as well wins), so
// every check of the API applies unchanged. It never appears in a URL (nor in logs of one), the server never
// selects a credential as the connection's subprotocol (it would echo it back), and once the upgrade is authorized
// it is forgotten (forgetCredentials), so no run started over the socket carries it in its configurable.
//
// Browsers apply no CORS to WebSockets and send their cookies (and cached HTTP credentials) with any page's
// upgrade: an upgrade from another origin is held to the deployment's CORS policy (http.cors) as the same call over
// HTTP would be. An origin the policy refuses gets a 403; an allowed one without `allow_credentials` loses the
// credentials the browser added by itself, as a browser's own CORS check would drop the answer to a credentialed
// request. No Origin (a non-browser client) and the server's own origin pass unchanged.
import websocket from '@fastify/websocket';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { corsPolicy, type CorsConfig } from '../http/cors.ts';

/** Largest frame accepted (a command with its input); a larger one closes the socket with 1009. */
const MAX_COMMAND_BYTES = 1024 * 1024;

const API_KEY = 'x-api-key.';
const BEARER = 'bearer.';

const isCredential = (p: string) => p.startsWith(API_KEY) || p.startsWith(BEARER);

/** Headers this module set from a subprotocol, per upgrade request: forgotten once the upgrade is authorized. */
const fromSubprotocol = new WeakMap<FastifyRequest, string[]>();

/** Whether `origin` names the host the request was sent to (a page of the deployment itself). */
function sameOrigin(origin: string, host: string | undefined): boolean {
  try {
    return !!host && new URL(origin).host === host.toLowerCase();
  } catch {
    return false;
  }
}

/**
 * WebSocket upgrades on the app (routes/protocol.ts declares the endpoint), before any other hook: an upgrade
 * refused by an auth hook is then still known as one, and its socket closed once refused (left open, it would stay
 * with the client and keep the process from exiting). Then the origin check and the credential mapping above.
 */
export async function installWebSockets(app: FastifyInstance, cors?: CorsConfig): Promise<void> {
  const policy = corsPolicy(cors);
  await app.register(websocket, { options: { maxPayload: MAX_COMMAND_BYTES, handleProtocols: selectProtocol } });
  app.addHook('onRequest', (req, reply, done) => {
    if (req.headers.upgrade?.toLowerCase() !== 'websocket') return done();
    const origin = req.headers.origin;
    if (origin !== undefined && !sameOrigin(origin, req.headers.host)) {
      if (!policy.origin(origin)) {
        const detail = `WebSocket from origin ${origin} refused: the deployment's CORS policy (http.cors) does not allow it`;
        return void reply.code(403).send({ detail });
      }
      if (!policy.credentials) {
        delete req.headers.cookie;
        delete req.headers.authorization;
      }
    }
    const offered = req.headers['sec-websocket-protocol'];
    if (typeof offered !== 'string') return done();
    const set: string[] = [];
    for (const p of offered.split(',').map((s) => s.trim())) {
      if (p.startsWith(API_KEY) && !req.headers['x-api-key']) {
        req.headers['x-api-key'] = p.slice(API_KEY.length);
        set.push('x-api-key');
      } else if (p.startsWith(BEARER) && !req.headers.authorization) {
        req.headers.authorization = `Bearer ${p.slice(BEARER.length)}`;
        set.push('authorization');
      }
    }
    fromSubprotocol.set(req, set);
    done();
  });
}

/**
 * Drops the credentials a subprotocol carried from the request once its upgrade is authorized: the socket's
 * commands are authorized with the caller custom auth returned, and the headers runs copy into their configurable
 * (http.configurable_headers) must not hold them.
 */
export function forgetCredentials(req: FastifyRequest): void {
  for (const name of fromSubprotocol.get(req) ?? []) delete req.headers[name];
  const offered = req.headers['sec-websocket-protocol'];
  if (typeof offered !== 'string') return;
  const kept = offered
    .split(',')
    .map((s) => s.trim())
    .filter((p) => !isCredential(p));
  if (kept.length) req.headers['sec-websocket-protocol'] = kept.join(', ');
  else delete req.headers['sec-websocket-protocol'];
}

/** The subprotocol the server answers with: the first offered that is not a credential (none: no header). */
export function selectProtocol(offered: Set<string>): string | false {
  for (const p of offered) if (!isCredential(p)) return p;
  return false;
}
