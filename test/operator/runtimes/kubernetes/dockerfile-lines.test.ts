// langgraph.json "dockerfile_lines" in a Kubernetes build: the clone step's real script (its /workspace moved to a
// temporary folder) against a real git repository adds them after FROM, as root, before the generated file's own
// USER node; bad entries fail the step naming the entry; a clone image without node refuses a config that has them.
// The same step runs the graph load check: a graph that does not parse or imports a missing file fails the build with
// one line (file:line:column), written to the container's termination message.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { CLONE_SCRIPT, IMAGE_GRAPH_CHECK } from '../../../../src/operator/runtimes/kubernetes/build-scripts.ts';
import { packagePath } from '../../../../src/lib/package-root.ts';
import { agentDockerfile, DOCKERFILE_LINES_SCRIPT } from '../../../../src/operator/runtimes/kubernetes/dockerfile.ts';

const root = mkdtempSync(join(tmpdir(), 'ap-dockerfile-lines-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const DOCKERFILE = agentDockerfile({ baseImage: 'registry.example/agentplane:1', graphConfigPath: 'langgraph.json' });
let n = 0;

/** A repository whose langgraph.json has `config` merged in, cloned by the clone step; its result. */
function cloneStep(
  config: Record<string, unknown>,
  path = process.env.PATH!,
  files?: Record<string, string>,
  links?: Record<string, string>,
) {
  return cloneConfig({ graphs: { agent: './agent.ts:graph' }, ...config }, path, files, links);
}

const GOOD_GRAPH = { 'agent.ts': 'export const graph = { invoke: async () => ({}) };\n' };

/** A repository with exactly this langgraph.json (and these files), cloned by the clone step; its result. */
function cloneConfig(
  config: Record<string, unknown>,
  path = process.env.PATH!,
  files: Record<string, string> = GOOD_GRAPH,
  links: Record<string, string> = {},
) {
  const dir = join(root, String(n++));
  const repo = join(dir, 'repo');
  mkdirSync(repo, { recursive: true });
  writeFileSync(join(repo, 'langgraph.json'), JSON.stringify(config));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(dirname(join(repo, name)), { recursive: true });
    writeFileSync(join(repo, name), text);
  }
  for (const [name, target] of Object.entries(links)) {
    rmSync(join(repo, name), { force: true });
    mkdirSync(dirname(join(repo, name)), { recursive: true });
    symlinkSync(target, join(repo, name));
  }
  const git = (...args: string[]) => {
    const r = spawnSync('git', args, { cwd: repo, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(r.stderr);
  };
  git('init', '-q', '-b', 'main');
  git('add', '.');
  git('-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-q', '-m', 'init');
  const workspace = join(dir, 'workspace');
  mkdirSync(workspace);
  const terminationLog = join(dir, 'termination-log');
  writeFileSync(terminationLog, '');
  const script = CLONE_SCRIPT.replaceAll('/workspace', workspace).replaceAll('/dev/termination-log', terminationLog);
  const r = spawnSync('sh', ['-c', script], {
    encoding: 'utf8',
    env: {
      PATH: path,
      TMPDIR: dir,
      // This checkout's copy of what the image keeps at IMAGE_GRAPH_CHECK.
      GRAPH_CHECK_SCRIPT: packagePath('src/operator/runtimes/local/graph-check.mjs'),
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
  return {
    status: r.status,
    stdout: r.stdout,
    stderr: r.stderr,
    dockerfile: r.status === 0 ? read() : '',
    terminationMessage: readFileSync(terminationLog, 'utf8'),
  };
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
  for (const tool of ['git', 'sh', 'grep', 'rm', 'cat', 'readlink']) symlinkSync(`/usr/bin/${tool}`, join(bin, tool));
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
  for (const tool of ['git', 'sh', 'grep', 'rm', 'cat', 'readlink']) symlinkSync(`/usr/bin/${tool}`, join(bin, tool));
  const noNode = cloneConfig(python, bin);
  expect(noNode.status).toBe(1);
  expect(noNode.stderr).toContain('names a Python graph (.py): this platform serves LangGraph.js graphs');
  // Every JavaScript and TypeScript module kind builds.
  const js = { graphs: { a: './a.ts:g', b: './b.mjs:g', c: { path: './c.js' }, d: './src/d.tsx:g' } };
  const modules = Object.fromEntries(['a.ts', 'b.mjs', 'c.js', 'src/d.tsx'].map((f) => [f, 'export const g = 1;\n']));
  expect(cloneConfig(js, undefined, modules).status).toBe(0);
  expect(cloneConfig(js, bin, modules).status).toBe(0);
});

it('checks that the graphs load: a syntax error fails the clone step with file:line:column, once', () => {
  const ok = cloneStep({});
  expect(ok.status).toBe(0);
  expect(ok.stdout).toContain('graphs checked');

  const broken = cloneStep({}, process.env.PATH!, {
    'agent.ts': "import { helper } from './helper.ts';\nexport const graph = helper;\n",
    'helper.ts': 'export const helper = (;\n',
  });
  expect(broken.status).toBe(1);
  expect(broken.terminationMessage).toMatch(/^graph "agent": helper\.ts:1:\d+: .+$/);
  expect(broken.terminationMessage.split('\n')).toHaveLength(1);
  expect(broken.dockerfile).toBe('');
});

it('names an import of a file the repository does not have, and how many more problems there are', () => {
  const r = cloneStep({ graphs: { agent: './agent.ts:graph', other: './other.ts:graph' } }, process.env.PATH!, {
    'agent.ts': "import { x } from './missing.ts';\nexport const graph = x;\n",
    'other.ts': 'export const graph = ;\n',
  });
  expect(r.status).toBe(1);
  expect(r.terminationMessage).toBe(
    'graph "agent": agent.ts:1:19: cannot find module "./missing.ts" (and 1 more in the build log)',
  );
  expect(r.stderr).toContain('graph "other": other.ts:1:');
});

it('leaves the termination message empty when it succeeds; the image keeps the check where the script looks', () => {
  expect(cloneStep({}).terminationMessage).toBe('');
  expect(IMAGE_GRAPH_CHECK).toBe('/app/src/operator/runtimes/local/graph-check.mjs');
  expect(readFileSync(packagePath('Dockerfile'), 'utf8')).toMatch(/^WORKDIR \/app$[\s\S]*^COPY src \.\/src$/m);
});

it('reads nothing outside the checkout: symlinks to the mounted credentials fail the step without a byte of them', () => {
  // What a repository could point at in the clone container: the git credentials mounted beside the checkout.
  const creds = join(root, 'mounted-credentials');
  mkdirSync(creds, { recursive: true });
  const SECRET = 'ghp_TOPSECRETvalue0123456789';
  writeFileSync(join(creds, 'password'), `${SECRET}\n`);
  writeFileSync(join(creds, 'token.json'), `{"token": ${SECRET}}\n`);
  writeFileSync(join(creds, 'key.ts'), `export const key = ${SECRET} ${SECRET};\n`);
  const tries = [
    // langgraph.json itself (invalid JSON: its parse error would quote the start of the file)
    cloneConfig({}, undefined, GOOD_GRAPH, { 'langgraph.json': join(creds, 'password') }),
    // the graph's module
    cloneStep({}, undefined, {}, { 'agent.ts': join(creds, 'key.ts') }),
    // a file the graph imports, directly or through a folder link
    cloneStep(
      {},
      undefined,
      { 'agent.ts': "import t from './t.json';\nexport const graph = t;\n" },
      {
        't.json': join(creds, 'token.json'),
      },
    ),
    cloneStep(
      {},
      undefined,
      { 'agent.ts': "import { key } from './lib/key.ts';\nexport const graph = key;\n" },
      {
        lib: creds,
      },
    ),
  ];
  for (const r of tries) {
    expect(r.status).toBe(1);
    expect(r.terminationMessage).toMatch(/resolves outside the repository/);
    expect(r.terminationMessage.split('\n')).toHaveLength(1);
    for (const out of [r.stdout, r.stderr, r.terminationMessage]) {
      expect(out).not.toContain('TOPSECRET');
      expect(out).not.toContain(creds);
    }
  }
  expect(tries[0]!.terminationMessage).toBe(
    'graph config "langgraph.json" resolves outside the repository (a symlink?)',
  );
  expect(tries[1]!.terminationMessage).toMatch(/^graph "agent": agent\.ts resolves outside the repository/);
  expect(tries[2]!.terminationMessage).toMatch(/^graph "agent": agent\.ts:1:\d+: "\.\/t\.json" resolves outside/);
  expect(tries[3]!.terminationMessage).toMatch(/^graph "agent": agent\.ts:1:\d+: "\.\/lib\/key\.ts" resolves/);
  // A link that stays inside the repository is fine.
  const inside = cloneStep({}, undefined, { 'src/agent.ts': GOOD_GRAPH['agent.ts']! }, { 'agent.ts': 'src/agent.ts' });
  expect(inside.stderr).toBe('');
  expect(inside.status).toBe(0);
});
