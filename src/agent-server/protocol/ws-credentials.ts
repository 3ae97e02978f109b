// Credentials of browser WebSockets. A browser cannot set headers on a WebSocket, and the SDK's WebSocket
// transport sends none (it refuses defaultHeaders): a page passes its credential as a subprotocol through the
// transport's webSocketFactory, next to a subprotocol of its choice for the server to select, e.g.
//   new WebSocket(url, ['agentplane', `x-api-key.${key}`])      -> X-Api-Key: <key>
//   new WebSocket(url, ['agentplane', `bearer.${token}`])       -> Authorization: Bearer <token> (custom auth)
// Before any auth hook runs, the credential becomes the header it stands for (a header sent as well wins), so
// every check of the API applies unchanged. It never appears in a URL (nor in logs of one), and the server never
// selects a credential as the connection's subprotocol (it would echo it back).
import websocket from '@fastify/websocket';
import type { FastifyInstance } from 'fastify';

const MAX_COMMAND_BYTES = 1024 * 1024;

const API_KEY = 'x-api-key.';
const BEARER = 'bearer.';

const isCredential = (p: string) => p.startsWith(API_KEY) || p.startsWith(BEARER);

/**
 * WebSocket upgrades on the app (routes/protocol.ts declares the endpoint), before any other hook: an upgrade
 * refused by an auth hook is then still known as one, and its socket closed once refused (left open, it would stay
 * with the client and keep the process from exiting). Then the credential mapping below.
 */
export async function installWebSockets(app: FastifyInstance): Promise<void> {
  await app.register(websocket, { options: { maxPayload: MAX_COMMAND_BYTES, handleProtocols: selectProtocol } });
  app.addHook('onRequest', (req, _reply, done) => {
    const offered = req.headers['sec-websocket-protocol'];
    if (typeof offered !== 'string' || req.headers.upgrade?.toLowerCase() !== 'websocket') return done();
    for (const p of offered.split(',').map((s) => s.trim())) {
      if (p.startsWith(API_KEY) && !req.headers['x-api-key']) req.headers['x-api-key'] = p.slice(API_KEY.length);
      else if (p.startsWith(BEARER) && !req.headers.authorization)
        req.headers.authorization = `Bearer ${p.slice(BEARER.length)}`;
    }
    done();
  });
}

/** The subprotocol the server answers with: the first offered that is not a credential (none: no header). */
export function selectProtocol(offered: Set<string>): string | false {
  for (const p of offered) if (!isCredential(p)) return p;
  return false;
}
