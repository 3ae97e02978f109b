// What `langgraph deploy` asks of the control plane for a source build, through the real app: an upload URL, the bare
// signed PUT, the PATCH naming the object path, the log routes it polls; and what an attacker tries on the upload
// path (oversized, tampered, replayed or expired URLs, another workspace's object path, traversal, hostile tarballs).
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { pack } from 'tar-stream';
import type { FastifyInstance } from 'fastify';
import { workspacesApp, type WorkspacesApp } from '../../helpers/harness.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createControlPlane } from '../../../../src/control-plane/app.ts';
import { createApiKey } from '../../../../src/control-plane/api-keys/keys.ts';
import { DEFAULT_INPUT_POLICY } from '../../../../src/api/input-rules.ts';
import { uploadSigningKey } from '../../../../src/control-plane/services/source-uploads/signing.ts';
import { entryProblem } from '../../../../src/control-plane/services/source-uploads/tarball.ts';
import { openEmbeddedPlatformState } from '../../../../src/state/embedded/index.ts';
import { openSourceArchives, type SourceArchiveStore } from '../../../../src/state/source-archives.ts';
import { openPostgresSourceArchives } from '../../../../src/state/source-archives-postgres.ts';
import { createTestDatabase } from '../../../support/postgres.ts';
import type { PlatformState } from '../../../../src/state/types.ts';
import { silentLogger } from '../../../../src/lib/logger.ts';

type Entry = {
  name: string;
  type?: 'file' | 'directory' | 'symlink' | 'link' | 'character-device';
  body?: string | Buffer;
  linkname?: string;
};

/** A .tar.gz made entry by entry, as a hostile client would craft it (no CLI filtering). */
async function tarball(entries: Entry[]): Promise<Buffer> {
  const p = pack();
  const chunks: Buffer[] = [];
  p.on('data', (c: unknown) => chunks.push(c as Buffer));
  const done = new Promise<void>((r) => p.on('end', () => r()));
  for (const e of entries) {
    const type = e.type ?? 'file';
    await new Promise<void>((res, rej) =>
      type === 'file'
        ? p.entry({ name: e.name, type }, e.body ?? '', (err) => (err ? rej(err) : res()))
        : p.entry({ name: e.name, type, linkname: e.linkname, devmajor: 1, devminor: 3 }, (err) =>
            err ? rej(err) : res(),
          ),
    );
  }
  p.finalize();
  await done;
  return gzipSync(Buffer.concat(chunks));
}

const PROJECT: Entry[] = [
  { name: 'langgraph.json', body: '{"node_version":"20","graphs":{"agent":"./agent.mjs:graph"}}' },
  { name: 'src', type: 'directory' },
  { name: 'src/a.txt', body: 'hello' },
  { name: 'src/link-inside', type: 'symlink', linkname: 'a.txt' },
];

let dir: string;
let store: PlatformState;
let cp: FastifyInstance;
let clock = Date.now();
let headersA: Record<string, string>;
let headersB: Record<string, string>;
let bed: WorkspacesApp;

beforeAll(async () => {
  bed = await workspacesApp('ap-cp-uploads-', (folder) => ({
    sourceUploads: {
      archives: openSourceArchives(join(folder, 'archives')),
      signingKey: uploadSigningKey(Buffer.alloc(32, 7)),
      maxBytes: 64 * 1024,
      ttlSeconds: 60,
      limits: { maxExpandedBytes: 1024 * 1024, maxEntries: 50 },
      now: () => clock,
    },
  }));
  ({ app: cp, store, dir, headersA, headersB } = bed);
});

afterAll(async () => bed?.close());

