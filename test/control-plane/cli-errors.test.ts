// Every way `agentplane api-key create` (and the control plane's start) can fail to reach its store ends in one line
// on stderr naming the problem, and a non-zero exit: the real command in a child process.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeApiServer } from '../support/kube-apiserver/server.ts';
import { startKube } from './helpers/kube.ts';
import { cli, cliFails } from './helpers/process.ts';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'ap-cp-cli-errors-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** No kubeconfig anywhere and not in a cluster: the environment of a laptop without Kubernetes. */
function bareEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const home = join(dir, 'home');
  mkdirSync(home, { recursive: true });
  return { KUBECONFIG: '', KUBERNETES_SERVICE_HOST: '', HOME: home, ...extra };
}

/** Runs the command expecting failure: exit code 1 and exactly one line on stderr, without a stack trace. */
async function oneLineFailure(args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  const { code, stderr } = await cliFails(args, env);
  const lines = stderr.split('\n').filter((l) => l.trim() && !l.startsWith('npm warn'));
  expect(lines, stderr).toHaveLength(1);
  expect(stderr).not.toMatch(/^\s+at /m);
  expect(code, stderr).toBe(1);
  return lines[0]!;
}

const keyCreate = (...args: string[]) => ['api-key', 'create', '--tenant', 'team-1', ...args];

describe('api-key create: the store cannot be opened', () => {
  it('--data-dir below a regular file', async () => {
    const file = join(dir, 'a-file');
    writeFileSync(file, 'x');
    const line = await oneLineFailure(keyCreate('--init', '--data-dir', join(file, 'store')), bareEnv());
    expect(line).toMatch(
      /^agentplane api-key: cannot open the embedded store in --data-dir .*a-file\/store: ENOTDIR: not a directory/,
    );
  });

  it('--data-dir holding a file that is not a database', async () => {
    const data = join(dir, 'not-a-db');
    mkdirSync(data);
    writeFileSync(join(data, 'control-plane.db'), 'this is not SQLite '.repeat(300));
    const line = await oneLineFailure(keyCreate('--data-dir', data), bareEnv());
    expect(line).toBe(
      `agentplane api-key: cannot open the embedded store in --data-dir ${data}: file is not a database`,
    );
  });

  it('--store kubernetes without any Kubernetes configuration', async () => {
    const line = await oneLineFailure(keyCreate('--store', 'kubernetes'), bareEnv());
    expect(line).toMatch(/^agentplane api-key: no Kubernetes configuration: pass --kubeconfig FILE or set KUBECONFIG/);
  });

  it('KUBECONFIG naming a missing file, and a kubeconfig that is not YAML or names no cluster', async () => {
    const missing = join(dir, 'missing-kubeconfig');
    expect(await oneLineFailure(keyCreate('--store', 'kubernetes'), bareEnv({ KUBECONFIG: missing }))).toBe(
      `agentplane api-key: cannot load kubeconfig ${missing}: ENOENT: no such file or directory, open '${missing}'`,
    );
    const broken = join(dir, 'broken-kubeconfig');
    writeFileSync(broken, 'clusters: [ {name: x\n');
    expect(await oneLineFailure(keyCreate('--store', 'kubernetes', '--kubeconfig', broken), bareEnv())).toMatch(
      new RegExp(`^agentplane api-key: cannot load kubeconfig ${broken}: `),
    );
    const empty = join(dir, 'empty-kubeconfig');
    writeFileSync(empty, 'apiVersion: v1\nkind: Config\n');
    expect(await oneLineFailure(keyCreate('--store', 'kubernetes', '--kubeconfig', empty), bareEnv())).toBe(
      `agentplane api-key: cannot load kubeconfig ${empty}: it names no current cluster (current-context)`,
    );
  });

  it('an API server that is not listening', async () => {
    // A port that was free a moment ago: connections are refused.
    const port = await new Promise<number>((res) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => res(p));
      });
    });
    const kube = new KubeApiServer();
    kube.url = `http://127.0.0.1:${port}`;
    const kubeconfig = kube.writeKubeconfig(join(dir, 'closed-kubeconfig'));
    const line = await oneLineFailure(keyCreate('--store', 'kubernetes'), bareEnv({ KUBECONFIG: kubeconfig }));
    expect(line).toMatch(
      new RegExp(
        `^agentplane api-key: cannot use the Kubernetes API server at http://127\\.0\\.0\\.1:${port} \\(namespace default\\): fetch failed: .*ECONNREFUSED`,
      ),
    );
  });

  it('an API server that refuses the credentials, and one without the CRDs', async () => {
    const kube = await startKube({ token: 'the-right-token' });
    try {
      const wrong = join(dir, 'wrong-token-kubeconfig');
      writeFileSync(wrong, readFileSync(kube.kubeconfig, 'utf8').replace('the-right-token', 'a-wrong-token'));
      expect(
        await oneLineFailure(
          keyCreate('--store', 'kubernetes', '--namespace', 'agents'),
          bareEnv({ KUBECONFIG: wrong }),
        ),
      ).toBe(
        `agentplane api-key: cannot use the Kubernetes API server at ${kube.server.url} (namespace agents): HTTP 401 Unauthorized`,
      );
      // The right credentials work.
      const key = (
        await cli(keyCreate('--store', 'kubernetes', '--namespace', 'agents'), bareEnv({ KUBECONFIG: kube.kubeconfig }))
      ).stdout.trim();
      expect(key.length).toBeGreaterThan(20);
    } finally {
      await kube.stop();
    }
    const bare = new KubeApiServer();
    await bare.start();
    try {
      const kubeconfig = bare.writeKubeconfig(join(dir, 'no-crds-kubeconfig'));
      expect(await oneLineFailure(keyCreate('--store', 'kubernetes'), bareEnv({ KUBECONFIG: kubeconfig }))).toBe(
        'agentplane api-key: the AgentDeployment custom resource is not installed in this cluster: kubectl apply -f crds/',
      );
    } finally {
      await bare.stop();
    }
  });
});

