// A real git repository made from examples/agent, with refs that answer differently or are broken.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const EXAMPLE = resolve(import.meta.dirname, '../../../examples/agent');

export type ExampleRepo = {
  path: string;
  /** main: greets "Hello"; branch v2: "Howdy"; tag v1 = main; branch broken-server: graph module throws on load;
   * branch broken-install: npm ci fails. */
  sha(ref: string): string;
};

/** git in `cwd` as a fixed author, its output trimmed. */
export function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, {
    cwd,
    encoding: 'utf8',
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: 't',
      GIT_AUTHOR_EMAIL: 't@example.com',
      GIT_COMMITTER_NAME: 't',
      GIT_COMMITTER_EMAIL: 't@example.com',
    },
  }).trim();
}

function setGreeting(dir: string, greeting: string): void {
  const file = join(dir, 'langgraph.json');
  const config = JSON.parse(readFileSync(file, 'utf8')) as { env: Record<string, string> };
  config.env = { ...config.env, AGENT_GREETING: greeting };
  writeFileSync(file, JSON.stringify(config, null, 2));
}

export function makeExampleRepo(root: string): ExampleRepo {
  const path = join(root, 'agent-repo');
  mkdirSync(path, { recursive: true });
  cpSync(EXAMPLE, path, {
    recursive: true,
    filter: (src) => !/[/\\](node_modules|\.langgraph_api)([/\\]|$)/.test(src),
  });
  git(path, 'init', '--quiet', '-b', 'main');
  setGreeting(path, 'Hello');
  git(path, 'add', '-A');
  git(path, 'commit', '--quiet', '-m', 'agent greeting Hello');
  git(path, 'tag', 'v1');

  git(path, 'checkout', '--quiet', '-b', 'v2');
  setGreeting(path, 'Howdy');
  git(path, 'commit', '--quiet', '-am', 'agent greeting Howdy');

  git(path, 'checkout', '--quiet', '-b', 'broken-server', 'main');
  const cfg = join(path, 'langgraph.json');
  // It parses, its imports resolve and it names its export (the build's graph check passes); it throws when the
  // server loads it.
  writeFileSync(
    join(path, 'src', 'missing.ts'),
    "throw new Error('the graph module is missing its model');\nexport const graph = {};\n",
  );
  writeFileSync(cfg, readFileSync(cfg, 'utf8').replace('./src/agent.ts:graph', './src/missing.ts:graph'));
  git(path, 'add', '-A');
  git(path, 'commit', '--quiet', '-m', 'point at a graph module that throws when loaded');

  git(path, 'checkout', '--quiet', '-b', 'broken-install', 'main');
  const pkg = JSON.parse(readFileSync(join(path, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
  // package.json and the lock file disagree: npm ci refuses, without touching the network.
  pkg.dependencies['agentplane-not-in-lock'] = 'file:./nope';
  writeFileSync(join(path, 'package.json'), JSON.stringify(pkg, null, 2));
  git(path, 'commit', '--quiet', '-am', 'add a dependency without updating the lock file');

  git(path, 'checkout', '--quiet', 'main');
  return { path, sha: (ref) => git(path, 'rev-parse', `${ref}^{commit}`) };
}
