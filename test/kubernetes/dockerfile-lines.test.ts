// langgraph.json "dockerfile_lines" in a Kubernetes build: the clone step's real script (its /workspace moved to a
// temporary folder) against a real git repository adds them after FROM, as root, before the generated file's own
// USER node; bad entries fail the step naming the entry; a clone image without node refuses a config that has them.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { CLONE_SCRIPT } from '../../src/operator/runtimes/kubernetes/build-job.ts';
import { agentDockerfile, DOCKERFILE_LINES_SCRIPT } from '../../src/operator/runtimes/kubernetes/dockerfile.ts';

const root = mkdtempSync(join(tmpdir(), 'ap-dockerfile-lines-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const DOCKERFILE = agentDockerfile({ baseImage: 'registry.example/agentplane:1', graphConfigPath: 'langgraph.json' });
let n = 0;

/** A repository whose langgraph.json has `config` merged in, cloned by the clone step; its result. */
function cloneStep(config: Record<string, unknown>, path = process.env.PATH!) {
  return cloneConfig({ graphs: { agent: './agent.ts:graph' }, ...config }, path);
}

/** A repository with exactly this langgraph.json, cloned by the clone step; its result. */
function cloneConfig(config: Record<string, unknown>, path = process.env.PATH!) {
  const dir = join(root, String(n++));
  const repo = join(dir, 'repo');
  mkdirSync(repo, { recursive: true });
  writeFileSync(join(repo, 'langgraph.json'), JSON.stringify(config));
  const git = (...args: string[]) => {
    const r = spawnSync('git', args, { cwd: repo, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(r.stderr);
  };
  git('init', '-q', '-b', 'main');
  git('add', '.');
  git('-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-q', '-m', 'init');
  const workspace = join(dir, 'workspace');
  mkdirSync(workspace);
  const r = spawnSync('sh', ['-c', CLONE_SCRIPT.replaceAll('/workspace', workspace)], {
    encoding: 'utf8',
    env: {
      PATH: path,
      HOME: dir,
      REPO_URL: repo,
      REPO_REF: 'main',
      GRAPH_CONFIG: 'langgraph.json',
      DOCKERFILE,
      DOCKERFILE_LINES_SCRIPT,
      GIT_TERMINAL_PROMPT: '0',
    },
  });
  const read = () => readFileSync(join(workspace, 'Dockerfile'), 'utf8');
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, dockerfile: r.status === 0 ? read() : '' };
}

it('adds the lines after FROM, as root, then the generated steps as node', () => {
  const lines = ['RUN apt-get update && apt-get install -y --no-install-recommends poppler-utils', 'ENV PDF=1'];
  const r = cloneStep({ dockerfile_lines: lines });
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
  expect(r.stdout).toContain('dockerfile_lines: 2 line(s) added after FROM');
  const got = r.dockerfile.split('\n');
  const from = got.indexOf('FROM registry.example/agentplane:1');
  expect(got.slice(from, from + 5)).toEqual(['FROM registry.example/agentplane:1', 'USER root', ...lines, 'USER node']);
  // Everything else is the generated file, unchanged.
  expect(got.filter((l) => l !== 'USER root' && !lines.includes(l)).join('\n')).toBe(DOCKERFILE);
});

it('writes the generated file unchanged without dockerfile_lines', () => {
  expect(cloneStep({}).dockerfile).toBe(DOCKERFILE);
  expect(cloneStep({ dockerfile_lines: [] }).dockerfile).toBe(DOCKERFILE);
});

it('fails on an entry that is not one line of text, naming it', () => {
  const broken = cloneStep({ dockerfile_lines: ['RUN true', 'RUN a\nFROM evil'] });
  expect(broken.status).toBe(1);
  expect(broken.stderr).toContain('dockerfile_lines: entry 1 holds a line break');
  const notText = cloneStep({ dockerfile_lines: ['RUN true', 42] });
  expect(notText.stderr).toContain('dockerfile_lines: entry 1 is not a string');
  expect(cloneStep({ dockerfile_lines: 'RUN true' }).stderr).toContain('dockerfile_lines: must be a list of strings');
});

it('a clone image without node refuses a config with dockerfile_lines and builds one without', () => {
  const bin = join(root, 'bin-without-node');
  mkdirSync(bin);
  for (const tool of ['git', 'sh', 'grep', 'rm', 'cat']) symlinkSync(`/usr/bin/${tool}`, join(bin, tool));
  const refused = cloneStep({ dockerfile_lines: ['RUN true'] }, bin);
  expect(refused.status).toBe(1);
  expect(refused.stderr).toContain('the clone image needs node to add them');
  const plain = cloneStep({}, bin);
  expect(plain.stderr).toBe('');
  expect(plain.dockerfile).toBe(DOCKERFILE);
});

it('refuses a Python graph in one line, with node in the clone image and without', () => {
  const python = { graphs: { js: './agent.ts:graph', agent: { path: './my_agent/agent.py:graph' } } };
  const refused = cloneConfig(python);
  expect(refused.status).toBe(1);
  expect(refused.stderr).toBe(
    'langgraph.json graph "agent" ("./my_agent/agent.py") is a Python graph: this platform serves LangGraph.js ' +
      'graphs (JavaScript or TypeScript) only\n',
  );
  expect(cloneConfig({ graphs: { agent: 'my_agent.graph:graph' } }).stderr).toContain(
    'is not a JavaScript or TypeScript module: this platform serves LangGraph.js graphs',
  );
  const bin = join(root, 'bin-without-node-py');
  mkdirSync(bin);
  for (const tool of ['git', 'sh', 'grep', 'rm', 'cat']) symlinkSync(`/usr/bin/${tool}`, join(bin, tool));
  const noNode = cloneConfig(python, bin);
  expect(noNode.status).toBe(1);
  expect(noNode.stderr).toContain('names a Python graph (.py): this platform serves LangGraph.js graphs');
  // Every JavaScript and TypeScript module kind builds.
  const js = { graphs: { a: './a.ts:g', b: './b.mjs:g', c: { path: './c.js' }, d: './src/d.tsx:g' } };
  expect(cloneConfig(js).status).toBe(0);
  expect(cloneConfig(js, bin).status).toBe(0);
});
