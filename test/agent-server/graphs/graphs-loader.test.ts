import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MemorySaver } from '@langchain/langgraph';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  GraphConfigError,
  loadGraphs,
  systemAssistantId,
  type GraphRegistry,
} from '../../../src/agent-server/graphs/index.ts';
import { NotFoundError } from '../../../src/lib/errors.ts';
import { silentLogger } from '../../../src/lib/logger.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const basicDir = path.resolve(here, '../../fixtures/graphs/basic');
const basicFile = path.join(basicDir, 'graphs.ts');
const logger = silentLogger();

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'ap-graphs-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/** Writes a langgraph.json into a fresh temp folder and returns its path. */
async function writeConfig(json: unknown): Promise<string> {
  const dir = await mkdtemp(path.join(tmp, 'cfg-'));
  const file = path.join(dir, 'langgraph.json');
  await writeFile(file, typeof json === 'string' ? json : JSON.stringify(json));
  return file;
}

async function loadError(configPath: string): Promise<Error> {
  const err = await loadGraphs(configPath, { logger }).then(
    () => null,
    (e: unknown) => e as Error,
  );
  if (!err) throw new Error('expected loadGraphs to fail');
  return err;
}

describe('systemAssistantId', () => {
  it('is the uuid5 the reference servers use', () => {
    expect(systemAssistantId('agent')).toBe('fe096781-5601-53d2-b2f6-0d3403f7e9ca');
    expect(systemAssistantId('other')).not.toBe(systemAssistantId('agent'));
  });

  it('answers the same id again, for any number of graph ids (the remembered ones are bounded)', () => {
    const first = Array.from({ length: 1500 }, (_, i) => systemAssistantId(`graph-${i}`));
    expect(new Set(first).size).toBe(1500);
    expect(Array.from({ length: 1500 }, (_, i) => systemAssistantId(`graph-${i}`))).toEqual(first);
    expect(systemAssistantId('agent')).toBe('fe096781-5601-53d2-b2f6-0d3403f7e9ca');
  });
});

