// A graph whose project installs its own, older @langchain/langgraph (1.0.7, with @langchain/core 1.1 and zod 3)
// must run on the server's checkpointers, which come from the server's copy.
import { execFile } from 'node:child_process';
import { copyFile, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { MemorySaver } from '@langchain/langgraph';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadGraphs, type GraphRegistry } from '../../../src/agent-server/graphs/index.ts';
import { silentLogger } from '../../../src/lib/logger.ts';

const fixture = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../fixtures/graphs/foreign');
let project: string;
let registry: GraphRegistry;

beforeAll(async () => {
  project = await mkdtemp(path.join(tmpdir(), 'ap-foreign-'));
  for (const f of ['package.json', 'graph.ts', 'langgraph.json'])
    await copyFile(path.join(fixture, f), path.join(project, f));
  // The npm cache makes this quick and offline after the first run.
  await promisify(execFile)('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'], {
    cwd: project,
    timeout: 110_000,
  });
  registry = await loadGraphs(path.join(project, 'langgraph.json'), { logger: silentLogger() });
}, 120_000);

afterAll(async () => {
  if (project) await rm(project, { recursive: true, force: true });
});

describe('a graph compiled by another installed copy of @langchain/langgraph', () => {
  it('really is a different copy and version', async () => {
    const manifest = JSON.parse(
      await readFile(path.join(project, 'node_modules/@langchain/langgraph/package.json'), 'utf8'),
    ) as { version: string };
    expect(manifest.version).toBe('1.0.7');
    const graph = await registry.getGraph('foreign');
    // Not an instance of our Pregel: the server must treat it structurally.
    const ours = await import('@langchain/langgraph/pregel');
    expect(graph instanceof ours.Pregel).toBe(false);
  });

  it.each([
    ['MemorySaver', () => new MemorySaver()],
    ['SqliteSaver', () => SqliteSaver.fromConnString(':memory:')],
  ])('runs twice on one thread with our %s and reads the state back', async (_name, makeSaver) => {
    const graph = await registry.getGraph('foreign', {}, { checkpointer: makeSaver() });
    const config = { configurable: { thread_id: 'thread-1' } };
    await graph.invoke({ messages: [{ role: 'human', content: 'hi' }] }, config);
    await graph.invoke({ messages: [{ role: 'human', content: 'again' }] }, config);
    const state = await graph.getState(config);
    const values = state.values as { messages: Array<{ content: string; getType(): string }>; visits: number };
    expect(values.messages.map((m) => [m.getType(), m.content])).toEqual([
      ['human', 'hi'],
      ['ai', 'seen 1'],
      ['human', 'again'],
      ['ai', 'seen 3'],
    ]);
    expect(values.visits).toBe(2);
    expect(state.next).toEqual([]);
    const history = [];
    for await (const snapshot of graph.getStateHistory(config)) history.push(snapshot);
    expect(history.length).toBeGreaterThanOrEqual(4);
  });

  it('derives schemas through the project own zod 3 helpers', async () => {
    const s = await registry.getSchemas('foreign');
    expect(s.state_schema).toMatchObject({
      type: 'object',
      properties: {
        messages: { langgraph_type: 'messages' },
        visits: { type: 'number', description: 'times the node ran' },
      },
    });
  });

  it('draws the graph', async () => {
    const drawn = await registry.getDrawableGraph('foreign', {});
    expect((drawn.nodes as Array<{ id: string }>).map((n) => n.id)).toEqual(['__start__', 'reply', '__end__']);
  });
});