async function createSourceDeployment(headers: Record<string, string>, name: string): Promise<string> {
  const res = await cp.inject({
    method: 'POST',
    url: '/v2/deployments',
    headers,
    payload: {
      name,
      source: 'internal_source',
      source_config: { deployment_type: 'dev_zero' },
      source_revision_config: {},
    },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().id as string;
}

async function uploadUrl(headers: Record<string, string>, id: string, prefix = '') {
  const res = await cp.inject({
    method: 'POST',
    url: `${prefix}/v2/deployments/${id}/upload-url`,
    headers,
    payload: { supports_upload_headers: true },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { upload_url: string; object_path: string; upload_headers: Record<string, string> };
}

/** The PUT the CLI makes: the URL as answered, no API key. */
const put = (url: string, body: Buffer, contentType = 'application/gzip') => {
  const u = new URL(url);
  return cp.inject({
    method: 'PUT',
    url: u.pathname + u.search,
    headers: { 'content-type': contentType },
    payload: body,
  });
};

const patchTarball = (headers: Record<string, string>, id: string, path: string) =>
  cp.inject({
    method: 'PATCH',
    url: `/v2/deployments/${id}`,
    headers,
    payload: {
      revision_source: 'internal_source',
      source_revision_config: { source_tarball_path: path, langgraph_config_path: 'langgraph.json' },
      tracked_packages: ['@langchain/langgraph'],
    },
  });

describe('source uploads, as langgraph deploy makes them', () => {
  it('upload URL, bare PUT, PATCH: the revision records the bytes it will build', async () => {
    const id = await createSourceDeployment(headersA, 'src-ok');
    const up = await uploadUrl(headersA, id, '/api-host');
    // The URL comes back to the control plane, under the prefix the caller used.
    expect(up.upload_url).toMatch(/^http:\/\/[^/]+\/api-host\/v2\/source-uploads\/sources\//);
    expect(up.object_path).toMatch(new RegExp(`^sources/${id}/[0-9a-f]{32}\\.tar\\.gz$`));
    const bytes = await tarball(PROJECT);
    const res = await put(up.upload_url, bytes);
    expect(res.statusCode, res.body).toBe(201);
    const sha = createHash('sha256').update(bytes).digest('hex');
    expect(res.json()).toMatchObject({ object_path: up.object_path, sha256: sha, size: bytes.length });

    const patched = await patchTarball(headersA, id, up.object_path);
    expect(patched.statusCode, patched.body).toBe(200);
    const revs = await cp.inject({ method: 'GET', url: `/v2/deployments/${id}/revisions?limit=1`, headers: headersA });
    const newest = revs.json().resources[0];
    expect(newest.revision_number).toBe(2);
    expect(newest.source).toBe('internal_source');
    expect(newest.source_revision_config).toMatchObject({
      source_tarball_path: up.object_path,
      source_tarball_sha256: sha,
    });

    // The log routes the CLI polls answer pages of this workspace's revision, under / and /api-host.
    for (const prefix of ['', '/api-host']) {
      const logs = await cp.inject({
        method: 'POST',
        url: `${prefix}/v1/projects/${id}/revisions/${newest.id}/build_logs`,
        headers: headersA,
        payload: { order: 'desc', limit: 30 },
      });
      expect(logs.statusCode, logs.body).toBe(200);
      expect(logs.json()).toEqual({ logs: [], next_offset: null });
    }
    const stranger = await cp.inject({
      method: 'POST',
      url: `/v1/projects/${id}/revisions/${newest.id}/build_logs`,
      headers: headersB,
      payload: { order: 'asc', limit: 50 },
    });
    expect(stranger.statusCode).toBe(404);
  });

  it('serves log pages with offsets', async () => {
    const id = await createSourceDeployment(headersA, 'src-logs');
    const rev = (await cp.inject({ method: 'GET', url: `/v2/deployments/${id}/revisions`, headers: headersA })).json()
      .resources[0];
    await store.appendLogs(
      store.namespace,
      `${(await store.list('AgentRevision', store.namespace)).items.find((r) => r.metadata.uid === rev.id)!.metadata.name}`,
      'build',
      ['one', 'two', 'three'],
    );
    const first = await cp.inject({
      method: 'POST',
      url: `/v1/projects/${id}/revisions/${rev.id}/build_logs`,
      headers: headersA,
      payload: { order: 'asc', limit: 2 },
    });
    expect(first.json().logs.map((l: { message: string }) => l.message)).toEqual(['one', 'two']);
    const next = await cp.inject({
      method: 'POST',
      url: `/v1/projects/${id}/revisions/${rev.id}/build_logs`,
      headers: headersA,
      payload: { order: 'asc', limit: 2, offset: first.json().next_offset },
    });
    expect(next.json().logs.map((l: { message: string }) => l.message)).toEqual(['three']);
    const deployLogs = await cp.inject({
      method: 'POST',
      url: `/v1/projects/${id}/deploy_logs`,
      headers: headersA,
      payload: {},
    });
    expect(deployLogs.statusCode, deployLogs.body).toBe(200);
  });

  it('refuses a replayed URL, an expired one and a tampered one', async () => {
    const id = await createSourceDeployment(headersA, 'src-replay');
    const bytes = await tarball(PROJECT);
    const up = await uploadUrl(headersA, id);
    expect((await put(up.upload_url, bytes)).statusCode).toBe(201);
    const replay = await put(up.upload_url, bytes);
    expect(replay.statusCode).toBe(409);
    expect(replay.json().detail).toMatch(/already used/);

    const late = await uploadUrl(headersA, id);
    clock += 61_000;
    try {
      const expired = await put(late.upload_url, bytes);
      expect(expired.statusCode).toBe(403);
      expect(expired.json().detail).toMatch(/expired/);
    } finally {
      clock -= 61_000;
    }

    const fresh = await uploadUrl(headersA, id);
    const bigger = fresh.upload_url.replace(/max_bytes=\d+/, 'max_bytes=999999999');
    expect((await put(bigger, bytes)).json().detail).toMatch(/signature/);
    const other = await createSourceDeployment(headersA, 'src-replay-other');
    const moved = fresh.upload_url.replace(id, other);
    expect((await put(moved, bytes)).statusCode).toBe(403);
    const otherTenant = fresh.upload_url.replace('tenant=team-a', 'tenant=team-b');
    expect((await put(otherTenant, bytes)).statusCode).toBe(403);
    // The untouched URL still works once: tampered copies did not use it up.
    expect((await put(fresh.upload_url, bytes)).statusCode).toBe(201);
  });

  it('refuses an oversized upload, a wrong content type and bytes that are not gzip', async () => {
    const id = await createSourceDeployment(headersA, 'src-size');
    const huge = await tarball([
      { name: 'big.bin', body: Buffer.from(Array.from({ length: 200_000 }, () => Math.floor(Math.random() * 256))) },
    ]);
    expect(huge.length).toBeGreaterThan(64 * 1024);
    const tooBig = await put((await uploadUrl(headersA, id)).upload_url, huge);
    expect(tooBig.statusCode).toBe(413);
    const json = await put((await uploadUrl(headersA, id)).upload_url, Buffer.from('{}'), 'application/json');
    expect(json.statusCode).toBe(415);
    const notGzip = await put((await uploadUrl(headersA, id)).upload_url, Buffer.from('plain text, not gzip'));
    expect(notGzip.statusCode).toBe(400);
    expect(notGzip.json().detail).toMatch(/not gzip/);
  });

  it.each<[string, Entry[], RegExp]>([
    ['a ../ entry', [{ name: '../../escape.txt', body: 'x' }], /"\.\." path component/],
    ['an absolute path', [{ name: '/etc/cron.d/x', body: 'x' }], /absolute path/],
    [
      'a symlink out of the tree',
      [{ name: 'out', type: 'symlink', linkname: '../../../etc' }],
      /points out of the archive/,
    ],
    ['an absolute symlink', [{ name: 'out', type: 'symlink', linkname: '/etc/passwd' }], /absolute path/],
    [
      'a chain of links, each inside alone',
      [
        { name: 'l1', type: 'symlink', linkname: '.' },
        { name: 'l1/l2', type: 'symlink', linkname: '..' },
        { name: 'l2/escape.txt', body: 'x' },
      ],
      /under the symbolic link "l1"/,
    ],
    ['a hard link', [{ name: 'h', type: 'link', linkname: 'langgraph.json' }], /hard link/],
    ['a device file', [{ name: 'null', type: 'character-device' }], /character-device/],
    ['a decompression bomb', [{ name: 'zeros', body: Buffer.alloc(4 * 1024 * 1024) }], /expands to more than/],
  ])('refuses a tarball with %s, and nothing is stored', async (_what, entries, message) => {
    const id = await createSourceDeployment(headersA, `src-bad-${Math.random().toString(36).slice(2, 8)}`);
    const up = await uploadUrl(headersA, id);
    const res = await put(up.upload_url, await tarball([...PROJECT.slice(0, 1), ...entries]));
    expect(res.statusCode, res.body).toBe(422);
    expect(res.json().detail).toMatch(message);
    // A refused upload is no upload: its object path deploys nothing.
    const patched = await patchTarball(headersA, id, up.object_path);
    expect(patched.statusCode).toBe(422);
  });

  it("never deploys another workspace's upload, nor a path that is not an upload", async () => {
    const a = await createSourceDeployment(headersA, 'src-tenant-a');
    const b = await createSourceDeployment(headersB, 'src-tenant-b');
    const up = await uploadUrl(headersA, a);
    expect((await put(up.upload_url, await tarball(PROJECT))).statusCode).toBe(201);
    // B names A's object path on its own deployment, and with A's deployment id rewritten to its own.
    const stolen = await patchTarball(headersB, b, up.object_path);
    expect(stolen.statusCode).toBe(422);
    expect(JSON.stringify(stolen.json())).toMatch(/no finished upload of this deployment/);
    const rewritten = await patchTarball(headersB, b, up.object_path.replace(a, b));
    expect(rewritten.statusCode).toBe(422);
    // B cannot ask for an upload URL of A's deployment, nor patch it.
    const foreignUrl = await cp.inject({
      method: 'POST',
      url: `/v2/deployments/${a}/upload-url`,
      headers: headersB,
      payload: {},
    });
    expect(foreignUrl.statusCode).toBe(404);
    expect((await patchTarball(headersB, a, up.object_path)).statusCode).toBe(404);
    // Traversal and other shapes never reach a lookup.
    for (const path of [
      `sources/${a}/../../../etc/passwd`,
      '/etc/passwd',
      `sources/${a}/x.tar.gz`,
      `../${up.object_path}`,
    ]) {
      const res = await patchTarball(headersA, a, path);
      expect(res.statusCode, path).toBe(422);
    }
    const traversal = await cp.inject({
      method: 'PUT',
      url: `/v2/source-uploads/sources/..%2F..%2F${a}/x.tar.gz?${new URL(up.upload_url).search.slice(1)}`,
      headers: { 'content-type': 'application/gzip' },
      payload: await tarball(PROJECT),
    });
    expect(traversal.statusCode).toBe(403);
  });

  it('answers --image and push tokens with one line saying why', async () => {
    const id = await createSourceDeployment(headersA, 'src-push');
    const token = await cp.inject({
      method: 'POST',
      url: `/v2/deployments/${id}/push-token`,
      headers: headersA,
      payload: { supports_registry_username: true },
    });
    expect(token.statusCode).toBe(400);
    expect(token.json().detail).toMatch(/no registry to push images to/);
    const docker = await cp.inject({
      method: 'POST',
      url: '/v2/deployments',
      headers: headersA,
      payload: { name: 'img', source: 'internal_docker', source_config: {}, source_revision_config: {} },
    });
    expect(docker.statusCode).toBe(400);
    expect(typeof docker.json().detail).toBe('string');
    // Upload URLs are for source builds only.
    const git = await cp.inject({
      method: 'POST',
      url: '/v2/deployments',
      headers: headersA,
      payload: {
        name: 'img2',
        source: 'external_docker',
        source_revision_config: { image_uri: 'registry.example.com/a@sha256:' + 'a'.repeat(64) },
      },
    });
    expect(git.statusCode, git.body).toBe(201);
    const refused = await cp.inject({
      method: 'POST',
      url: `/v2/deployments/${git.json().id}/upload-url`,
      headers: headersA,
      payload: {},
    });
    expect(refused.statusCode).toBe(400);
  });
});

describe('entryProblem', () => {
  it.each<[string, Parameters<typeof entryProblem>[0], boolean]>([
    ['a file', { name: 'src/a.ts', type: 'file', linkname: '' }, true],
    ['a folder', { name: 'src/', type: 'directory', linkname: '' }, true],
    ['./ prefix', { name: './langgraph.json', type: 'file', linkname: '' }, true],
    ['a link to a sibling', { name: 'a/b', type: 'symlink', linkname: '../c' }, true],
    ['a link to the root', { name: 'a/b', type: 'symlink', linkname: '..' }, true],
    ['a link one level too far', { name: 'a/b', type: 'symlink', linkname: '../../c' }, false],
    ['.. in the middle', { name: 'a/../../b', type: 'file', linkname: '' }, false],
    ['a drive letter', { name: 'C:/x', type: 'file', linkname: '' }, false],
    ['a fifo', { name: 'f', type: 'fifo', linkname: '' }, false],
  ])('%s', (_what, header, ok) => {
    expect(entryProblem(header) === undefined).toBe(ok);
  });
});

// A second control plane with small bounds: what one key holder can make the platform store and inspect.
// Both stores: the one-machine folder and the Postgres a cluster's control-plane replicas share.
const STORES: [string, () => Promise<{ archives: SourceArchiveStore; drop: () => Promise<void> }>][] = [
  ['folder', async () => ({ archives: openSourceArchives(join(dir, 'archives-bounded')), drop: async () => {} })],
  [
    'postgres',
    async () => {
      const db = await createTestDatabase();
      const archives = await openPostgresSourceArchives({ url: db.url });
      return {
        archives,
        drop: async () => {
          await archives.close();
          await db.drop();
        },
      };
    },
  ],
];

describe.each(STORES)('source uploads are bounded per workspace and cleaned up (%s)', (name, open) => {
  let cp2: FastifyInstance;
  let store: PlatformState;
  let archives: SourceArchiveStore;
  let drop: () => Promise<void>;
  let now2 = Date.now();
  const keyed: Record<string, Record<string, string>> = {};
  const as = async (tenant: string) => {
    keyed[tenant] ??= {
      'x-api-key': (await createApiKey(store, { tenants: [tenant] })).key,
      'x-tenant-id': tenant,
    };
    return keyed[tenant];
  };
  const req = (method: 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, headers = {}, payload?: unknown) =>
    cp2.inject({ method, url, headers, ...(payload === undefined ? {} : { payload: payload as object }) });
  const newDeployment = async (tenant: string, name: string) => {
    const res = await req('POST', '/v2/deployments', await as(tenant), {
      name,
      source: 'internal_source',
      source_config: { deployment_type: 'dev_zero' },
      source_revision_config: {},
    });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().id as string;
  };
  const askUrl = async (tenant: string, id: string) =>
    req('POST', `/v2/deployments/${id}/upload-url`, await as(tenant), {});
  const putTo = (url: string, body: Buffer | Readable) => {
    const u = new URL(url);
    return cp2.inject({
      method: 'PUT',
      url: u.pathname + u.search,
      headers: { 'content-type': 'application/gzip' },
      payload: body,
    });
  };
  /** A distinct project each call (its own hash), with `pad` incompressible bytes. */
  let n = 0;
  const project = (pad = 0) =>
    tarball([...PROJECT, { name: `src/n${(n += 1)}.txt`, body: pad ? randomBytes(pad) : String(n) }]);
  const upload = async (tenant: string, id: string, pad = 0) => {
    const asked = await askUrl(tenant, id);
    expect(asked.statusCode, asked.body).toBe(200);
    const url = asked.json() as { upload_url: string; object_path: string };
    return { ...url, res: await putTo(url.upload_url, await project(pad)) };
  };

  beforeAll(async () => {
    ({ archives, drop } = await open());
    store = openEmbeddedPlatformState({ dataDir: join(dir, `store-${name}`) });
    cp2 = await createControlPlane({
      store,
      logger: silentLogger(),
      policy: DEFAULT_INPUT_POLICY,
      consoleDir: false,
      sourceUploads: {
        archives,
        signingKey: uploadSigningKey(Buffer.alloc(32, 9)),
        maxBytes: 64 * 1024,
        ttlSeconds: 60,
        recordGraceSeconds: 600,
        quota: { maxBytes: 64 * 1024, maxCount: 2 },
        concurrency: { perWorkspace: 1, overall: 2 },
        now: () => now2,
      },
    });
  });
  afterAll(async () => {
    await cp2.close();
    await store.close();
    await drop();
  });

  it('refuses a workspace past its bound (count, then bytes) while another workspace still uploads', async () => {
    const id = await newDeployment('quota-a', 'q-a');
    expect((await upload('quota-a', id)).res.statusCode).toBe(201);
    expect((await upload('quota-a', id)).res.statusCode).toBe(201);
    const third = await askUrl('quota-a', id);
    expect(third.statusCode).toBe(409);
    expect(third.json().detail).toMatch(/stores 2 source tarballs, its bound is 2/);
    expect(await archives.usage('quota-a')).toMatchObject({ count: 2 });

    // Repeating the same bytes stores one tarball, yet each upload keeps a record until it expires: bounded too.
    const same = await newDeployment('quota-g', 'q-g');
    const bytes = await project();
    for (let i = 0; i < 2; i++) {
      const url = (await askUrl('quota-g', same)).json() as { upload_url: string };
      expect((await putTo(url.upload_url, bytes)).statusCode).toBe(201);
    }
    expect(await archives.usage('quota-g')).toMatchObject({ count: 1 });
    const again = await askUrl('quota-g', same);
    expect(again.statusCode).toBe(409);
    expect(again.json().detail).toMatch(/2 uploads not yet expired, its bound is 2/);

    const other = await newDeployment('quota-b', 'q-b');
    const first = await upload('quota-b', other, 40 * 1024);
    expect(first.res.statusCode, first.res.body).toBe(201);
    // A second large tarball would pass the byte bound: refused after reading, nothing stored, the record absent.
    const big = await upload('quota-b', other, 40 * 1024);
    expect(big.res.statusCode, big.res.body).toBe(413);
    expect(big.res.json().detail).toMatch(/its bound is 65536 bytes/);
    expect(await archives.usage('quota-b')).toMatchObject({ count: 1 });
    const patched = await req('PATCH', `/v2/deployments/${other}`, await as('quota-b'), {
      source_revision_config: { source_tarball_path: big.object_path },
    });
    expect(patched.statusCode).toBe(422);
  });

  it('frees the tarballs of a deleted deployment, keeping those revisions of live deployments build', async () => {
    const kept = await newDeployment('quota-c', 'q-c-kept');
    const gone = await newDeployment('quota-c', 'q-c-gone');
    const a = await upload('quota-c', kept);
    const patched = await req('PATCH', `/v2/deployments/${kept}`, await as('quota-c'), {
      source_revision_config: { source_tarball_path: a.object_path },
    });
    expect(patched.statusCode, patched.body).toBe(200);
    const b = await upload('quota-c', gone);
    expect(b.res.statusCode).toBe(201);
    expect((await askUrl('quota-c', kept)).statusCode).toBe(409); // full

    expect((await req('DELETE', `/v2/deployments/${gone}`, await as('quota-c'))).statusCode).toBe(204);
    const shaA = a.res.json().sha256 as string;
    const shaB = b.res.json().sha256 as string;
    expect(await archives.has('quota-c', shaB)).toBe(false);
    expect(await archives.has('quota-c', shaA)).toBe(true);
    expect(await archives.usage('quota-c')).toMatchObject({ count: 1 });
    expect((await upload('quota-c', kept)).res.statusCode).toBe(201);
  });

  it('deletes an expired upload (its record, its claim, its bytes) but not what a revision builds', async () => {
    const id = await newDeployment('quota-d', 'q-d');
    const deployed = await upload('quota-d', id);
    expect(
      (
        await req('PATCH', `/v2/deployments/${id}`, await as('quota-d'), {
          source_revision_config: { source_tarball_path: deployed.object_path },
        })
      ).statusCode,
    ).toBe(200);
    const idle = await upload('quota-d', id);
    const idleSha = idle.res.json().sha256 as string;
    const idleIds = idle.object_path.match(/^sources\/(.+)\/([0-9a-f]{32})\.tar\.gz$/)!;
    expect(await archives.lookup('quota-d', idleIds[1]!, idleIds[2]!)).toBeDefined();

    now2 += (60 + 600 + 1) * 1000; // past the URL's expiry and the grace to deploy it
    expect((await askUrl('quota-d', id)).statusCode).toBe(200); // asking sweeps
    expect(await archives.lookup('quota-d', idleIds[1]!, idleIds[2]!)).toBeUndefined();
    expect(await archives.has('quota-d', idleSha)).toBe(false);
    expect(await archives.has('quota-d', deployed.res.json().sha256 as string)).toBe(true);
    const late = await req('PATCH', `/v2/deployments/${id}`, await as('quota-d'), {
      source_revision_config: { source_tarball_path: idle.object_path },
    });
    expect(late.statusCode).toBe(422);
  });

  it('bounds uploads being received at once: 429 with Retry-After, the URL still good afterwards', async () => {
    const id = await newDeployment('quota-e', 'q-e');
    const slow = (await askUrl('quota-e', id)).json() as { upload_url: string };
    const bytes = await project();
    // A client that sends half its tarball and stalls holds its workspace's only slot.
    const body = new Readable({ read() {} });
    body.push(bytes.subarray(0, 10));
    const held = putTo(slow.upload_url, body);
    const part = join(
      await archives.tmpDir(),
      `${new URL(slow.upload_url).pathname.split('/').pop()!.slice(0, 32)}.part`,
    );
    while (!existsSync(part)) await new Promise((r) => setTimeout(r, 10));

    const next = (await askUrl('quota-e', id)).json() as { upload_url: string };
    const refused = await putTo(next.upload_url, await project());
    expect(refused.statusCode, refused.body).toBe(429);
    expect(refused.headers['retry-after']).toMatch(/^\d+$/);
    expect(refused.json().detail).toMatch(/its bound is 1/);
    // Another workspace has a slot of the platform's two.
    const otherId = await newDeployment('quota-f', 'q-f');
    expect((await upload('quota-f', otherId)).res.statusCode).toBe(201);

    body.push(bytes.subarray(10));
    body.push(null);
    expect((await held).statusCode).toBe(201);
    expect((await putTo(next.upload_url, await project())).statusCode).toBe(201);
  });

  it('a timer deletes expired uploads of every workspace, with nobody uploading or deleting', async () => {
    const id = await newDeployment('tidy-a', 't-a');
    const deployed = await upload('tidy-a', id);
    const patched = await req('PATCH', `/v2/deployments/${id}`, await as('tidy-a'), {
      source_revision_config: { source_tarball_path: deployed.object_path },
    });
    expect(patched.statusCode, patched.body).toBe(200);
    const idle = await upload('tidy-a', id);
    const elsewhere = await upload('tidy-b', await newDeployment('tidy-b', 't-b'));
    const sha = (u: { res: { json(): { sha256: string } } }) => u.res.json().sha256;
    // Another replica of the control plane over the same stores, its clock past every URL's expiry and grace and its
    // timer quick; this test makes no request of it.
    let later = now2 + (60 + 600 + 1) * 1000;
    const replica = await createControlPlane({
      store,
      logger: silentLogger(),
      policy: DEFAULT_INPUT_POLICY,
      consoleDir: false,
      sourceUploads: {
        archives,
        signingKey: uploadSigningKey(Buffer.alloc(32, 9)),
        ttlSeconds: 60,
        recordGraceSeconds: 600,
        now: () => later,
        sweepEveryMs: 20,
      },
    });
    try {
      for (const [tenant, u] of [
        ['tidy-a', idle],
        ['tidy-b', elsewhere],
      ] as const) {
        while (await archives.has(tenant, sha(u))) await new Promise((r) => setTimeout(r, 20));
      }
      expect(await archives.has('tidy-a', sha(deployed))).toBe(true);
      later += 1; // one more pass changes nothing
      await new Promise((r) => setTimeout(r, 60));
      expect(await archives.has('tidy-a', sha(deployed))).toBe(true);
    } finally {
      await replica.close();
    }
  });
});