describe('loadGraphs on a langgraph.json naming every graph shape', () => {
  let registry: GraphRegistry;
  beforeAll(async () => {
    process.env.FIXTURE_OTHER = 'set by the environment';
    registry = await loadGraphs(path.join(basicDir, 'langgraph.json'), { logger });
  });

  it('lists one spec per graph with absolute paths, export names and system assistant ids', () => {
    expect(registry.configPath).toBe(path.join(basicDir, 'langgraph.json'));
    expect(registry.projectDir).toBe(basicDir);
    const byId = Object.fromEntries(registry.specs.map((s) => [s.graphId, s]));
    expect(Object.keys(byId).sort()).toEqual(
      ['async_factory', 'builder', 'compiled', 'default_export', 'factory', 'messages', 'zod'].sort(),
    );
    expect(byId.compiled).toEqual({
      graphId: 'compiled',
      path: basicFile,
      exportName: 'compiled',
      assistantId: systemAssistantId('compiled'),
    });
    expect(byId.default_export?.exportName).toBe('default');
    expect(byId.messages?.exportName).toBe('messages');
  });

  it('reads env from the .env file and never overrides variables already set', () => {
    expect(registry.env).toEqual({ FIXTURE_GREETING: 'hello from dotenv', FIXTURE_OTHER: 'quoted value' });
    expect(process.env.FIXTURE_GREETING).toBe('hello from dotenv');
    expect(process.env.FIXTURE_OTHER).toBe('set by the environment');
  });

  it.each(['compiled', 'builder', 'async_factory', 'default_export'])(
    'runs %s with an attached checkpointer',
    async (id) => {
      const checkpointer = new MemorySaver();
      const graph = await registry.getGraph(id, {}, { checkpointer });
      expect(graph.checkpointer).toBe(checkpointer);
      const config = { configurable: { thread_id: `t-${id}` } };
      expect(await graph.invoke({}, config)).toEqual({ count: 1, label: 'count=1' });
      await graph.invoke({}, config);
      const state = await graph.getState(config);
      expect(state.values).toEqual({ count: 2, label: 'count=2' });
      expect(state.next).toEqual([]);
    },
  );

  it('calls a factory export with the run config', async () => {
    const a = await registry.getGraph('factory', { configurable: { suffix: 'a' } });
    const b = await registry.getGraph('factory', { configurable: { suffix: 'b' } });
    expect(await a.invoke({})).toEqual({ count: 0, label: 'suffix=a' });
    expect(await b.invoke({})).toEqual({ count: 0, label: 'suffix=b' });
  });

  it('tells factory exports (whose graph depends on the config) from compiled graphs', () => {
    expect(registry.isFactory('factory')).toBe(true);
    expect(registry.isFactory('async_factory')).toBe(true);
    for (const id of ['compiled', 'builder', 'default_export', 'zod', 'nope'])
      expect(registry.isFactory(id)).toBe(false);
  });

  it('throws NotFoundError for a graph it does not know', async () => {
    await expect(registry.getGraph('nope')).rejects.toBeInstanceOf(NotFoundError);
    await expect(registry.getSchemas('nope')).rejects.toThrow(/Graph "nope" not found/);
  });

  it('derives typed schemas from a zod StateSchema and its context', async () => {
    const s = await registry.getSchemas('zod');
    expect(s.state_schema).toMatchObject({
      type: 'object',
      properties: {
        messages: { langgraph_type: 'messages' },
        topic: { type: 'string', description: 'what the chat is about' },
      },
      required: ['topic'],
    });
    expect(s.input_schema).toMatchObject({ properties: { messages: {}, topic: { type: 'string' } } });
    expect(s.output_schema).toMatchObject({ properties: { topic: { type: 'string' } } });
    expect(s.config_schema).toMatchObject({ properties: { model: { type: 'string' } }, required: ['model'] });
    expect(s.context_schema).toEqual(s.config_schema);
  });

  it('types Annotation channels by what they show at runtime and by their TypeScript types; a missing context stays permissive', async () => {
    const s = await registry.getSchemas('compiled');
    // count has a reducer and a default (0), kept beside its source type; label is a LastValue, typed only in TypeScript.
    expect(s.state_schema).toEqual({
      title: 'compiled_state',
      type: 'object',
      properties: { count: { type: 'number', default: 0 }, label: { type: 'string' } },
      $schema: 'http://json-schema.org/draft-07/schema#',
    });
    expect(Object.keys((s.input_schema as { properties: object }).properties).sort()).toEqual(['count', 'label']);
    const any = { title: 'compiled_config', type: 'object', properties: {}, additionalProperties: true };
    expect(s.config_schema).toEqual(any);
    expect(s.context_schema).toEqual(any);
    const m = await registry.getSchemas('messages');
    expect(m.state_schema).toMatchObject({
      title: 'messages_state',
      type: 'object',
      properties: {
        messages: {
          langgraph_type: 'messages',
          description: 'A list of chat messages',
          type: 'array',
          items: { $ref: '#/definitions/BaseMessage' },
        },
      },
      definitions: { BaseMessage: { oneOf: expect.any(Array) } },
    });
    // Cached per compiled graph: the same answer object again.
    expect(await registry.getSchemas('compiled')).toBe(s);
  });

  it('draws the graph as nodes and edges', async () => {
    const drawn = await registry.getDrawableGraph('compiled', {});
    expect((drawn.nodes as Array<{ id: string }>).map((n) => n.id)).toEqual(['__start__', 'bump', 'name', '__end__']);
    expect(drawn.edges).toEqual([
      { source: '__start__', target: 'bump', conditional: false },
      { source: 'bump', target: 'name', conditional: false },
      { source: 'name', target: '__end__', conditional: false },
    ]);
    const xray = await registry.getDrawableGraph('messages', { xray: true });
    expect((xray.nodes as Array<{ id: string }>).map((n) => n.id)).toContain('echo');
  });
});

