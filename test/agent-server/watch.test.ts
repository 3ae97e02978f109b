// `agentplane agent-server --watch`, as `langgraph dev` is used: the real CLI on a real project folder, driven with the
// SDK. An edit of the graph file starts the server again and the next run on an old thread uses the new code; a
// syntax error prints the user's own file:line:column and the watcher waits for the fix; files outside the code
// (a log the project writes, node_modules, the data folder) start nothing.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const BIN = join(ROOT, 'bin/agentplane.mjs');
let dir: string;
let child: ChildProcessWithoutNullStreams;
let output = '';
let client: Client;

/** The graph, answering `answer` into a list kept across runs of its thread. */
const graphFile = (answer: string) => `import { Annotation, START, StateGraph } from '@langchain/langgraph';
const State = Annotation.Root({ answers: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }) });
export const graph = new StateGraph(State)
  .addNode('answer', () => ({ answers: [${JSON.stringify(answer)}] }))
  .addEdge(START, 'answer')
  .compile();
`;

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as { port: number };
  await new Promise((r) => s.close(r));
  return port;
}

/** Resolves once the output holds `text` `times` times (rejects if the watcher itself ends). */
async function seen(text: string, times = 1): Promise<void> {
  while (output.split(text).length - 1 < times) {
    if (child.exitCode !== null) throw new Error(`the watcher ended before "${text}":\n${output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A run on `thread`; returns the thread's answers after it. */
async function answers(thread: string): Promise<string[]> {
  const state = (await client.runs.wait(thread, 'agent', { input: {} })) as { answers: string[] };
  return state.answers;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ap-watch-'));
  // The project's dependencies: a link to ours (node_modules is never watched).
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
  writeFileSync(join(dir, 'langgraph.json'), JSON.stringify({ graphs: { agent: './src/agent.ts:graph' } }));
  mkdirSync(join(dir, 'src'));
  writeFileSync(join(dir, 'src/agent.ts'), graphFile('v1'));
  const port = await freePort();
  child = spawn(
    process.execPath,
    [BIN, 'agent-server', '--watch', '--config', 'langgraph.json', '--port', String(port), '--data-dir', 'data'],
    { cwd: dir, env: { ...process.env, AGENTPLANE_EXECUTOR_THREADS: '0' } },
  );
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  client = new Client({ apiUrl: `http://127.0.0.1:${port}` });
  await seen('watching ');
  await seen('agent server listening');
}, 120_000);

afterAll(async () => {
  if (child && child.exitCode === null) {
    const ended = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await ended;
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('agent-server --watch', () => {
  it('an edit reloads the graph; the old thread keeps its history; a syntax error waits for the fix', async () => {
    const thread = (await client.threads.create()).thread_id;
    expect(await answers(thread)).toEqual(['v1']);

    // Files that are not the project's code start nothing: a log it writes, its data, its dependencies' folder.
    writeFileSync(join(dir, 'server.log'), 'a line\n');
    writeFileSync(join(dir, 'node_modules/.ap-watch-probe.ts'), 'export {};\n');
    rmSync(join(dir, 'node_modules/.ap-watch-probe.ts'), { force: true });

    writeFileSync(join(dir, 'src/agent.ts'), graphFile('v2'));
    await seen('src/agent.ts changed');
    await seen('agent server listening', 2);
    // The next run is the new code's, on the same thread: its earlier answer is still there.
    expect(await answers(thread)).toEqual(['v1', 'v2']);
    expect(output).not.toMatch(/server\.log changed|\.ap-watch-probe|data\/.* changed/);
    expect(output.split('changed:').length - 1).toBe(1);

    // A typo: the server cannot load the graph and ends; the message names the user's file, line and column.
    writeFileSync(join(dir, 'src/agent.ts'), 'const ok = 1;\nexport const graph = (;\n');
    await seen('agent.ts:2:23: Unexpected ";"');
    await seen('starts again on the next change');
    expect(child.exitCode).toBeNull();

    // The fix brings it back, with the thread as it was.
    writeFileSync(join(dir, 'src/agent.ts'), graphFile('v3'));
    await seen('agent server listening', 3);
    expect(await answers(thread)).toEqual(['v1', 'v2', 'v3']);
    expect((await client.threads.get(thread)).thread_id).toBe(thread);
  });
});
