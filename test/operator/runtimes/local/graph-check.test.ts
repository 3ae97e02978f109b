// The build's graph check as the build runs it (`node graph-check.mjs <langgraph.json> <root> <report>`), on
// repositories a user might push: a misspelled export or graph file is named with what was probably meant, in the
// repository's own terms; what the check cannot know without running the code (CommonJS, `export *` from a
// package) passes, so a working graph is never refused.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { packagePath } from '../../../../src/lib/package-root.ts';

const SCRIPT = packagePath('src/operator/runtimes/local/graph-check.mjs');
const tmp = mkdtempSync(join(tmpdir(), 'ap-graph-check-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

let n = 0;
/** The report's lines for a repository made of `files`, with `graphs` as langgraph.json's graphs. */
function check(graphs: Record<string, string>, files: Record<string, string>): string[] {
  const root = join(tmp, `repo-${++n}`);
  for (const [path, text] of Object.entries({ ...files, 'langgraph.json': JSON.stringify({ graphs }) })) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  const report = join(tmp, `report-${n}`);
  execFileSync(process.execPath, [SCRIPT, join(root, 'langgraph.json'), root, report], { cwd: root });
  return readFileSync(report, 'utf8').split('\n').filter(Boolean);
}

const AGENT = 'export const graph = { name: "agent" };\nexport function makeGraph() { return graph; }\n';

describe('graph check: the names in langgraph.json graphs', () => {
  it('passes graphs whose module exports what they name, directly or re-exported from the repository', () => {
    expect(
      check(
        { a: './src/agent.ts:graph', b: './src/agent.ts:makeGraph', c: './src/index.ts:graph' },
        { 'src/agent.ts': AGENT, 'src/index.ts': "export { graph } from './agent.ts';\n" },
      ),
    ).toEqual([]);
  });

  it('names a misspelled export and the one meant, at build time rather than at deploy', () => {
    expect(check({ agent: './src/agent.ts:grpah' }, { 'src/agent.ts': AGENT })).toEqual([
      'graph "agent": src/agent.ts: no export named "grpah" (did you mean "graph"?)',
    ]);
  });

  it('lists what the module exports when no name is near', () => {
    expect(check({ agent: './src/agent.ts:workflow' }, { 'src/agent.ts': AGENT })).toEqual([
      'graph "agent": src/agent.ts: no export named "workflow"; it exports graph, makeGraph',
    ]);
  });

  it('names a misspelled graph file, or the same file with another extension', () => {
    expect(check({ agent: './src/agnet.ts:graph' }, { 'src/agent.ts': AGENT })).toEqual([
      'graph "agent": src/agnet.ts: file not found (did you mean "src/agent.ts"?)',
    ]);
    expect(check({ agent: './src/agent.js:graph' }, { 'src/agent.ts': AGENT })).toEqual([
      'graph "agent": src/agent.js: file not found (did you mean "src/agent.ts"?)',
    ]);
  });

  it('lets pass what only running the module could tell: CommonJS exports, export * from a package', () => {
    expect(
      check(
        { cjs: './graph.cjs:graph', star: './star.ts:graph' },
        {
          'graph.cjs': 'module.exports.graph = {};\n',
          'star.ts': "export * from 'some-package';\n",
        },
      ),
    ).toEqual([]);
  });
});