describe('loadGraphs rejects bad configuration with a message naming the problem', () => {
  it('a missing langgraph.json', async () => {
    const err = await loadError(path.join(tmp, 'absent', 'langgraph.json'));
    expect(err).toBeInstanceOf(GraphConfigError);
    expect(err.message).toMatch(/cannot read graph config .*absent/);
  });

  it('invalid JSON', async () => {
    const err = await loadError(await writeConfig('{"graphs": '));
    expect(err.message).toMatch(/is not valid JSON/);
  });

  it('no graphs, or graphs of the wrong type', async () => {
    expect((await loadError(await writeConfig({}))).message).toMatch(/invalid: graphs: /);
    expect((await loadError(await writeConfig({ graphs: {} }))).message).toMatch(
      /graphs: must name at least one graph/,
    );
    expect((await loadError(await writeConfig({ graphs: { a: 3 } }))).message).toMatch(/graphs\.a/);
    expect((await loadError(await writeConfig({ graphs: { a: './x.ts:g' }, env: 5 }))).message).toMatch(/env/);
  });

  it('an http.middleware_order the platform does not have', async () => {
    const config = { graphs: { a: './x.ts:g' }, http: { middleware_order: 'auth-first' } };
    expect((await loadError(await writeConfig(config))).message).toMatch(
      /invalid: http\.middleware_order: must be "middleware_first" or "auth_first"/,
    );
  });

  it('a file that does not exist', async () => {
    const err = await loadError(await writeConfig({ graphs: { agent: './missing.ts:graph' } }));
    // Named as langgraph.json names it, relative to its folder, not by the server's absolute path.
    expect(err.message).toBe('graph "agent": file missing.ts does not exist');
  });

  it('a file that is not a module', async () => {
    const err = await loadError(await writeConfig({ graphs: { agent: './graph.json:graph' } }));
    expect(err.message).toMatch(/graph "agent": ".\/graph.json" must be a .ts, .mts, .js or .mjs module/);
    const python = await loadError(await writeConfig({ graphs: { agent: './graph.py:graph' } }));
    expect(python.message).toMatch(
      /graph "agent": ".\/graph.py" is a Python graph: this platform serves LangGraph.js graphs \(JavaScript or TypeScript\) only/,
    );
  });

  it('a missing export, listing the exports there are', async () => {
    const err = await loadError(await writeConfig({ graphs: { agent: `${basicFile}:nothing` } }));
    expect(err.message).toMatch(/graph "agent": .*graphs\.ts has no export "nothing" \(exports: .*compiled/);
  });

  it('a misspelled export, naming the one meant', async () => {
    const err = await loadError(await writeConfig({ graphs: { agent: `${basicFile}:compild` } }));
    expect(err.message).toMatch(/graph "agent": .*graphs\.ts has no export "compild" \(did you mean "compiled"\?\)$/);
  });

  it('an export that is not a graph', async () => {
    const err = await loadError(await writeConfig({ graphs: { agent: `${basicFile}:notAGraph` } }));
    expect(err.message).toMatch(
      /graph "agent": export "notAGraph" of .* is an object of type Object, not a LangGraph graph/,
    );
  });

  it("a module that throws while importing: where in the user's own code, in its own terms", async () => {
    const cfg = await writeConfig({ graphs: { agent: './src/boom.mjs:graph' } });
    const dir = path.dirname(cfg);
    await mkdir(path.join(dir, 'src'));
    await writeFile(path.join(dir, 'src', 'boom.mjs'), "import { setup } from './setup.mjs';\nsetup();\n");
    // Thrown two files deep, the message quoting an absolute path of the project.
    await writeFile(
      path.join(dir, 'src', 'setup.mjs'),
      `export function setup() {\n  throw new Error('cannot read ' + ${JSON.stringify(dir)} + '/prompts/system.txt');\n}\n`,
    );
    expect((await loadError(cfg)).message).toBe(
      'graph "agent": importing src/boom.mjs failed: src/setup.mjs:2:9: cannot read prompts/system.txt',
    );
  });

  it('a TypeScript module that throws: the line and column of its source', async () => {
    const cfg = await writeConfig({ graphs: { agent: './agent.ts:graph' } });
    await writeFile(
      path.join(path.dirname(cfg), 'agent.ts'),
      "type Model = { name: string };\nconst model: Model | undefined = undefined;\nif (!model) throw new Error('no model configured');\nexport const graph = model;\n",
    );
    expect((await loadError(cfg)).message).toBe(
      'graph "agent": importing agent.ts failed: agent.ts:3:19: no model configured',
    );
  });

  it('an env file that does not exist', async () => {
    const err = await loadError(await writeConfig({ graphs: { agent: `${basicFile}:compiled` }, env: '.env.missing' }));
    expect(err.message).toMatch(/env file .*\.env\.missing .*cannot be read/);
  });

  it('a factory whose result is not a graph fails when the graph is requested', async () => {
    const cfg = await writeConfig({ graphs: { agent: './factory.mjs:make' } });
    await writeFile(path.join(path.dirname(cfg), 'factory.mjs'), 'export const make = async () => ({ nodes: 1 });\n');
    const registry = await loadGraphs(cfg, { logger });
    await expect(registry.getGraph('agent')).rejects.toThrow(
      /graph "agent": the graph returned by factory "make" is an object of type Object, not a LangGraph graph/,
    );
  });
});

describe('the @langchain/langgraph version of the graph project', () => {
  async function projectWithVersion(version: string): Promise<string> {
    const dir = await mkdtemp(path.join(tmp, 'ver-'));
    const pkgDir = path.join(dir, 'node_modules', '@langchain', 'langgraph');
    await mkdir(pkgDir, { recursive: true });
    // A stand-in install: only its manifest is read before the version is refused.
    await writeFile(path.join(pkgDir, 'package.json'), JSON.stringify({ name: '@langchain/langgraph', version }));
    await writeFile(path.join(dir, 'graph.mjs'), "throw new Error('must not be imported');\n");
    await writeFile(path.join(dir, 'langgraph.json'), JSON.stringify({ graphs: { old: './graph.mjs:graph' } }));
    return path.join(dir, 'langgraph.json');
  }

  it.each(['0.2.74', '0.4.9', '2.0.0'])('refuses %s with the supported range in the message', async (version) => {
    const err = await loadError(await projectWithVersion(version));
    expect(err).toBeInstanceOf(GraphConfigError);
    expect(err.message).toContain(`graph "old": its project uses @langchain/langgraph ${version}`);
    expect(err.message).toContain('>=1.0.0 <2.0.0');
  });
});
