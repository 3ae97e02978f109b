// Uploaded source tarballs (internal_source), kept on the platform's disk and content-addressed per workspace:
// <root>/<workspace key>/objects/<sha256>.tar.gz holds the bytes, and one record per upload,
// <root>/<workspace key>/uploads/<deployment id>/<upload id>.json, says which bytes an object path names. A
// revision records the hash, so a redeploy or rollback rebuilds exactly the bytes its first build extracted. The
// workspace key is a hash of the tenant id: a tenant id never becomes a path, and one workspace's object paths are
// looked up only under its own folder, so another workspace's upload is simply not found.
// Nothing here lives for ever: `sweep` drops an upload's claim and record once its URL has expired (plus a grace to
// deploy it), and every object no live record and no revision references, so a workspace's disk use is what its
// deployments can still build (rollback included) plus its recent uploads; `usage` is what a quota counts.
// This folder is the one-machine adapter of the SourceArchiveStore port; a cluster's control plane replicas share a
// Postgres one (source-archives-postgres.ts).
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, open, readdir, readFile, rename, rm, rmdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { ConflictError } from '../lib/errors.ts';

export type StoredUpload = {
  sha256: string;
  size: number;
  deploymentId: string;
  /** When the upload URL expired (seconds since the epoch); sweep keeps the record a grace period longer. */
  expires?: number;
};

export type ArchiveUsage = { bytes: number; count: number };

/** What a sweep keeps: the hashes revisions still build and the deployments still alive ('all': every tarball). */
export type ArchiveReferences = { hashes: Set<string>; deployments: Set<string> } | 'all';

/**
 * Where uploaded tarballs and their upload records are kept (the port both adapters implement). Every method is one
 * atomic step: a tarball is never visible before its record, a claim is taken once.
 */
export interface SourceArchiveStore {
  /** A private folder for uploads being received (a commit moves or copies the checked file from there). */
  tmpDir(): Promise<string>;
  /** Takes an upload id for good before its bytes arrive: a second use of one upload URL is a 409. */
  claim(tenant: string, deploymentId: string, uploadId: string, expires: number): Promise<void>;
  /** Stores a checked tarball under its hash and records the upload (its claim must be held). */
  commit(
    tenant: string,
    deploymentId: string,
    uploadId: string,
    tmpFile: string,
    sha256: string,
    size: number,
    expires: number,
  ): Promise<void>;
  /** The bytes an upload of this workspace and deployment stored, or undefined (never uploaded, or not theirs). */
  lookup(tenant: string, deploymentId: string, uploadId: string): Promise<StoredUpload | undefined>;
  /** The bytes and number of tarballs the workspace stores (what its quota bounds). */
  usage(tenant: string): Promise<ArchiveUsage>;
  /** Deletes expired claims and records and the tarballs nothing keeps; returns tarballs deleted, records left. */
  sweep(
    tenant: string,
    referenced: ArchiveReferences,
    nowSeconds: number,
    graceSeconds: number,
  ): Promise<{ deleted: number; records: number }>;
  /** Whether the workspace stores a tarball with this hash. */
  has(tenant: string, sha256: string): Promise<boolean>;
  /** The workspace's tarball with this hash as a stream, or undefined when it stores none (another's is never found). */
  read(tenant: string, sha256: string): Promise<Readable | undefined>;
  /** The workspaces that store anything (uploads or tarballs): what the housekeeping timer sweeps. */
  tenants(): Promise<string[]>;
  close(): Promise<void>;
}

export const SHA256 = /^[0-9a-f]{64}$/;
const ID = /^[0-9a-zA-Z-]{1,64}$/;

function workspaceKey(tenant: string): string {
  return createHash('sha256').update('agentplane-source-archives\0').update(tenant).digest('hex').slice(0, 32);
}

export type SourceArchives = ReturnType<typeof openSourceArchives>;

