// Which langgraph.json graphs a build accepts: JavaScript and TypeScript modules; anything else (a Python graph
// first of all) is refused in one line naming the graph.
import { describe, expect, it } from 'vitest';
import { graphLanguageProblem } from '../../src/lib/graph-language.ts';

describe('graphLanguageProblem', () => {
  it.each([
    ['./src/agent.ts:graph', null],
    ['./src/agent.mts:graph', null],
    ['./dist/agent.js', null],
    ['./a.cjs:g', null],
    ['./ui/agent.tsx:graph', null],
    [{ path: './src/agent.mjs:graph', description: 'x' }, null],
    ['./my_agent/agent.py:graph', /"\.\/my_agent\/agent\.py"\) is a Python graph: this platform serves LangGraph\.js/],
    [{ path: './agent.py' }, /is a Python graph/],
    ['my_agent.graph:graph', /"my_agent\.graph"\) is not a JavaScript or TypeScript module: this platform serves/],
    ['./agent:graph', /is not a JavaScript or TypeScript module/],
    ['./agent.TS:graph', /is not a JavaScript or TypeScript module/],
  ])('%j', (entry, expected) => {
    const problem = graphLanguageProblem({ graphs: { ok: './ok.ts:graph', agent: entry } });
    if (expected === null) expect(problem).toBeNull();
    else {
      expect(problem).toMatch(expected);
      expect(problem).toMatch(/^langgraph\.json graph "agent" /);
      expect(problem).not.toContain('\n');
    }
  });

  it('leaves malformed files to the agent server, which names their problem', () => {
    for (const json of [null, {}, { graphs: 'x' }, { graphs: { a: 42 } }, { graphs: { a: { path: 1 } } }])
      expect(graphLanguageProblem(json)).toBeNull();
  });
});
