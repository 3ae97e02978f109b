// Which graphs of a langgraph.json this platform can serve: LangGraph.js modules (JavaScript or TypeScript). A
// Python graph ("./agent.py:graph", or a module path such as "my_agent.graph:graph") is refused where a build
// reads langgraph.json, with one line saying why, instead of building and then failing at deploy; the agent server
// refuses the same entries when it loads them.

/** The module files the agent server imports a graph from. */
export const GRAPH_MODULE_EXTENSIONS = ['.ts', '.mts', '.cts', '.js', '.mjs', '.cjs', '.tsx', '.jsx'] as const;

export const JS_ONLY_MESSAGE = 'this platform serves LangGraph.js graphs (JavaScript or TypeScript) only';

/** The file part of a graph entry ("./src/agent.ts:graph" -> "./src/agent.ts"); undefined for a malformed entry. */
function entryFile(entry: unknown): string | undefined {
  const spec =
    typeof entry === 'string'
      ? entry
      : entry && typeof entry === 'object' && typeof (entry as { path?: unknown }).path === 'string'
        ? (entry as { path: string }).path
        : undefined;
  if (spec === undefined) return undefined;
  const colon = spec.lastIndexOf(':');
  return colon >= 0 ? spec.slice(0, colon) : spec;
}

/**
 * The one-line refusal for the first graph that is not JavaScript or TypeScript, or null when every graph is (or
 * the file is too malformed to tell: the agent server names that problem itself).
 */
export function graphLanguageProblem(langgraphJson: unknown): string | null {
  const graphs = (langgraphJson as { graphs?: unknown } | null)?.graphs;
  if (!graphs || typeof graphs !== 'object') return null;
  for (const [graphId, entry] of Object.entries(graphs)) {
    const file = entryFile(entry);
    if (!file) continue;
    const base = file.slice(file.lastIndexOf('/') + 1);
    const dot = base.lastIndexOf('.');
    const ext = dot > 0 ? base.slice(dot) : '';
    if ((GRAPH_MODULE_EXTENSIONS as readonly string[]).includes(ext)) continue;
    const what = ext === '.py' ? 'is a Python graph' : 'is not a JavaScript or TypeScript module';
    return `langgraph.json graph "${graphId}" ("${file}") ${what}: ${JS_ONLY_MESSAGE}`;
  }
  return null;
}
