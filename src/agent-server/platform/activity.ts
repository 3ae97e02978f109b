// What an agent server tells the platform's idle policy about itself (GET /ok?activity=1): the requests, streams and
// WebSockets open now and when the last one began or ended. On one machine the proxy in front of every agent counts
// these; in a cluster traffic reaches the pods without passing anything of the platform's, so the server counts it.
// Probes of /ok are not traffic: the kubelet asks every 10 s and would keep every deployment awake.
import type { FastifyInstance } from 'fastify';

export type Activity = {
  /** Requests (streams and WebSockets included) open now. */
  open: number;
  /** When the last request began or ended, or the server started (ms). */
  lastMs: number;
};

/** Counts the app's requests from the first hook on; returns what they amount to now. */
export function trackActivity(app: FastifyInstance, startedMs = Date.now()): () => Activity {
  let open = 0;
  let lastMs = startedMs;
  app.addHook('onRequest', (req, reply, done) => {
    const path = req.url.split('?', 1)[0];
    if (path === '/ok') return done();
    open++;
    lastMs = Date.now();
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      open--;
      lastMs = Date.now();
    };
    // A response's 'close' comes once it is sent or the client left, so a stream counts for its whole life; a
    // WebSocket has no response of its own and ends with its socket.
    if (req.headers.upgrade) req.raw.socket.once('close', end);
    else reply.raw.once('close', end);
    done();
  });
  return () => ({ open, lastMs });
}
