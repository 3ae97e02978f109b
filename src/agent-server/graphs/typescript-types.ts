// JSON schemas of graphs from their TypeScript source, for what runtime definitions cannot tell: the field types of
// Annotation state (`Annotation<"a" | "b">` is a LastValue channel at runtime, its type exists only in TypeScript)
// and of an Annotation context. One compiler program covers every TypeScript graph file of a project; only the types
// asked about are checked (no full type check), once per process, when a schema is first asked for. A graph's
// subgraphs are found where its builder adds a compiled graph as a node (`.addNode("name", child.compile())`),
// following variables to their initializers, so their namespaces (`parent|child`) match getSubgraphsAsync's.
// The compiler is the `typescript` package; without it (or on any failure) nothing is typed and the runtime schemas
// stand alone.
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type * as TS from 'typescript';
import { packagePath } from '../../lib/package-root.ts';

type JsonSchema = Record<string, unknown>;

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
/** Deep enough for real state shapes; with the budget, bounds what a recursive or huge type can cost. */
const MAX_DEPTH = 6;
const MAX_CONVERSIONS = 5_000;
const MAX_SUBGRAPH_DEPTH = 6;
/** The LangChain message classes a `BaseMessage` may be on the wire, with their `type` discriminator. */
const MESSAGE_CLASSES: Record<string, string | undefined> = {
  AIMessage: 'ai',
  BaseMessageChunk: undefined,
  ChatMessage: 'generic',
  FunctionMessage: 'function',
  HumanMessage: 'human',
  RemoveMessage: 'remove',
  SystemMessage: 'system',
  ToolMessage: 'tool',
};
const BUILDER_METHODS = new Set([
  'addNode',
  'addEdge',
  'addConditionalEdges',
  'addSequence',
  'setEntryPoint',
  'setFinishPoint',
]);

const WORKER = pathToFileURL(packagePath('src/agent-server/graphs/typescript-types-worker.mjs'));

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
    const worker = new Worker(WORKER, { workerData: { sources }, resourceLimits: { maxOldGenerationSizeMb: 256 } });
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

/** TypeScript types to JSON Schema (draft-07), message classes as `$ref`s into `definitions`. */
class Converter {
  readonly definitions: Record<string, JsonSchema> = {};
  private readonly active = new Set<TS.Type>();
  // Types recur (every message field in every union member): each is converted once.
  private readonly memo = new Map<TS.Type, JsonSchema>();
  private budget = MAX_CONVERSIONS;

  constructor(
    private readonly ts: typeof TS,
    private readonly checker: TS.TypeChecker,
    private readonly at: TS.Node,
  ) {}

  /** An object type's properties; undefined when it has none the schema could name. */
  object(type: TS.Type): JsonSchema | undefined {
    const schema = this.convert(type, 0);
    const properties = schema.properties as Record<string, unknown> | undefined;
    return properties && Object.keys(properties).length ? schema : undefined;
  }

  private convert(type: TS.Type, depth: number): JsonSchema {
    const known = this.memo.get(type);
    if (known) return known;
    if (depth > MAX_DEPTH || --this.budget < 0) return {};
    const schema = this.convertOnce(type, depth);
    if (!this.active.size) this.memo.set(type, schema);
    return schema;
  }

  private convertOnce(type: TS.Type, depth: number): JsonSchema {
    const { ts, checker } = this;
    const f = type.flags;
    if (f & (ts.TypeFlags.Any | ts.TypeFlags.Unknown)) return {};
    if (f & ts.TypeFlags.StringLiteral) return { type: 'string', enum: [(type as TS.StringLiteralType).value] };
    if (f & ts.TypeFlags.NumberLiteral) return { type: 'number', enum: [(type as TS.NumberLiteralType).value] };
    if (f & ts.TypeFlags.BooleanLiteral) return { type: 'boolean', enum: [checker.typeToString(type) === 'true'] };
    if (f & ts.TypeFlags.StringLike) return { type: 'string' };
    if (f & ts.TypeFlags.NumberLike || f & ts.TypeFlags.BigIntLike) return { type: 'number' };
    if (f & ts.TypeFlags.BooleanLike) return { type: 'boolean' };
    if (f & ts.TypeFlags.Null) return { type: 'null' };
    if (type.isUnion()) return this.union(type.types, depth);
    if (checker.isArrayType(type) || checker.isTupleType(type)) {
      const [item] = checker.getTypeArguments(type as TS.TypeReference);
      return { type: 'array', ...(item && !checker.isTupleType(type) ? { items: this.convert(item, depth + 1) } : {}) };
    }
    const message = this.messageRef(type);
    if (message) return message;
    if (type.getCallSignatures().length) return {};
    // `string & {}` (a string that still autocompletes literals) and other branded primitives: the primitive.
    const primitive =
      type.isIntersection() &&
      type.types.find((t) => t.flags & (ts.TypeFlags.StringLike | ts.TypeFlags.NumberLike | ts.TypeFlags.BooleanLike));
    if (primitive) return this.convert(primitive, depth);
    if (f & ts.TypeFlags.Object || type.isIntersection()) return this.properties(type, depth);
    return {};
  }

