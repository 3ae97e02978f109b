// Push tokens against the real CNCF registry (Distribution, built from its Go module by scripts/registry-binaries.mjs)
// configured to trust the control plane's tokens, the way docs/kubernetes.md tells an operator to: a real
// `agentplane control-plane` process, a real registry client (crane: what `docker login` + `docker push` do, without
// a daemon) logging in with the answer of POST /push-token as `langgraph deploy` does (its username, the token as the
// password, its repository_url). What the registry lets through, and what it refuses to an attacker holding one
// workspace's token, is the registry's own decision on our tokens. Needs no Kubernetes: it lives in this tier for
// the Go build.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createPublicKey, generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintPushToken } from '../../src/control-plane/services/registry-tokens/push-token.ts';
import { registrySignerFromPem } from '../../src/control-plane/services/registry-tokens/signer.ts';
import { startControlPlaneProcess, type ControlPlaneProcess } from '../control-plane/helpers/process.ts';
import { freePort } from '../support/kube-control-plane.ts';
import { REGISTRY_BINARIES_ENV } from './global-setup.ts';
import { until } from './helpers.ts';

const run = promisify(execFile);
const tools = process.env[REGISTRY_BINARIES_ENV];
if (!tools) {
  const how = 'no registry binaries: install Go so that `node scripts/registry-binaries.mjs` builds them';
  if (process.env.CI === 'true') throw new Error(`registry push test cannot run on CI: ${how}`);
  process.stderr.write(`registry push test skipped: ${how}\n`);
}

const SERVICE = 'agentplane-test-registry';
const ADMIN = `ap_test_${randomBytes(16).toString('hex')}`;

let dir: string;
let cp: ControlPlaneProcess;
let registry: ChildProcess;
let registryLog = '';
let host: string;
let pem: string;

/**
 * The token endpoint as the registry names it: by host name, as a real install names its control plane (registry
 * clients such as crane refuse a realm at a private IP literal, a guard against registries sending them to internal
 * services).
 */
const realm = () => `${cp.url.replace('//127.0.0.1:', '//localhost:')}/v2/registry/token`;

/**
 * An EC P-256 key one of whose public coordinates starts with a zero byte: the case where the registry's key id (Go
 * writes coordinates without leading zeros) and RFC 7638's differ, so the real registry checks our kid on it.
 */
function edgeKey(): KeyObject {
  for (;;) {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const jwk = createPublicKey(privateKey).export({ format: 'jwk' });
    if ([jwk.x!, jwk.y!].some((c) => Buffer.from(c, 'base64url')[0] === 0)) return privateKey;
  }
}

