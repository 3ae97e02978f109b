// JSON schemas of graphs from their TypeScript source, for what runtime definitions cannot tell: the field types of
// Annotation state (`Annotation<"a" | "b">` is a LastValue channel at runtime, its type exists only in TypeScript)
// and of an Annotation context. One compiler program covers every TypeScript graph file of a project; only the types
// asked about are checked (no full type check), once per process, when a schema is first asked for. A graph's
// subgraphs are found where its builder adds a compiled graph as a node (`.addNode("name", child.compile())`),
// following variables to their initializers, so their namespaces (`parent|child`) match getSubgraphsAsync's.
// The compiler is the `typescript` package; without it (or on any failure) nothing is typed and the runtime schemas
// stand alone.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type * as TS from 'typescript';
import { packagePath } from '../../lib/package-root.ts';
import { bundleDir } from '../../lib/typescript-imports.ts';
import { Converter, type JsonSchema } from './typescript-json-schema.ts';

/** The schemas the source types give one graph or subgraph; `definitions` holds what their `$ref`s point to. */
export interface TypedSchemas {
  state?: JsonSchema;
  input?: JsonSchema;
  output?: JsonSchema;
  context?: JsonSchema;
  definitions: Record<string, JsonSchema>;
}

/** By graph id, then by subgraph namespace ('' for the graph itself). */
export type ProjectTypes = Map<string, Map<string, TypedSchemas>>;

export interface GraphSource {
  graphId: string;
  path: string;
  exportName: string;
}

const TS_FILE = /\.(?:[cm]?ts|tsx)$/;
const MAX_SUBGRAPH_DEPTH = 6;
const BUILDER_METHODS = new Set([
  'addNode',
  'addEdge',
  'addConditionalEdges',
  'addSequence',
  'setEntryPoint',
  'setFinishPoint',
]);

/** The bundle's entry when the process runs from it (no tsx needed: the thread reads users' files, never imports them). */
function workerEntry(): URL {
  const bundle = bundleDir();
  return pathToFileURL(
    bundle
      ? join(bundle, 'typescript-types-worker.js')
      : packagePath('src/agent-server/graphs/typescript-types-worker.mjs'),
  );
}

/**
 * typeScriptSchemas in a thread of its own (the compiler pass takes seconds of synchronous work). Never rejects: a
 * failure is reported through `onError` and answers no types.
 */
export function typeScriptSchemasInThread(
  sources: GraphSource[],
  onError: (err: unknown) => void,
): Promise<ProjectTypes> {
  if (!sources.some((s) => TS_FILE.test(s.path))) return Promise.resolve(new Map());
  return new Promise((resolve) => {
    let settled = false;
    const done = (types: ProjectTypes, err?: unknown) => {
      if (settled) return;
      settled = true;
      if (err !== undefined) onError(err);
      resolve(types);
      void worker.terminate();
    };
    // Its heap is capped: a project whose types would take more answers untyped schemas (the runtime's defaults)
    // rather than pushing a memory-limited agent over its limit for a schema read.
    const worker = new Worker(workerEntry(), {
      workerData: { sources },
      resourceLimits: { maxOldGenerationSizeMb: 256 },
    });
    // A server shutting down does not wait for it.
    worker.unref();
    worker.on('message', (entries: Array<[string, Array<[string, TypedSchemas]>]>) =>
      done(new Map(entries.map(([id, byNs]) => [id, new Map(byNs)]))),
    );
    worker.on('error', (err) => done(new Map(), err));
    worker.on('exit', (code) => done(new Map(), new Error(`the TypeScript types thread exited (code ${code})`)));
  });
}

