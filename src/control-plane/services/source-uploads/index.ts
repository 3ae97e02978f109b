// Source tarball uploads (internal_source): an API-key holder asks for an upload URL of one of its deployments; the
// URL (signed, see signing.ts) takes one PUT of a gzip tarball, which is checked (tarball.ts) and stored by its hash
// (state/source-archives.ts); a PATCH naming the object path then makes a revision built from exactly those bytes.
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { open, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import { AppError, BadRequestError, ForbiddenError, ValidationError } from '../../../lib/errors.ts';
import type { SourceArchives } from '../../../state/source-archives.ts';
import { objectPathOf, parseObjectPath } from './object-path.ts';
import { signGrant, verifyGrant, type UploadGrant } from './signing.ts';
import { DEFAULT_TARBALL_LIMITS, inspectTarball, TarballProblem, type TarballLimits } from './tarball.ts';

export type SourceUploadOptions = {
  archives: SourceArchives;
  /** The upload-signing key (uploadSigningKey of the platform's secret key). */
  signingKey: Buffer;
  /** How long an upload URL works (default 15 minutes: the CLI PUTs right after asking). */
  ttlSeconds?: number;
  /** Largest tarball accepted (default 200 MiB, the CLI's own limit). */
  maxBytes?: number;
  limits?: TarballLimits;
  /** Milliseconds since the epoch (tests move it). */
  now?: () => number;
};

/** Content types an upload may declare: the CLI sends application/gzip. */
export const UPLOAD_CONTENT_TYPES = ['application/gzip', 'application/x-gzip'];

const DEFAULT_MAX_BYTES = 200 * 1024 * 1024;

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

  return {
    /** A new upload URL for a deployment the caller's workspace owns (the route checked that). */
    issue(tenant: string, deploymentId: string, baseUrl: string) {
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
      await opts.archives.claim(grant.tenant, grant.deploymentId, grant.uploadId);
      const tmp = join(await opts.archives.tmpDir(), `${grant.uploadId}.part`);
      try {
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
        await opts.archives.commit(grant.tenant, grant.deploymentId, grant.uploadId, tmp, sha256, size);
        return { object_path: objectPath, sha256, size };
      } finally {
        await rm(tmp, { force: true });
      }
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