const api = async (method: string, path: string, tenant: string, body?: unknown, key = ADMIN) => {
  const res = await fetch(`${cp.url}${path}`, {
    method,
    headers: { 'x-api-key': key, 'x-tenant-id': tenant, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
};

/** What `langgraph deploy` creates before a local build: an internal_docker deployment, no image yet. */
async function pushedDeployment(tenant: string, name: string): Promise<string> {
  const res = await api('POST', '/v2/deployments', tenant, {
    name,
    source: 'internal_docker',
    source_config: { deployment_type: 'dev' },
    source_revision_config: {},
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.id as string;
}

/** What `langgraph deploy` does with the answer: a Docker config holding only `username:token` for the host. */
function dockerConfig(username: string, token: string): string {
  const config = mkdtempSync(join(dir, 'docker-'));
  const auth = Buffer.from(`${username}:${token}`).toString('base64');
  writeFileSync(join(config, 'config.json'), JSON.stringify({ auths: { [host]: { auth } } }));
  return config;
}

/** crane with one credential; never throws: the exit code and output are what the tests look at. */
async function crane(config: string, args: string[]): Promise<{ ok: boolean; out: string }> {
  try {
    const { stdout, stderr } = await run(join(tools!, 'crane'), ['--insecure', ...args], {
      env: { ...process.env, DOCKER_CONFIG: config },
      timeout: 60_000,
    });
    return { ok: true, out: `${stdout}${stderr}` };
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    return { ok: false, out: `${e.stdout ?? ''}${e.stderr ?? ''}${e.message}` };
  }
}

/** A one-layer image pushed to `ref` (crane append onto an empty base: blobs, config and manifest uploaded). */
const pushImage = (config: string, ref: string) => crane(config, ['append', '-f', join(dir, 'layer.tar'), '-t', ref]);

describe.skipIf(!tools)('registry push tokens with the real registry', () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-regpush-'));
    pem = String(edgeKey().export({ type: 'pkcs8', format: 'pem' }));
    writeFileSync(join(dir, 'key.pem'), pem, { mode: 0o600 });
    // The certificate the registry trusts (rootcertbundle), made the way the docs say.
    await run('openssl', [
      'req',
      '-x509',
      '-new',
      '-key',
      join(dir, 'key.pem'),
      '-subj',
      '/CN=agentplane registry tokens',
      '-days',
      '2',
      '-out',
      join(dir, 'cert.pem'),
    ]);
    mkdirSync(join(dir, 'layer'));
    writeFileSync(join(dir, 'layer', 'hello.txt'), `pushed by a test ${Date.now()}\n`);
    await run('tar', ['-C', join(dir, 'layer'), '-cf', join(dir, 'layer.tar'), 'hello.txt']);

    const port = await freePort();
    host = `127.0.0.1:${port}`;
    cp = await startControlPlaneProcess([
      '--data-dir',
      join(dir, 'store'),
      '--bootstrap-api-key',
      ADMIN,
      '--registry',
      `${host}/agents`,
      '--registry-token-key-file',
      join(dir, 'key.pem'),
      '--registry-token-service',
      SERVICE,
    ]);
    writeFileSync(
      join(dir, 'registry.yml'),
      JSON.stringify({
        version: 0.1,
        log: { level: 'info', accesslog: { disabled: true } },
        storage: { filesystem: { rootdirectory: join(dir, 'registry') } },
        http: { addr: host, secret: randomBytes(16).toString('hex') },
        auth: {
          token: {
            realm: realm(),
            service: SERVICE,
            issuer: 'agentplane',
            rootcertbundle: join(dir, 'cert.pem'),
          },
        },
      }),
    );
    registry = spawn(join(tools!, 'registry'), ['serve', join(dir, 'registry.yml')], {
      stdio: ['ignore', 'pipe', 'pipe'],
      // No OpenTelemetry exporter to look for.
      env: { ...process.env, OTEL_TRACES_EXPORTER: 'none' },
    });
    registry.stdout!.on('data', (d: Buffer) => (registryLog += d.toString()));
    registry.stderr!.on('data', (d: Buffer) => (registryLog += d.toString()));
    await until(
      `the registry on ${host}`,
      () =>
        fetch(`http://${host}/v2/`)
          .then((r) => r.status === 401)
          .catch(() => false),
      30_000,
    );
  });

  afterAll(async () => {
    if (registry && registry.exitCode === null) {
      const exited = new Promise((r) => registry.once('exit', r));
      registry.kill('SIGTERM');
      await exited;
    }
    await cp?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('sends clients to the control plane, which lets a workspace push only to its deployment’s repository', async () => {
    const challenge = await fetch(`http://${host}/v2/`);
    expect(challenge.headers.get('www-authenticate')).toBe(`Bearer realm="${realm()}",service="${SERVICE}"`);
    const a1 = await pushedDeployment('team-a', 'reg-a1');
    const a2 = await pushedDeployment('team-a', 'reg-a2');
    const b1 = await pushedDeployment('team-b', 'reg-b1');

    const t = await api('POST', `/v2/deployments/${a1}/push-token`, 'team-a');
    expect(t.status, JSON.stringify(t.body)).toBe(200);
    expect(t.body.repository_url).toBe(`${host}/agents/ag-${a1}`);
    const asA1 = dockerConfig(t.body.username, t.body.token);
    const pushed = await pushImage(asA1, `${t.body.repository_url}:latest`);
    expect(pushed.ok, `${pushed.out}\n${registryLog}`).toBe(true);
    const digest = await crane(asA1, ['digest', `${t.body.repository_url}:latest`]);
    expect(digest.out.trim()).toMatch(/^sha256:[0-9a-f]{64}$/);

    // What the CLI does next: the deployment's new revision names the pushed digest.
    const image = `${t.body.repository_url}@${digest.out.trim()}`;
    const patched = await api('PATCH', `/v2/deployments/${a1}`, 'team-a', {
      revision_source: 'internal_docker',
      source_revision_config: { image_uri: image },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);

    // The same token on another deployment's repository, the workspace's own or another's: the registry refuses,
    // and nothing is written there.
    for (const other of [a2, b1]) {
      const denied = await pushImage(asA1, `${host}/agents/ag-${other}:latest`);
      expect(denied.ok, denied.out).toBe(false);
      expect(denied.out).toMatch(/UNAUTHORIZED|DENIED|insufficient_scope/i);
    }
    const asB1 = dockerConfig(
      'oauth2accesstoken',
      (await api('POST', `/v2/deployments/${b1}/push-token`, 'team-b')).body.token,
    );
    const empty = await crane(asB1, ['ls', `${host}/agents/ag-${b1}`]);
    expect(empty.out).toMatch(/NAME_UNKNOWN|repository name not known/i);
    // team-b can neither read team-a's image through the registry nor make its deployment run it.
    const read = await crane(asB1, ['manifest', image]);
    expect(read.ok, read.out).toBe(false);
    const stolen = await api('PATCH', `/v2/deployments/${b1}`, 'team-b', {
      revision_source: 'internal_docker',
      source_revision_config: { image_uri: image },
    });
    expect(stolen.status).toBe(400);
    expect(stolen.body.detail).toContain(`${host}/agents/ag-${b1}`);
  });

  it('refuses expired, tampered and foreign tokens at the registry, and push tokens without the right API key', async () => {
    const a = await pushedDeployment('team-a', 'reg-attacks');
    const repo = `${host}/agents/ag-${a}:latest`;
    const t = (await api('POST', `/v2/deployments/${a}/push-token`, 'team-a')).body.token as string;
    // Signed with the control plane's own key, but past its end (what an old token in a CI log is).
    const key = registrySignerFromPem(pem).pushTokenKey;
    const expired = mintPushToken(key, {
      tenant: 'team-a',
      deploymentId: a,
      expires: Math.floor(Date.now() / 1000) - 5,
    });
    const tampered = `${t.slice(0, -4)}${t.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`;
    const otherKey = registrySignerFromPem(String(edgeKey().export({ type: 'pkcs8', format: 'pem' }))).pushTokenKey;
    const foreign = mintPushToken(otherKey, { tenant: 'team-a', deploymentId: a, expires: 2 ** 31 });
    for (const bad of [expired, tampered, foreign]) {
      const res = await pushImage(dockerConfig('agentplane', bad), repo);
      expect(res.ok, res.out).toBe(false);
      expect(res.out).toMatch(/UNAUTHORIZED|401/);
    }
    const nothing = await crane(dockerConfig('agentplane', t), ['ls', `${host}/agents/ag-${a}`]);
    expect(nothing.out).toMatch(/NAME_UNKNOWN|repository name not known/i);

    expect(
      (await api('POST', `/v2/deployments/${a}/push-token`, 'team-a', undefined, 'ap_wrong_key_123456')).status,
    ).toBe(401);
    expect((await api('POST', `/v2/deployments/${a}/push-token`, 'team-b', undefined)).status).toBe(404);
  });
});