describe('api-key create: the store opens but refuses the key', () => {
  it('a data dir holding an incompatible database', async () => {
    const data = join(dir, 'foreign-db');
    mkdirSync(data);
    const db = new Database(join(data, 'control-plane.db'));
    db.exec('CREATE TABLE api_keys (id TEXT PRIMARY KEY)');
    db.close();
    const line = await oneLineFailure(keyCreate('--data-dir', data), bareEnv());
    expect(line).toBe(
      `agentplane api-key: could not store the key (--data-dir ${data}): table api_keys has no column named hash`,
    );
  });

  it('a bad tenant id is a usage error (exit code 2) and touches no store', async () => {
    const data = join(dir, 'untouched');
    const { code, stderr } = await cliFails(keyCreate('--tenant', 'bad tenant!', '--data-dir', data), bareEnv());
    expect(code).toBe(2);
    expect(stderr).toMatch(/^agentplane api-key: --tenant: invalid workspace id "bad tenant!"/);
    expect(existsSync(data)).toBe(false);
  });
});

describe('control-plane: the same problems at start', () => {
  it('one line and exit code 1', async () => {
    const file = join(dir, 'another-file');
    writeFileSync(file, 'x');
    const line = await oneLineFailure(['control-plane', '--port', '0', '--data-dir', join(file, 'store')], bareEnv());
    expect(line).toMatch(
      /^agentplane control-plane: cannot open the embedded store in --data-dir .*another-file\/store: ENOTDIR/,
    );
    expect(await oneLineFailure(['control-plane', '--port', '0', '--store', 'kubernetes'], bareEnv())).toMatch(
      /^agentplane control-plane: no Kubernetes configuration/,
    );
  });
});

describe('api-key create: an API server still getting ready', () => {
  it('waits out 429 "storage is (re)initializing" (a real server, right after helm install created the CRDs)', async () => {
    // The real kube-apiserver's answer for a custom resource whose storage is not ready yet (test/kube/ met it).
    const initializing = {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'storage is (re)initializing',
      reason: 'TooManyRequests',
      details: { retryAfterSeconds: 1 },
      code: 429,
    };
    const kube = await startKube();
    let refused = 0;
    // In front of the double: the first two requests for AgentDeployments get that answer, the rest go through.
    const front = createHttpServer((req, res) => {
      if (req.url?.includes('/agentdeployments') && refused < 2) {
        refused++;
        res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '1' });
        res.end(JSON.stringify(initializing));
        return;
      }
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        void fetch(`${kube.server.url}${req.url}`, {
          method: req.method,
          headers: {
            authorization: req.headers.authorization ?? '',
            'content-type': req.headers['content-type'] ?? 'application/json',
          },
          body: chunks.length > 0 ? Buffer.concat(chunks) : undefined,
        }).then(async (upstream) => {
          res.writeHead(upstream.status, {
            'content-type': upstream.headers.get('content-type') ?? 'application/json',
          });
          res.end(Buffer.from(await upstream.arrayBuffer()));
        });
      });
    });
    await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
    try {
      const through = new KubeApiServer();
      through.url = `http://127.0.0.1:${(front.address() as { port: number }).port}`;
      const kubeconfig = through.writeKubeconfig(join(dir, 'initializing-kubeconfig'));
      const key = (
        await cli(keyCreate('--store', 'kubernetes', '--namespace', 'agents'), bareEnv({ KUBECONFIG: kubeconfig }))
      ).stdout.trim();
      expect(key.length).toBeGreaterThan(20);
      expect(refused).toBe(2);
    } finally {
      front.closeAllConnections();
      await new Promise((r) => front.close(r));
      await kube.stop();
    }
  });
});
