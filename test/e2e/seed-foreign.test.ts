// A real agent-server process serving a graph from a project that installs its own, older
// @langchain/langgraph (1.0.7, with @langchain/core 1.1 and zod 3): two runs on one thread through the JS SDK.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const fixture = path.join(root, 'test/fixtures/graphs/foreign');

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

let project: string;
let proc: ChildProcess | undefined;
let url: string;
let output = '';

beforeAll(async () => {
  project = await mkdtemp(path.join(tmpdir(), 'ap-e2e-foreign-'));
  for (const f of ['package.json', 'graph.ts', 'langgraph.json'])
    await copyFile(path.join(fixture, f), path.join(project, f));
  await promisify(execFile)('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'], {
    cwd: project,
    timeout: 110_000,
  });
  const port = await freePort();
  proc = spawn(
    process.execPath,
    [
      path.join(root, 'bin/agentplane.mjs'),
      'agent-server',
      '--config',
      path.join(project, 'langgraph.json'),
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--data-dir',
      path.join(project, '.data'),
    ],
    { cwd: root, env: { ...process.env, LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  proc.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`agent-server exited with ${proc.exitCode}:\n${output}`);
    if (
      await fetch(`${url}/ok`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    if (Date.now() > deadline) throw new Error(`agent-server did not answer /ok within 60 s:\n${output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}, 180_000);

afterAll(async () => {
  if (proc && proc.exitCode === null) {
    const exited = new Promise((r) => proc!.once('exit', r));
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc!.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }
  if (project) await rm(project, { recursive: true, force: true });
});

describe('agent-server on a graph from another @langchain/langgraph install', () => {
  it('runs it twice on one thread and serves its state, schemas and drawing', async () => {
    const client = new Client({ apiUrl: url });
    const thread = await client.threads.create();
    for (const text of ['hi', 'again']) {
      const run = await client.runs.create(thread.thread_id, 'foreign', {
        input: { messages: [{ role: 'human', content: text }] },
      });
      await client.runs.join(thread.thread_id, run.run_id);
      expect((await client.runs.get(thread.thread_id, run.run_id)).status).toBe('success');
    }
    const state = await client.threads.getState<{ messages: Array<{ type: string; content: string }>; visits: number }>(
      thread.thread_id,
    );
    expect(state.values.messages.map((m) => [m.type, m.content])).toEqual([
      ['human', 'hi'],
      ['ai', 'seen 1'],
      ['human', 'again'],
      ['ai', 'seen 3'],
    ]);
    expect(state.values.visits).toBe(2);
    expect(state.next).toEqual([]);

    const [assistant] = await client.assistants.search({ graphId: 'foreign' });
    // uuid5(6ba7b821-9dad-11d1-80b4-00c04fd430c8, "foreign"): the system assistant of the graph.
    expect(assistant?.assistant_id).toBe('40e88202-34e8-5f73-8b48-e70f743336d9');
    const schemas = await client.assistants.getSchemas(assistant!.assistant_id);
    expect(schemas.state_schema).toMatchObject({ properties: { visits: { type: 'number' } } });
    const drawn = await client.assistants.getGraph(assistant!.assistant_id);
    expect((drawn.nodes as Array<{ id: string }>).map((n) => n.id)).toEqual(['__start__', 'reply', '__end__']);
  });
});