export async function typeScriptSchemas(sources: GraphSource[]): Promise<ProjectTypes> {
  const out: ProjectTypes = new Map();
  const typed = sources.filter((s) => TS_FILE.test(s.path));
  if (typed.length === 0) return out;
  let ts: typeof TS;
  try {
    const mod = (await import('typescript')) as unknown as { default?: typeof TS };
    ts = mod.default ?? (mod as unknown as typeof TS);
  } catch {
    return out;
  }
  const program = ts.createProgram({
    rootNames: [...new Set(typed.map((s) => s.path))],
    options: {
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      strict: true,
      skipLibCheck: true,
      noEmit: true,
      jsx: ts.JsxEmit.Preserve,
      // No DOM and no @types packages: state types rarely need them, and reading them is most of the cost.
      lib: ['lib.es2022.d.ts'],
      types: [],
    },
  });
  const checker = program.getTypeChecker();
  for (const source of typed) {
    const file = program.getSourceFile(source.path);
    const exported = file && exportedExpression(ts, checker, file, source.exportName);
    if (!exported) continue;
    const byNamespace = new Map<string, TypedSchemas>();
    collect(ts, checker, exported, '', byNamespace, 0);
    if (byNamespace.size) out.set(source.graphId, byNamespace);
  }
  return out;
}

/** The expression an export is initialized with (`export const graph = ...`, or `export { x as graph }`). */
function exportedExpression(
  ts: typeof TS,
  checker: TS.TypeChecker,
  file: TS.SourceFile,
  name: string,
): TS.Expression | undefined {
  const moduleSymbol = checker.getSymbolAtLocation(file);
  const symbol = moduleSymbol && checker.getExportsOfModule(moduleSymbol).find((s) => s.escapedName === name);
  return symbol && initializerOf(ts, checker, symbol);
}

function initializerOf(ts: typeof TS, checker: TS.TypeChecker, symbol: TS.Symbol): TS.Expression | undefined {
  const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
  const decl = target.valueDeclaration;
  if (decl && ts.isVariableDeclaration(decl)) return decl.initializer;
  return undefined;
}

function collect(
  ts: typeof TS,
  checker: TS.TypeChecker,
  expr: TS.Expression,
  ns: string,
  into: Map<string, TypedSchemas>,
  depth: number,
): void {
  const graphType = compiledGraphType(ts, checker, checker.getTypeAtLocation(expr));
  if (graphType) into.set(ns, schemasOf(ts, checker, graphType, expr));
  if (depth >= MAX_SUBGRAPH_DEPTH) return;
  for (const [name, child] of subgraphNodes(ts, checker, expr, 0)) {
    collect(ts, checker, child, ns ? `${ns}|${name}` : name, into, depth + 1);
  }
}

/** The compiled graph a value is, or resolves to (a promise of one, or a factory returning one or its promise). */
function compiledGraphType(ts: typeof TS, checker: TS.TypeChecker, type: TS.Type): TS.Type | undefined {
  for (let i = 0; i < 3; i++) {
    const awaited = checker.getAwaitedType(type) ?? type;
    if (awaited.getProperty('invoke') && awaited.getProperty('getState')) return awaited;
    const call = awaited.getCallSignatures()[0];
    if (!call) return undefined;
    type = call.getReturnType();
  }
  return undefined;
}

function schemasOf(ts: typeof TS, checker: TS.TypeChecker, graph: TS.Type, at: TS.Node): TypedSchemas {
  const convert = new Converter(ts, checker, at);
  const result: TypedSchemas = { definitions: convert.definitions };
  const args = checker.getTypeArguments(graph as TS.TypeReference);
  // CompiledStateGraph<S, U, N, I, O, C, ...>: S is the state's value type.
  if (args[0]) result.state = convert.object(args[0]);
  const invoke = graph.getProperty('invoke');
  const signature = invoke && checker.getTypeOfSymbolAtLocation(invoke, at).getCallSignatures()[0];
  if (signature) {
    const [input, options] = signature.getParameters().map((p) => checker.getTypeOfSymbolAtLocation(p, at));
    // invoke(input: InputType | Command | null, options?: {context?: ContextType, ...}): Promise<OutputType>
    const inputs = input?.isUnion() ? input.types : input ? [input] : [];
    const plain = inputs.find((t) => !(t.flags & ts.TypeFlags.Null) && !t.getProperty('lg_name'));
    if (plain) result.input = convert.object(plain);
    const output = checker.getAwaitedType(signature.getReturnType());
    if (output) result.output = convert.object(output);
    const contextSymbol = options && checker.getNonNullableType(options).getProperty('context');
    if (contextSymbol) {
      const context = checker.getNonNullableType(checker.getTypeOfSymbolAtLocation(contextSymbol, at));
      result.context = convert.object(context);
    }
  }
  return result;
}

