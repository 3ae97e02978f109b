// What an agent server tells the platform's idle policy about itself (GET /ok?activity=1): the requests, streams and
// WebSockets open now and when the last one began or ended. On one machine the proxy in front of every agent counts
// these; in a cluster traffic reaches the pods without passing anything of the platform's, so the server counts it.
// Probes of /ok are not traffic: the kubelet asks every 10 s and would keep every deployment awake.
// The answer tells when the workspace's agent is used and what it will do next, so only the operator gets it: it
// sends the deployment's own activity token (a Secret only it and the deployment's pods read, mounted as a file).
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
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

/** Whether a request's Authorization header carries the token. */
export type ActivityCredential = (authorization: string | undefined) => Promise<boolean>;

const digest = (s: string) => createHash('sha256').update(s).digest();

/**
 * Checks `Authorization: Bearer <token>` against the token in `file`, read on every ask (the kubelet updates a
 * mounted Secret in place; activity is asked every few seconds at most). Digests of equal length are compared in
 * constant time, so the answer's timing says nothing about how much of a guess was right. A file that is missing or
 * empty accepts nothing.
 */
export function activityCredential(file: string): ActivityCredential {
  return async (authorization) => {
    const given = /^Bearer +(\S+)$/i.exec(authorization ?? '')?.[1];
    if (!given) return false;
    const token = (await readFile(file, 'utf8').catch(() => '')).trim();
    if (!token) return false;
    return timingSafeEqual(digest(given), digest(token));
  };
}
