// API-key access to a deployed agent server. The platform never hands the data plane the keys themselves: the
// runtime keeps a file of their SHA-256 hashes current (a file the dev process rewrites, or a mounted Secret that
// the kubelet refreshes), and this module re-reads it when it changes, so a created or revoked key takes effect
// within seconds and without a restart.
import { createHash } from 'node:crypto';
import { readFileSync, unwatchFile, watchFile, type Stats } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ACCESS_TOKEN_PREFIX, API_KEY_PREFIX, verifyAccessToken } from '../../lib/deployment-token.ts';
import { credentialValues, repeatedCredentialDetail, repeatedCredentialHeader } from '../../lib/http.ts';
import type { Logger } from '../../lib/logger.ts';
import { isInternalCall } from '../platform/internal-call.ts';
import { isUiAssetRequest } from '../routes/ui.ts';

/** The file's shape: `{"hashes": ["<sha256 hex of a key>", ...]}`. */
export const keyHashFileSchema = z.object({
  hashes: z.array(z.string().regex(/^[0-9a-f]{64}$/, 'a SHA-256 hex digest')),
});

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** Paths reachable without a key: the health probe only (the platform's readiness and liveness checks). */
const OPEN_PATHS = new Set(['/ok']);

export interface KeyVerifier {
  /** True when `key` is one of the keys currently valid for this deployment. */
  accepts(key: string): boolean;
  close(): void;
}

/**
 * Follows the hash file. A missing or unreadable file means no key is accepted (fail closed) until it is readable
 * again; every change of state is logged once.
 */
export function watchKeyHashFile(path: string, logger: Logger, pollMs = 1000): KeyVerifier {
  let hashes = new Set<string>();
  let lastProblem: string | undefined = 'unread';
  const load = () => {
    let problem: string | undefined;
    try {
      const parsed = keyHashFileSchema.safeParse(JSON.parse(readFileSync(path, 'utf8')));
      if (parsed.success) hashes = new Set(parsed.data.hashes);
      else problem = `invalid content: ${parsed.error.issues[0]?.message ?? 'unexpected shape'}`;
    } catch (err) {
      problem = (err as Error).message;
    }
    if (problem) hashes = new Set();
    if (problem !== lastProblem) {
      if (problem)
        logger.error(
          { file: path, reason: problem },
          'API key file unreadable: every request is refused until it is fixed',
        );
      else logger.info({ file: path, keys: hashes.size }, 'API keys loaded');
    } else if (!problem) {
      logger.debug({ file: path, keys: hashes.size }, 'API keys reloaded');
    }
    lastProblem = problem;
  };
  load();
  // Stat polling rather than fs.watch: it follows the symlink swaps of a mounted Secret and replaced files alike.
  const onChange = (cur: Stats, prev: Stats) => {
    if (cur.mtimeMs !== prev.mtimeMs || cur.ino !== prev.ino || cur.size !== prev.size || cur.nlink !== prev.nlink)
      load();
  };
  watchFile(path, { interval: pollMs, persistent: false }, onChange);
  return {
    accepts: (key) => hashes.has(hashApiKey(key)),
    close: () => unwatchFile(path, onChange),
  };
}

/**
 * Also accepts the control plane's short-lived access tokens for this deployment (lib/deployment-token.ts), which
 * the console's playground calls with instead of a person's key.
 */
export function withAccessTokens(verifier: KeyVerifier, deploymentToken: string | undefined): KeyVerifier {
  if (!deploymentToken) return verifier;
  return {
    accepts: (key) =>
      key.startsWith(ACCESS_TOKEN_PREFIX) ? verifyAccessToken(deploymentToken, key) : verifier.accepts(key),
    close: () => verifier.close(),
  };
}

/**
 * A key the control plane made that is not one of this deployment's (another workspace's, an admin's, a revoked one)
 * is refused in whatever header it comes, before custom auth, custom routes or a graph's configurable headers could
 * see it, in every access mode. Graph code runs in this process, so this guards against careless code, not hostile
 * code: what keeps such keys from agents is that nothing of the platform sends them (the local proxy refuses them).
 */
export function refuseForeignKeys(app: FastifyInstance, verifier: KeyVerifier): void {
  app.addHook('onRequest', async (req, reply) => {
    const repeated = repeatedCredentialHeader(req.raw.rawHeaders);
    if (repeated) return reply.code(400).send({ detail: repeatedCredentialDetail(repeated) });
    for (const value of credentialValues(req.headers)) {
      if (value.startsWith(API_KEY_PREFIX) && !verifier.accepts(value)) {
        return reply
          .code(401)
          .send({ detail: 'Invalid API key for this deployment: only keys of its own workspace may reach it.' });
      }
    }
  });
}

/** Refuses every request but the open paths and CORS preflights unless it carries an accepted `X-Api-Key`. */
export function requireApiKey(app: FastifyInstance, verifier: KeyVerifier): void {
  app.addHook('onRequest', async (req, reply) => {
    if (req.method === 'OPTIONS') return;
    const path = req.url.split('?', 1)[0]!;
    if (OPEN_PATHS.has(path) || isUiAssetRequest(req.method, path)) return;
    // Graph code calling its own server (`new Client()` without arguments) holds no key but this process's token.
    if (isInternalCall(req.headers)) return;
    const header = req.headers['x-api-key'];
    const key = Array.isArray(header) ? header[0] : header;
    if (!key) return reply.code(401).send({ detail: 'Missing API key: send it in the X-Api-Key header.' });
    if (!verifier.accepts(key)) return reply.code(401).send({ detail: 'Invalid API key for this deployment.' });
  });
  app.addHook('onClose', async () => verifier.close());
}