/**
 * `.addNode("name", <compiled graph>)` calls of the builder behind a compiled graph expression: the call chain of
 * `builder.compile()`, and statements calling addNode on the builder's variable.
 */
function subgraphNodes(
  ts: typeof TS,
  checker: TS.TypeChecker,
  expr: TS.Expression,
  hops: number,
): Array<[string, TS.Expression]> {
  if (hops > 8) return [];
  expr = unwrap(ts, expr);
  if (ts.isIdentifier(expr)) {
    const symbol = checker.getSymbolAtLocation(expr);
    const init = symbol && initializerOf(ts, checker, symbol);
    return init ? subgraphNodes(ts, checker, init, hops + 1) : [];
  }
  if (!ts.isCallExpression(expr)) return [];
  const callee = unwrap(ts, expr.expression);
  // (async () => builder.compile())() and the like.
  if (ts.isArrowFunction(callee) || ts.isFunctionExpression(callee)) {
    const returned = returnedExpression(ts, callee);
    return returned ? subgraphNodes(ts, checker, returned, hops + 1) : [];
  }
  if (ts.isPropertyAccessExpression(callee) && callee.name.text === 'compile') {
    return builderNodes(ts, checker, callee.expression, hops + 1);
  }
  return [];
}

function builderNodes(
  ts: typeof TS,
  checker: TS.TypeChecker,
  builder: TS.Expression,
  hops: number,
): Array<[string, TS.Expression]> {
  const found: Array<[string, TS.Expression]> = [];
  let expr = unwrap(ts, builder);
  while (ts.isCallExpression(expr) && ts.isPropertyAccessExpression(expr.expression)) {
    const method = expr.expression.name.text;
    if (!BUILDER_METHODS.has(method)) break;
    if (method === 'addNode') addNodeArgs(ts, checker, expr, found);
    expr = unwrap(ts, expr.expression.expression);
  }
  if (ts.isIdentifier(expr) && hops <= 8) {
    const symbol = checker.getSymbolAtLocation(expr);
    const init = symbol && initializerOf(ts, checker, symbol);
    if (init) found.push(...builderNodes(ts, checker, init, hops + 1));
    // builder.addNode(...) as statements of their own.
    const decl = symbol?.valueDeclaration;
    if (symbol && decl) {
      const visit = (node: TS.Node): void => {
        if (
          ts.isCallExpression(node) &&
          ts.isPropertyAccessExpression(node.expression) &&
          node.expression.name.text === 'addNode' &&
          ts.isIdentifier(node.expression.expression) &&
          checker.getSymbolAtLocation(node.expression.expression) === symbol
        ) {
          addNodeArgs(ts, checker, node, found);
        }
        ts.forEachChild(node, visit);
      };
      visit(decl.getSourceFile());
    }
  }
  // Added last in the chain, seen first: put back in the order the nodes were added.
  return found.reverse().filter(([name], i, all) => all.findIndex(([n]) => n === name) === i);
}

function addNodeArgs(
  ts: typeof TS,
  checker: TS.TypeChecker,
  call: TS.CallExpression,
  found: Array<[string, TS.Expression]>,
): void {
  const [name, node] = call.arguments;
  if (!name || !node || !ts.isStringLiteralLike(name)) return;
  if (compiledGraphType(ts, checker, checker.getTypeAtLocation(node))) found.push([name.text, node]);
}

function unwrap(ts: typeof TS, expr: TS.Expression): TS.Expression {
  for (;;) {
    if (ts.isParenthesizedExpression(expr) || ts.isAsExpression(expr) || ts.isNonNullExpression(expr)) {
      expr = expr.expression;
    } else if (ts.isAwaitExpression(expr) || ts.isSatisfiesExpression(expr)) {
      expr = expr.expression;
    } else return expr;
  }
}

function returnedExpression(ts: typeof TS, fn: TS.ArrowFunction | TS.FunctionExpression): TS.Expression | undefined {
  if (!ts.isBlock(fn.body)) return fn.body;
  let returned: TS.Expression | undefined;
  const visit = (node: TS.Node): void => {
    if (returned) return;
    if (ts.isReturnStatement(node) && node.expression) returned = node.expression;
    else if (!ts.isFunctionLike(node)) ts.forEachChild(node, visit);
  };
  ts.forEachChild(fn.body, visit);
  return returned;
}