export function openSourceArchives(root: string) {
  // Each workspace folder names its tenant in a file (the folder name is a hash), for the housekeeping timer.
  const TENANT_FILE = 'tenant';
  const ws = (tenant: string) => join(root, workspaceKey(tenant));
  const uploadRecord = (tenant: string, deploymentId: string, uploadId: string) => {
    if (!ID.test(deploymentId) || !ID.test(uploadId)) throw new Error('invalid upload ids');
    return join(ws(tenant), 'uploads', deploymentId, `${uploadId}.json`);
  };
  const objectFile = (tenant: string, sha256: string) => {
    if (!SHA256.test(sha256)) throw new Error('invalid sha256');
    return join(ws(tenant), 'objects', `${sha256}.tar.gz`);
  };
  const ensureDir = async (dir: string) => {
    await mkdir(dir, { recursive: true, mode: 0o700 });
  };

  return {
    /** A private folder for uploads in progress (same filesystem as the objects, so a commit is a rename). */
    async tmpDir(): Promise<string> {
      const dir = join(root, 'incoming');
      await ensureDir(dir);
      await chmod(root, 0o700).catch(() => undefined);
      return dir;
    },

    /**
     * Takes an upload id for good before its bytes arrive: the second use of one upload URL (a replay, or a racing
     * copy) fails here with a 409, whether or not the first one succeeded.
     */
    async claim(tenant: string, deploymentId: string, uploadId: string, expires: number): Promise<void> {
      const record = uploadRecord(tenant, deploymentId, uploadId);
      await ensureDir(join(record, '..'));
      if (!existsSync(join(ws(tenant), TENANT_FILE))) {
        await writeFile(join(ws(tenant), TENANT_FILE), tenant, { mode: 0o600 });
      }
      const claimFile = `${record}.claim`;
      try {
        const fh = await open(claimFile, 'wx', 0o600);
        // The claim only has to outlive the URL (a replay after expiry fails on the signed expiry): sweep reads this.
        await fh.writeFile(JSON.stringify({ expires }));
        await fh.close();
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
          throw new ConflictError('This upload URL was already used: ask for a new one (POST .../upload-url).');
        }
        throw err;
      }
    },

    /** Moves a checked tarball in under its hash and records the upload (its claim must be held). */
    async commit(
      tenant: string,
      deploymentId: string,
      uploadId: string,
      tmpFile: string,
      sha256: string,
      size: number,
      expires: number,
    ): Promise<void> {
      const target = objectFile(tenant, sha256);
      await ensureDir(join(target, '..'));
      // Same hash, same bytes: an object already there stays, the new copy goes.
      if (existsSync(target)) await rm(tmpFile, { force: true });
      else await rename(tmpFile, target);
      const record = uploadRecord(tenant, deploymentId, uploadId);
      const stored: StoredUpload = { sha256, size, deploymentId, expires };
      await writeFile(`${record}.tmp`, JSON.stringify(stored), { mode: 0o600 });
      await rename(`${record}.tmp`, record);
    },

    /** The bytes an upload of this workspace and deployment stored, or undefined (never uploaded, or not theirs). */
    async lookup(tenant: string, deploymentId: string, uploadId: string): Promise<StoredUpload | undefined> {
      try {
        const parsed = JSON.parse(await readFile(uploadRecord(tenant, deploymentId, uploadId), 'utf8')) as StoredUpload;
        return parsed.deploymentId === deploymentId && SHA256.test(parsed.sha256) ? parsed : undefined;
      } catch {
        return undefined;
      }
    },

    /** The bytes and number of tarballs the workspace stores (what its quota bounds). */
    async usage(tenant: string): Promise<ArchiveUsage> {
      const dir = join(ws(tenant), 'objects');
      const names = await readdir(dir).catch(() => [] as string[]);
      let bytes = 0;
      let count = 0;
      for (const name of names) {
        if (!name.endsWith('.tar.gz')) continue;
        const st = await stat(join(dir, name)).catch(() => undefined);
        if (!st) continue;
        bytes += st.size;
        count += 1;
      }
      return { bytes, count };
    },

    /**
     * Deletes what the workspace no longer needs: claims of expired URLs, upload records `graceSeconds` past their
     * URL's expiry (at once when their deployment is not among `referenced.deployments`), and tarballs neither a
     * remaining record nor `referenced.hashes` (what its revisions build) names ('all': keep every tarball).
     * The caller keeps commits of the same workspace out while this runs (a tarball moved in before its record is
     * written would look unreferenced). Returns the tarballs deleted and the upload records left.
     */
    async sweep(
      tenant: string,
      referenced: ArchiveReferences,
      nowSeconds: number,
      graceSeconds: number,
    ): Promise<{ deleted: number; records: number }> {
      let records = 0;
      const keep = new Set(referenced === 'all' ? [] : referenced.hashes);
      const uploads = join(ws(tenant), 'uploads');
      for (const dep of await readdir(uploads).catch(() => [] as string[])) {
        const depDir = join(uploads, dep);
        const files = await readdir(depDir).catch(() => [] as string[]);
        let left = files.length;
        for (const file of files) {
          const path = join(depDir, file);
          const meta = await readMeta(path);
          const isRecord = file.endsWith('.json');
          // An unreadable file (a crash mid-write) goes once its mtime is as old as an expired one would be.
          const expires = meta?.expires ?? Math.floor((await stat(path).catch(() => ({ mtimeMs: 0 }))).mtimeMs / 1000);
          const until = expires + (isRecord ? graceSeconds : 0);
          const orphan = isRecord && referenced !== 'all' && !referenced.deployments.has(dep);
          if (until < nowSeconds || orphan) {
            await rm(path, { force: true });
            left -= 1;
          } else if (isRecord && meta?.sha256 && SHA256.test(meta.sha256)) {
            keep.add(meta.sha256);
            records += 1;
          }
        }
        if (left === 0) await rmdir(depDir).catch(() => undefined);
      }
      const objects = join(ws(tenant), 'objects');
      let deleted = 0;
      if (referenced === 'all') return { deleted, records };
      for (const name of await readdir(objects).catch(() => [] as string[])) {
        const sha = name.replace(/\.tar\.gz$/, '');
        if (keep.has(sha)) continue;
        await rm(join(objects, name), { force: true });
        deleted += 1;
      }
      return { deleted, records };
    },

    /** Where the workspace's tarball with this hash is, if it is stored (the local runtime extracts it). */
    objectPath(tenant: string, sha256: string): string | undefined {
      const file = objectFile(tenant, sha256);
      return existsSync(file) ? file : undefined;
    },

    async has(tenant: string, sha256: string): Promise<boolean> {
      return SHA256.test(sha256) && existsSync(objectFile(tenant, sha256));
    },

    async read(tenant: string, sha256: string): Promise<Readable | undefined> {
      if (!SHA256.test(sha256)) return undefined;
      const fh = await open(objectFile(tenant, sha256), 'r').catch(() => undefined);
      return fh?.createReadStream();
    },

    async tenants(): Promise<string[]> {
      const found: string[] = [];
      for (const dir of await readdir(root).catch(() => [] as string[])) {
        const tenant = await readFile(join(root, dir, TENANT_FILE), 'utf8').catch(() => undefined);
        if (tenant && workspaceKey(tenant) === dir) found.push(tenant);
      }
      return found;
    },

    async close(): Promise<void> {},
  } satisfies SourceArchiveStore & { objectPath(tenant: string, sha256: string): string | undefined };
}

async function readMeta(path: string): Promise<{ expires?: number; sha256?: string } | undefined> {
  try {
    const parsed = JSON.parse(await readFile(path, 'utf8')) as { expires?: unknown; sha256?: unknown };
    return {
      ...(typeof parsed.expires === 'number' ? { expires: parsed.expires } : {}),
      ...(typeof parsed.sha256 === 'string' ? { sha256: parsed.sha256 } : {}),
    };
  } catch {
    return undefined;
  }
}