  private union(members: TS.Type[], depth: number): JsonSchema {
    const { ts } = this;
    const present = members.filter((t) => !(t.flags & (ts.TypeFlags.Undefined | ts.TypeFlags.Void)));
    const nullable = present.some((t) => t.flags & ts.TypeFlags.Null);
    const rest = present.filter((t) => !(t.flags & ts.TypeFlags.Null));
    let schema: JsonSchema;
    const literals = rest.map((t) => this.convert(t, depth + 1));
    const enumOf = (type: string) =>
      literals.length > 0 && literals.every((s) => s.type === type && Array.isArray(s.enum));
    if (rest.length === 0) return { type: 'null' };
    if (enumOf('boolean') && literals.length === 2) schema = { type: 'boolean' };
    else if (enumOf('string') || enumOf('number')) {
      // Sorted: TypeScript orders a union's members by when it first met each type, which no reader should see.
      const values = literals.flatMap((s) => s.enum as Array<string | number>);
      schema = { type: literals[0]!.type, enum: values.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)) };
    } else if (literals.length === 1) schema = literals[0]!;
    else schema = { anyOf: literals };
    if (!nullable) return schema;
    if (typeof schema.type === 'string' && !schema.enum) return { ...schema, type: [schema.type, 'null'] };
    return { anyOf: [schema, { type: 'null' }] };
  }

  private properties(type: TS.Type, depth: number): JsonSchema {
    const { ts, checker, at } = this;
    if (this.active.has(type)) return {};
    this.active.add(type);
    try {
      const properties: Record<string, JsonSchema> = {};
      const required: string[] = [];
      for (const prop of checker.getPropertiesOfType(type)) {
        const name = prop.getName();
        if (name.startsWith('__@') || name.startsWith('#')) continue;
        const propType = checker.getTypeOfSymbolAtLocation(prop, at);
        if (propType.getCallSignatures().length) continue;
        properties[name] = this.convert(propType, depth + 1);
        if (!(prop.flags & ts.SymbolFlags.Optional)) required.push(name);
      }
      const index = checker.getIndexInfoOfType(type, ts.IndexKind.String);
      return {
        type: 'object',
        properties,
        ...(required.length ? { required } : {}),
        ...(index ? { additionalProperties: this.convert(index.type, depth + 1) } : {}),
      };
    } finally {
      this.active.delete(type);
    }
  }

  /** A LangChain message class (BaseMessage or one of its kinds) as a `$ref`, defining it on first use. */
  private messageRef(type: TS.Type): JsonSchema | undefined {
    const symbol = type.getSymbol() ?? type.aliasSymbol;
    const name = symbol?.getName();
    if (!symbol || !name || !(name === 'BaseMessage' || name in MESSAGE_CLASSES)) return undefined;
    const fromLangChain = symbol.declarations?.some((d) => d.getSourceFile().fileName.includes('@langchain/core'));
    if (!fromLangChain) return undefined;
    if (!this.definitions.BaseMessage) {
      const base = name === 'BaseMessage' ? symbol : undefined;
      this.definitions.BaseMessage = {
        ...(base ? this.describe(base) : {}),
        oneOf: Object.keys(MESSAGE_CLASSES).map((k) => ({ $ref: `#/definitions/${k}` })),
      };
      for (const [kind, discriminator] of Object.entries(MESSAGE_CLASSES)) {
        this.definitions[kind] = messageShape(discriminator);
      }
    } else if (name === 'BaseMessage' && !this.definitions.BaseMessage.description) {
      Object.assign(this.definitions.BaseMessage, this.describe(symbol));
    }
    return { $ref: `#/definitions/${name}` };
  }

  private describe(symbol: TS.Symbol): { description?: string } {
    const text = this.ts.displayPartsToString(symbol.getDocumentationComment(this.checker)).trim();
    return text ? { description: text } : {};
  }
}

/** A message as the API carries it (the fields every kind has; `type` names the kind). */
function messageShape(type: string | undefined): JsonSchema {
  return {
    type: 'object',
    properties: {
      ...(type ? { type: { type: 'string', const: type } } : { type: { type: 'string' } }),
      content: { anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'object' } }] },
      id: { type: 'string' },
      name: { type: 'string' },
      additional_kwargs: { type: 'object' },
      response_metadata: { type: 'object' },
    },
    required: ['content'],
  };
}
