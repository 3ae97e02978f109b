// Source tarball uploads (internal_source): an API-key holder asks for an upload URL of one of its deployments; the
// URL (signed, see signing.ts) takes one PUT of a gzip tarball, which is checked (tarball.ts) and stored by its hash
// (state/source-archives.ts); a PATCH naming the object path then makes a revision built from exactly those bytes.
// What one workspace can cost is bounded: stored bytes and tarballs (a quota, after sweeping what no revision and no
// recent upload needs), and uploads being received and inspected at once (per workspace and overall, so a
// decompression bomb holds one slot, not the platform's CPU).
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { open, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import { AppError, BadRequestError, ForbiddenError, NotFoundError, ValidationError } from '../../../lib/errors.ts';
import { verifySourceFetchToken } from '../../../lib/source-fetch-token.ts';
import type { SourceArchiveStore } from '../../../state/source-archives.ts';
import { objectPathOf, parseObjectPath } from '../../../api/object-path.ts';
import type { TarballReferences } from './references.ts';
import { signGrant, verifyGrant, type UploadGrant } from './signing.ts';
import { DEFAULT_TARBALL_LIMITS, inspectTarball, TarballProblem, type TarballLimits } from './tarball.ts';

export type SourceUploadOptions = {
  archives: SourceArchiveStore;
  /** The upload-signing key (uploadSigningKey of the platform's secret key). */
  signingKey: Buffer;
  /** How long an upload URL works (default 15 minutes: the CLI PUTs right after asking). */
  ttlSeconds?: number;
  /** Largest tarball accepted (default 200 MiB, the CLI's own limit). */
  maxBytes?: number;
  limits?: TarballLimits;
  /** Per-workspace bound on stored tarballs (default 2 GiB and 100 tarballs). */
  quota?: { maxBytes: number; maxCount: number };
  /** Uploads received and inspected at once (default 2 per workspace, 4 overall); past them a 429. */
  concurrency?: { perWorkspace: number; overall: number };
  /** How long an upload's record outlives its URL, for the PATCH that deploys it (default 24 hours). */
  recordGraceSeconds?: number;
  /** The tarball hashes a workspace's deployments and revisions still build (none given: tarballs are never deleted). */
  referenced?: (tenant: string) => Promise<TarballReferences>;
  /** Milliseconds since the epoch (tests move it). */
  now?: () => number;
  /** How often every workspace is swept, even one nobody uploads to or deletes from (default hourly; 0: never). */
  sweepEveryMs?: number;
  /**
   * The key of source fetch tokens (lib/source-fetch-token.ts) cluster builds download their tarball with; none:
   * tarballs are read only where they are stored (the one-machine platform's builds).
   */
  fetchKey?: Buffer;
};

/** Content types an upload may declare: the CLI sends application/gzip. */
export const UPLOAD_CONTENT_TYPES = ['application/gzip', 'application/x-gzip'];

const DEFAULT_MAX_BYTES = 200 * 1024 * 1024;
export const DEFAULT_UPLOAD_QUOTA = { maxBytes: 2 * 1024 * 1024 * 1024, maxCount: 100 };
export const DEFAULT_UPLOAD_CONCURRENCY = { perWorkspace: 2, overall: 4 };
const UPLOAD_RETRY_AFTER_SECONDS = 5;

/** 429: every upload slot (of the workspace, or of the platform) is taken; the route adds Retry-After. */
export class UploadsBusy extends AppError {
  readonly retryAfterSeconds = UPLOAD_RETRY_AFTER_SECONDS;
  constructor(message: string) {
    super(message, 429);
  }
}

/** The workspace's stored tarballs are at their bound: 409 at upload-url, 413 for the PUT that would pass it. */
class QuotaExceeded extends AppError {}

class PayloadTooLarge extends AppError {
  constructor(max: number) {
    super(`The upload is larger than the ${max} bytes this URL allows.`, 413);
  }
}

export type SourceUploads = ReturnType<typeof createSourceUploads>;

export function createSourceUploads(opts: SourceUploadOptions) {
  const now = opts.now ?? Date.now;
  const ttl = opts.ttlSeconds ?? 15 * 60;
  const maxBytes = opts.maxBytes ?? DEFAULT_MAX_BYTES;
  const limits = opts.limits ?? DEFAULT_TARBALL_LIMITS;
  const quota = opts.quota ?? DEFAULT_UPLOAD_QUOTA;
  const slots = opts.concurrency ?? DEFAULT_UPLOAD_CONCURRENCY;
  const grace = opts.recordGraceSeconds ?? 24 * 60 * 60;
  const busy = new Map<string, number>();
  let busyOverall = 0;
  // Sweeps and commits of one workspace run one at a time (a tarball moved in before its record would look unused).
  const locks = new Map<string, Promise<unknown>>();
  const locked = <T>(tenant: string, fn: () => Promise<T>): Promise<T> => {
    const run = (locks.get(tenant) ?? Promise.resolve()).then(fn, fn);
    const tail = run.catch(() => undefined);
    locks.set(tenant, tail);
    void tail.then(() => locks.get(tenant) === tail && locks.delete(tenant));
    return run;
  };
  const sweepUnlocked = async (tenant: string) => {
    // Without a reference source nothing proves a tarball unused: only records and claims go then.
    const referenced = opts.referenced ? await opts.referenced(tenant) : 'all';
    return opts.archives.sweep(tenant, referenced, Math.floor(now() / 1000), grace);
  };
  const sweep = (tenant: string) => locked(tenant, () => sweepUnlocked(tenant));
  const full = (u: { bytes: number; count: number }, adding: { bytes: number; count: number }) =>
    u.count + adding.count > quota.maxCount
      ? `it stores ${u.count} source tarballs, its bound is ${quota.maxCount} (agentplane dev --max-source-uploads-per-workspace)`
      : u.bytes + adding.bytes > quota.maxBytes
        ? `its source tarballs take ${u.bytes} bytes${adding.bytes ? ` and this one ${adding.bytes} more` : ''}, ` +
          `its bound is ${quota.maxBytes} bytes (agentplane dev --max-source-upload-mb-per-workspace)`
        : undefined;
  const advice =
    'delete deployments or revisions it no longer needs (their tarballs go with them; expired uploads go after ' +
    `${grace} s), or ask the operator to raise the bound`;

  return {
    /** A new upload URL for a deployment the caller's workspace owns (the route checked that). */
    async issue(tenant: string, deploymentId: string, baseUrl: string) {
      const { records } = await sweep(tenant);
      // Uploads of the same bytes share one tarball but each keeps a record (and a used-URL marker) until it
      // expires: the same count bounds those, so repeating one upload cannot pile up files either.
      const problem =
        full(await opts.archives.usage(tenant), { bytes: 0, count: 1 }) ??
        (records >= quota.maxCount
          ? `it has ${records} uploads not yet expired, its bound is ${quota.maxCount} ` +
            '(agentplane dev --max-source-uploads-per-workspace)'
          : undefined);
      if (problem)
        throw new QuotaExceeded(`This workspace cannot upload another source tarball: ${problem}; ${advice}.`, 409);
      const grant: UploadGrant = {
        tenant,
        deploymentId,
        uploadId: randomBytes(16).toString('hex'),
        expires: Math.floor(now() / 1000) + ttl,
        maxBytes,
      };
      const query = new URLSearchParams({
        tenant,
        expires: String(grant.expires),
        max_bytes: String(maxBytes),
        signature: signGrant(opts.signingKey, grant),
      });
      const objectPath = objectPathOf(deploymentId, grant.uploadId);
      return {
        upload_url: `${baseUrl}/v2/source-uploads/${objectPath}?${query.toString()}`,
        object_path: objectPath,
        upload_headers: { 'Content-Type': 'application/gzip' },
        expires_at: new Date(grant.expires * 1000).toISOString(),
        max_bytes: maxBytes,
      };
    },

    /** One PUT of an upload URL: checks the grant, takes the upload id for good, stores the checked tarball. */
    async receive(
      objectPath: string,
      q: { tenant: string; expires: number; max_bytes: number; signature: string },
      declaredLength: number | undefined,
      body: Readable,
    ): Promise<{ object_path: string; sha256: string; size: number }> {
      const ids = parseObjectPath(objectPath);
      if (!ids) throw new ForbiddenError('This is not an upload URL of this control plane.');
      const grant: UploadGrant = { tenant: q.tenant, ...ids, expires: q.expires, maxBytes: q.max_bytes };
      if (!verifyGrant(opts.signingKey, grant, q.signature)) {
        throw new ForbiddenError('The upload URL signature does not match: use the upload_url exactly as answered.');
      }
      if (now() / 1000 > grant.expires) {
        throw new ForbiddenError(
          `The upload URL expired at ${new Date(grant.expires * 1000).toISOString()}: ask for a new one.`,
        );
      }
      if (declaredLength !== undefined && declaredLength > grant.maxBytes) throw new PayloadTooLarge(grant.maxBytes);
      // A slot before the claim: a refused PUT leaves its URL usable for the retry Retry-After asks for.
      const mine = busy.get(grant.tenant) ?? 0;
      if (mine >= slots.perWorkspace) {
        throw new UploadsBusy(
          `This workspace already has ${mine} uploads being received and checked (its bound is ${slots.perWorkspace}): ` +
            'retry this URL when one is done.',
        );
      }
      if (busyOverall >= slots.overall) {
        throw new UploadsBusy(
          `The platform is receiving and checking ${busyOverall} uploads (its bound is ${slots.overall}): retry this URL shortly.`,
        );
      }
      busy.set(grant.tenant, mine + 1);
      busyOverall += 1;
      const tmp = join(await opts.archives.tmpDir(), `${grant.uploadId}.part`);
      try {
        await opts.archives.claim(grant.tenant, grant.deploymentId, grant.uploadId, grant.expires);
        const { sha256, size } = await receiveFile(body, tmp, grant.maxBytes);
        await gzipMagic(tmp);
        try {
          await inspectTarball(tmp, limits);
        } catch (err) {
          if (err instanceof TarballProblem) {
            throw new AppError(`The source tarball was refused: ${err.message}.`, 422);
          }
          throw err;
        }
        await locked(grant.tenant, async () => {
          await sweepUnlocked(grant.tenant);
          const stored = await opts.archives.has(grant.tenant, sha256);
          const problem = stored ? undefined : full(await opts.archives.usage(grant.tenant), { bytes: size, count: 1 });
          if (problem) {
            throw new QuotaExceeded(`The source tarball was not stored: this workspace's ${problem}; ${advice}.`, 413);
          }
          await opts.archives.commit(
            grant.tenant,
            grant.deploymentId,
            grant.uploadId,
            tmp,
            sha256,
            size,
            grant.expires,
          );
        });
        return { object_path: objectPath, sha256, size };
      } finally {
        await rm(tmp, { force: true });
        const left = (busy.get(grant.tenant) ?? 1) - 1;
        if (left > 0) busy.set(grant.tenant, left);
        else busy.delete(grant.tenant);
        busyOverall -= 1;
      }
    },

    /** Deletes what the workspace no longer needs (after a deployment is deleted, and on the housekeeping timer). */
    sweep,

    /** One housekeeping pass: sweeps every workspace that stores anything; returns the tarballs deleted. */
    async sweepAll(onError: (tenant: string, err: unknown) => void): Promise<number> {
      let deleted = 0;
      for (const tenant of await opts.archives.tenants()) {
        try {
          deleted += (await sweep(tenant)).deleted;
        } catch (err) {
          onError(tenant, err);
        }
      }
      return deleted;
    },

    /**
     * The tarball a build's fetch token opens: the token must be signed with the fetch key, unexpired, and name this
     * hash; the bytes are looked up under the token's workspace only, so no token reaches another workspace's.
     */
    async fetch(authorization: string | undefined, sha256: string) {
      if (!opts.fetchKey) throw new NotFoundError('This control plane serves no source tarballs to builds.');
      const token = /^Bearer\s+(\S+)$/i.exec(authorization ?? '')?.[1];
      const claims = token ? verifySourceFetchToken(opts.fetchKey, token) : undefined;
      if (!claims) {
        throw new AppError('A source fetch needs Authorization: Bearer <the fetch token of its build>.', 401);
      }
      if (now() / 1000 > claims.expires) {
        throw new ForbiddenError(
          `This fetch token expired at ${new Date(claims.expires * 1000).toISOString()} (it lasts as long as its build may run).`,
        );
      }
      if (claims.sha256 !== sha256) {
        throw new ForbiddenError(`This fetch token is for the tarball of revision ${claims.revision}, not this one.`);
      }
      const stream = await opts.archives.read(claims.tenant, sha256);
      if (!stream) {
        throw new NotFoundError(
          `The source tarball sha256:${sha256} is no longer stored (deleted with its revisions).`,
        );
      }
      return { stream, claims };
    },

    /** The stored bytes a source_tarball_path of this workspace's deployment names; a 422 names it otherwise. */
    async resolve(tenant: string, deploymentId: string, objectPath: string): Promise<{ sha256: string }> {
      const ids = parseObjectPath(objectPath);
      const stored =
        ids?.deploymentId === deploymentId
          ? await opts.archives.lookup(tenant, ids.deploymentId, ids.uploadId)
          : undefined;
      if (!stored) {
        throw new ValidationError('source_tarball_path names no upload of this deployment', [
          {
            loc: ['body', 'source_revision_config', 'source_tarball_path'],
            msg: 'names no finished upload of this deployment: ask for an upload URL, PUT the tarball, then use its object_path',
            type: 'value_error',
          },
        ]);
      }
      return { sha256: stored.sha256 };
    },
  };
}

/** Streams the body to `file`, hashing it; more than `max` bytes aborts with a 413 (whatever Content-Length said). */
async function receiveFile(body: Readable, file: string, max: number): Promise<{ sha256: string; size: number }> {
  const hash = createHash('sha256');
  let size = 0;
  const meter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      size += chunk.length;
      if (size > max) return done(new PayloadTooLarge(max));
      hash.update(chunk);
      done(null, chunk);
    },
  });
  await pipeline(body, meter, createWriteStream(file, { flags: 'wx', mode: 0o600 }));
  return { sha256: hash.digest('hex'), size };
}

async function gzipMagic(file: string): Promise<void> {
  const fh = await open(file, 'r');
  try {
    const { buffer, bytesRead } = await fh.read(Buffer.alloc(2), 0, 2, 0);
    if (bytesRead < 2 || buffer[0] !== 0x1f || buffer[1] !== 0x8b) {
      throw new BadRequestError(
        'The upload is not gzip data: send the source as a .tar.gz (Content-Type application/gzip).',
      );
    }
  } finally {
    await fh.close();
  }
}
