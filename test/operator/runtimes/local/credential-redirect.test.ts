// A credentialed clone follows no redirect: the integration's host answers the clone with a redirect to another
// server, which would ask for credentials (401) and receive the token from git's askpass if git went there. The
// local runtime clones with http.followRedirects=false: the build fails, the other server is never contacted, and
// the token is in no log line or status.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../../src/lib/logger.ts';
import { LocalRuntime, PACKAGE_DIR } from '../../../../src/operator/runtimes/local/index.ts';
import { detectSandbox, sharedTrees } from '../../../../src/operator/runtimes/local/sandbox.ts';
import type { BuildSpec, LogType, RevisionLogSink, RevisionRef } from '../../../../src/operator/runtimes/types.ts';

const TOKEN = 'redirect-token-0b1c2d3e4f';

let tmp: string;
let integrationHost: Server;
let elsewhere: Server;
const elsewhereSaw: string[] = [];
const logLines: string[] = [];
let runtime: LocalRuntime;
let hostPort: number;

const listen = async (s: Server) => {
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return (s.address() as { port: number }).port;
};

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-redirect-'));
  elsewhere = createServer((req, res) => {
    elsewhereSaw.push(`${req.method} ${req.url} ${req.headers.authorization ?? '-'}`);
    res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="x"' }).end();
  });
  const elsewherePort = await listen(elsewhere);
  integrationHost = createServer((req, res) => {
    res.writeHead(301, { location: `http://127.0.0.1:${elsewherePort}${req.url}` }).end();
  });
  hostPort = await listen(integrationHost);
  const logs: RevisionLogSink = {
    append: async (_ref: RevisionRef, _type: LogType, lines: string[]) => void logLines.push(...lines),
  };
  const { sandbox } = await detectSandbox('auto', { hidden: [join(tmp, 'data')], shared: sharedTrees(PACKAGE_DIR) });
  runtime = new LocalRuntime({
    agentExecutorThreads: 0,
    dataDir: join(tmp, 'data'),
    logs,
    logger: silentLogger(),
    sandbox,
    gitCredential: async () => ({ host: `127.0.0.1:${hostPort}`, username: 'bot', token: TOKEN }),
  });
});

afterAll(async () => {
  await runtime?.shutdown();
  await new Promise((r) => integrationHost?.close(r));
  await new Promise((r) => elsewhere?.close(r));
  rmSync(tmp, { recursive: true, force: true });
});

describe('credentialed clone and redirects', () => {
  it('does not follow the redirect, so the token never reaches the other server', async () => {
    const spec: BuildSpec = {
      namespace: 'default',
      deployment: 'redir',
      deploymentId: 'dep-redir',
      revision: 'redir-r1',
      repoUrl: `http://127.0.0.1:${hostPort}/team/agent.git`,
      repoRef: 'main',
      graphConfigPath: 'langgraph.json',
      tenantId: 't1',
      integrationId: '0f0e0d0c-0b0a-4909-8807-060504030201',
    };
    let status = await runtime.build(spec);
    while (status.phase === 'Running') {
      await new Promise((r) => setTimeout(r, 100));
      status = await runtime.build(spec);
    }
    expect(status.phase).toBe('Failed');
    expect(elsewhereSaw).toEqual([]);
    expect(JSON.stringify(status)).not.toContain(TOKEN);
    expect(logLines.join('\n')).not.toContain(TOKEN);
  });
});
