// `agentplane logs <deployment> [--follow]`: the serving agent's log lines, the last ones first, then live as they
// are stored, following the traffic to the next revision, ending when the deployment is deleted. The real CLI in a
// child process against a real control plane (embedded store); the test writes the agent's lines and the statuses
// as the runtime would. Another workspace's deployment is a 404, before any line.
import { spawn, execFile, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deploymentName, revisionName } from '../../src/resources/index.ts';
import { apiHarness, githubBody, type ApiHarness } from '../control-plane/helpers/harness.ts';
import { serve, setRevision } from '../control-plane/helpers/operator-role.ts';

const BIN = resolve(import.meta.dirname, '../../bin/agentplane.mjs');
let h: ApiHarness;
let url: string;
const env = (key = h.key, tenant = 'tenant-a') => ({
  ...process.env,
  AGENTPLANE_URL: url,
  AGENTPLANE_API_KEY: key,
  AGENTPLANE_TENANT: tenant,
});

function cli(args: string[], key?: string, tenant?: string) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((res) => {
    execFile(process.execPath, [BIN, ...args], { env: env(key, tenant) }, (err, stdout, stderr) =>
      res({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const call = (method: 'POST' | 'PATCH' | 'DELETE', path: string, payload?: object) =>
  h.app.inject({ method, url: path, headers: { 'x-api-key': h.key, 'x-tenant-id': 'tenant-a' }, payload });

/** What the agent server of revision n prints, as the runtime stores it (pino JSON). */
const agentSays = (id: string, n: number, ...msgs: string[]) =>
  h.store.appendLogs(
    h.store.namespace,
    revisionName(deploymentName(id), n),
    'deploy',
    msgs.map((msg) => JSON.stringify({ level: 30, time: Date.parse('2026-12-01T10:00:00Z'), msg })),
  );

/** Output of a running child, awaited until it holds `text`. */
function reader(child: ChildProcessWithoutNullStreams) {
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const until = (text: string) =>
    new Promise<void>((res, rej) => {
      const check = () => out.includes(text) && (res(), true);
      if (check()) return;
      const onData = () => check() && child.stdout.off('data', onData);
      child.stdout.on('data', onData);
      child.once(
        'exit',
        (code) => !out.includes(text) && rej(new Error(`exited ${code} before "${text}":\n${out}${err}`)),
      );
    });
  return { until, out: () => out, err: () => err };
}

beforeAll(async () => {
  h = await apiHarness();
  url = await h.app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(async () => {
  await h.close();
});

describe('agentplane logs', () => {
  it('prints the last lines, follows new ones live and into the next revision, ends with the deployment', async () => {
    const res = await call('POST', '/v2/deployments', githubBody('chatty'));
    const id = (res.json() as { id: string }).id;
    await setRevision(h.store, id, 1, 'DEPLOYED');
    await serve(h.store, id, 1);
    await agentSays(id, 1, ...Array.from({ length: 5 }, (_, i) => `old line ${i}`));

    // Without --follow: the last --tail lines, read as people read logs.
    const last = await cli(['logs', 'chatty', '--tail', '2']);
    expect(last.code, last.stderr).toBe(0);
    expect(last.stdout).toBe('10:00:00 INFO  old line 3\n10:00:00 INFO  old line 4\n');

    const child = spawn(process.execPath, [BIN, 'logs', 'chatty', '--follow', '--tail', '1'], { env: env() });
    const out = reader(child);
    try {
      await out.until('old line 4');
      expect(out.out()).not.toContain('old line 3');
      // Lines the agent logs now arrive while the command runs.
      await agentSays(id, 1, 'a run started');
      await out.until('a run started');
      // Traffic moves to revision 2: its lines follow, under a line saying so.
      await call('PATCH', `/v2/deployments/${id}`, { source_revision_config: { repo_ref: 'next' } });
      await setRevision(h.store, id, 2, 'DEPLOYED');
      await agentSays(id, 2, 'revision two listening');
      await serve(h.store, id, 2);
      await out.until('revision two listening');
      expect(out.err()).toContain('--- chatty revision 2 ---');
      // Deleting the deployment ends the stream (and the command, exit 0).
      const exited = new Promise<number | null>((r) => child.once('exit', r));
      expect((await call('DELETE', `/v2/deployments/${id}`)).statusCode).toBe(204);
      await h.store.delete('AgentDeployment', h.store.namespace, deploymentName(id)).catch(() => undefined);
      expect(await exited).toBe(0);
      expect(out.out().split('\n').filter(Boolean)).toEqual([
        '10:00:00 INFO  old line 4',
        '10:00:00 INFO  a run started',
        '10:00:00 INFO  revision two listening',
      ]);
    } finally {
      child.kill();
    }
  });

  it("another workspace's deployment, or a missing one, is a 404 before any line", async () => {
    const res = await call('POST', '/v2/deployments', githubBody('private'));
    const id = (res.json() as { id: string }).id;
    await setRevision(h.store, id, 1, 'DEPLOYED');
    await serve(h.store, id, 1);
    await agentSays(id, 1, 'secret business');
    const other = await cli(['logs', id, '--follow'], h.otherKey, 'tenant-c');
    expect(other.code).toBe(1);
    expect(other.stderr).toBe(`agentplane logs: no deployment named or with id "${id}"\n`);
    expect(other.stdout).toBe('');
    const stream = await fetch(`${url}/v2/deployments/${id}/logs/stream`, {
      headers: { 'x-api-key': h.otherKey, 'x-tenant-id': 'tenant-c' },
    });
    expect(stream.status).toBe(404);
    expect(await stream.text()).not.toContain('secret');
  });
});
