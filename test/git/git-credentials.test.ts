// The build pod's security settings, and the clone step's credential handling against a real git: a repository served over HTTP behind Basic auth (git's
// dumb HTTP protocol from a bare repository), cloned by git with the token given only through the GIT_ASKPASS
// helper GIT_AUTH_SCRIPT writes from the mounted Secret files: never in the URL, the environment or the output.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, normalize } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GIT_AUTH_SCRIPT } from '../../src/git/clone-auth.ts';
import { makeBuildJob } from '../../src/operator/runtimes/kubernetes/build-job.ts';
import { GIT_CREDENTIALS_DIR } from '../../src/operator/runtimes/kubernetes/build-scripts.ts';
import { kubernetesRuntimeConfigSchema } from '../../src/operator/runtimes/kubernetes/config.ts';
import { gitCredentialsFor, repositoryAllowed } from '../../src/git/tenant-secret.ts';
import { repositoryPath } from '../../src/git/url.ts';
import { validateK8s } from '../support/kubernetes/k8s-schema.ts';

const TOKEN = 'ghp_secretTokenValue0123456789';
let dir: string;
let server: Server;
let url: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ap-git-cred-'));
  const git = (cwd: string, ...args: string[]) =>
    execFileSync('git', args, {
      cwd,
      stdio: 'pipe',
      env: {
        ...process.env,
        GIT_AUTHOR_NAME: 't',
        GIT_AUTHOR_EMAIL: 't@t',
        GIT_COMMITTER_NAME: 't',
        GIT_COMMITTER_EMAIL: 't@t',
      },
    });
  const work = join(dir, 'work');
  mkdirSync(work);
  git(work, 'init', '-q', '-b', 'main');
  writeFileSync(join(work, 'langgraph.json'), '{"graphs":{}}');
  git(work, 'add', '.');
  git(work, 'commit', '-qm', 'init');
  git(dir, 'clone', '-q', '--bare', work, 'repo.git');
  git(join(dir, 'repo.git'), 'update-server-info');
  const root = join(dir, 'repo.git');
  const expected = `Basic ${Buffer.from(`bot:${TOKEN}`).toString('base64')}`;
  server = createServer((req, res) => {
    if (req.headers.authorization !== expected) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="git"' }).end();
      return;
    }
    const path = normalize(
      join(root, decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname.replace(/^\/repo\.git/, ''))),
    );
    try {
      if (!path.startsWith(root) || !statSync(path).isFile()) throw new Error('not a file');
      res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(readFileSync(path));
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/repo.git`;
});
afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
  rmSync(dir, { recursive: true, force: true });
});

function clone(credentials: Record<string, string> | undefined, into: string) {
  const creds = join(dir, `creds-${into}`);
  mkdirSync(creds);
  for (const [k, v] of Object.entries(credentials ?? {})) writeFileSync(join(creds, k), v);
  const tmp = join(dir, `tmp-${into}`);
  mkdirSync(tmp);
  // Asynchronous: the HTTP server answering git runs in this process.
  const child = spawn('sh', ['-c', `set -eu\n${GIT_AUTH_SCRIPT}git clone --quiet -- "$REPO_URL" "$DEST"`], {
    env: {
      PATH: process.env.PATH,
      HOME: tmp,
      TMPDIR: tmp,
      GIT_TERMINAL_PROMPT: '0',
      GIT_CREDENTIALS_DIR: creds,
      REPO_URL: url,
      DEST: join(dir, into),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise<{ status: number | null; stdout: string; stderr: string }>((r) =>
    child.on('close', (status) => r({ status, stdout, stderr })),
  );
}

describe('git credentials for private repositories', () => {
  it('clones with a token given through GIT_ASKPASS, which appears in no output', async () => {
    const r = await clone({ username: 'bot', password: TOKEN }, 'ok');
    expect(r.status, r.stderr).toBe(0);
    expect(readFileSync(join(dir, 'ok', 'langgraph.json'), 'utf8')).toBe('{"graphs":{}}');
    expect(r.stdout + r.stderr).not.toContain(TOKEN);
    expect(
      execFileSync('git', ['remote', 'get-url', 'origin'], { cwd: join(dir, 'ok'), encoding: 'utf8' }).trim(),
    ).toBe(url);
  });

  it('fails without credentials (the server really asks)', async () => {
    const r = await clone(undefined, 'none');
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/Authentication failed|could not read Username/);
  });

  it('mounts the Secret in the clone step only and names it nowhere else', () => {
    const config = kubernetesRuntimeConfigSchema.parse({
      registry: 'r.example.com/a',
      gitImage: 'g',
      baseImage: 'b',
      gitCredentialsSecretPrefix: 'git-',
    });
    const id = '0b6c8f1e-5d0a-4f7b-9d7e-2a7c1f0e9b11';
    const target = {
      namespace: 'agents',
      name: `ag-${id}`,
      deploymentId: id,
      tenantId: 't',
      owner: { apiVersion: 'agentplane.dev/v1alpha1', kind: 'AgentDeployment', name: `ag-${id}`, uid: 'u' },
    };
    const job = makeBuildJob(
      target,
      {
        revision: `ag-${id}-r1`,
        repoUrl: 'https://git.example.com/private.git',
        repoRef: 'main',
        graphConfigPath: 'langgraph.json',
        gitCredentialsSecret: 'git-bot',
      },
      config,
    );
    validateK8s(job);
    const pod = job.spec!.template.spec!;
    const mounts = (c: { volumeMounts?: { name: string }[] }) => (c.volumeMounts ?? []).map((m) => m.name);
    expect(pod.initContainers![0]!.volumeMounts).toContainEqual({
      name: 'git-credentials',
      mountPath: GIT_CREDENTIALS_DIR,
      readOnly: true,
    });
    expect(mounts(pod.initContainers![1]!)).not.toContain('git-credentials'); // the build step runs the repository's code
    expect(mounts(pod.containers[0]!)).not.toContain('git-credentials');
    expect(pod.volumes).toContainEqual({
      name: 'git-credentials',
      secret: { secretName: 'git-bot', defaultMode: 0o440 },
    });
    expect(pod.initContainers![0]!.env!.find((e) => e.name === 'REPO_URL')!.value).toBe(
      'https://git.example.com/private.git',
    );
    // Unconfined AppArmor for BuildKit, as the field (1.30+) and as the annotation older servers read.
    expect(pod.initContainers![1]!.securityContext!.appArmorProfile).toEqual({ type: 'Unconfined' });
    expect(job.spec!.template.metadata!.annotations).toEqual({
      'container.apparmor.security.beta.kubernetes.io/build': 'unconfined',
    });
  });
});

describe('which repositories a tenant credential covers', () => {
  it.each([
    ['https://GitHub.com/acme/app.git', 'github.com/acme/app'],
    ['https://user@github.com/acme/app', 'github.com/acme/app'],
    ['https://git.example.com:8443/acme/app.git', 'git.example.com:8443/acme/app'],
    ['ssh://git@github.com/acme/app.git', 'github.com/acme/app'],
    ['git@github.com:acme/app.git', 'github.com/acme/app'],
    ['https://github.com/acme/../evil/app.git', 'github.com/evil/app'],
    ['git@github.com:acme/../evil/app.git', undefined],
    ['https://github.com/acme%2F..%2Fevil/app.git', undefined],
    ['file:///srv/repo.git', undefined],
    ['ext::sh -c touch% /tmp/x', undefined],
    ['https://github.com/', undefined],
  ])('%s -> %s', (url, path) => {
    expect(repositoryPath(url)).toBe(path);
  });

  it.each([
    ['github.com/acme/app', 'github.com/acme', true],
    ['github.com/acme/app', 'GitHub.com/acme/', true],
    ['github.com/acme/app', 'https://github.com/acme/app.git', true],
    ['github.com/acme-evil/app', 'github.com/acme', false],
    ['github.com.evil.net/acme/app', 'github.com', false],
    ['github.com/acme/app', 'gitlab.com/acme, github.com/acme', true],
    ['github.com/other/app', 'github.com/acme github.com/acme2', false],
  ])('%s under "%s": %s', (repo, scopes, allowed) => {
    expect(repositoryAllowed(repo, scopes)).toBe(allowed);
  });

  it('uses a Secret only for the tenant it names, and within its scope', () => {
    const secret = (meta: Record<string, any>) => ({ metadata: { name: 'git-t', ...meta } });
    const url = 'https://github.com/acme/app.git';
    expect(gitCredentialsFor(undefined, 't', url)).toHaveProperty('reason');
    expect(gitCredentialsFor(secret({}), 't', url)).toHaveProperty('reason');
    expect(gitCredentialsFor(secret({ labels: { 'agentplane.dev/tenant': 'other' } }), 't', url)).toHaveProperty(
      'reason',
    );
    expect(gitCredentialsFor(secret({ labels: { 'agentplane.dev/tenant': 't' } }), 't', url)).toEqual({
      name: 'git-t',
    });
    expect(gitCredentialsFor(secret({ annotations: { 'agentplane.dev/tenant': 't' } }), 't', url)).toEqual({
      name: 'git-t',
    });
    const scoped = secret({
      annotations: { 'agentplane.dev/tenant': 't', 'agentplane.dev/git-repositories': 'github.com/acme' },
    });
    expect(gitCredentialsFor(scoped, 't', url)).toEqual({ name: 'git-t' });
    expect(gitCredentialsFor(scoped, 't', 'https://github.com/other/app.git')).toHaveProperty('reason');
    expect(gitCredentialsFor(scoped, 't', 'not a url')).toHaveProperty('reason');
  });
});
