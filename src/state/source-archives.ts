// Uploaded source tarballs (internal_source), kept on the platform's disk and content-addressed per workspace:
// <root>/<workspace key>/objects/<sha256>.tar.gz holds the bytes, and one record per upload,
// <root>/<workspace key>/uploads/<deployment id>/<upload id>.json, says which bytes an object path names. A
// revision records the hash, so a redeploy or rollback rebuilds exactly the bytes its first build extracted. The
// workspace key is a hash of the tenant id: a tenant id never becomes a path, and one workspace's object paths are
// looked up only under its own folder, so another workspace's upload is simply not found.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, open, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ConflictError } from '../lib/errors.ts';

export type StoredUpload = { sha256: string; size: number; deploymentId: string };

const SHA256 = /^[0-9a-f]{64}$/;
const ID = /^[0-9a-zA-Z-]{1,64}$/;

function workspaceKey(tenant: string): string {
  return createHash('sha256').update('agentplane-source-archives\0').update(tenant).digest('hex').slice(0, 32);
}

export type SourceArchives = ReturnType<typeof openSourceArchives>;

export function openSourceArchives(root: string) {
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
    async claim(tenant: string, deploymentId: string, uploadId: string): Promise<void> {
      const record = uploadRecord(tenant, deploymentId, uploadId);
      await ensureDir(join(record, '..'));
      const claimFile = `${record}.claim`;
      try {
        const fh = await open(claimFile, 'wx', 0o600);
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
    ): Promise<void> {
      const target = objectFile(tenant, sha256);
      await ensureDir(join(target, '..'));
      // Same hash, same bytes: an object already there stays, the new copy goes.
      if (existsSync(target)) await rm(tmpFile, { force: true });
      else await rename(tmpFile, target);
      const record = uploadRecord(tenant, deploymentId, uploadId);
      const stored: StoredUpload = { sha256, size, deploymentId };
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

    /** Where the workspace's tarball with this hash is, if it is stored. */
    objectPath(tenant: string, sha256: string): string | undefined {
      const file = objectFile(tenant, sha256);
      return existsSync(file) ? file : undefined;
    },
  };
}
