// TypeScript types to JSON Schema (draft-07), for the schemas typescript-types.ts reads from a graph's source: what a
// state field, an input or a context is, as far as a client needs to know (objects, unions, literals, arrays,
// records), LangChain message classes as `$ref`s into one `definitions` object. Bounded in depth and work, so a
// recursive or huge type costs little and yields an open schema where it stops.
import type * as TS from 'typescript';

export type JsonSchema = Record<string, unknown>;

/** Deep enough for real state shapes; with the budget, bounds what a recursive or huge type can cost. */
const MAX_DEPTH = 6;
const MAX_CONVERSIONS = 5_000;
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

/** TypeScript types to JSON Schema (draft-07), message classes as `$ref`s into `definitions`. */
export class Converter {
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
