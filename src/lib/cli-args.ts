import { parseArgs, type ParseArgsConfig } from 'node:util';
import { z } from 'zod';
import { closest } from './near-names.ts';

type OptionBase = {
  type: 'string' | 'boolean';
  short?: string;
  /** One line for --help. */
  description: string;
  /** Shown in --help, e.g. "PORT" or "8000". */
  default?: string;
  env?: readonly string[];
};

/** An option that fills the command's configuration: where its value goes and what checks it, declared together. */
export type ConfigOption = OptionBase & {
  /**
   * Where the value goes in the command's configuration, a dotted camelCase path (`runtime.ingress.className`):
   * optionValues() puts it there and a validation error at or under that path names this flag.
   */
  path: string;
  /**
   * What the value (after `read`) must be, and what it becomes: the command's configuration schema and its type are
   * made of these (configSchema), so a flag's type is declared here only.
   */
  schema: z.ZodType;
  /**
   * Turns the text given (undefined: not given) into what `schema` checks; default: the text. `flag` names the option
   * for a message, with its environment variable when the text came from there.
   */
  read?: (text: string | undefined, flag: string) => unknown;
};

/** An option the command reads itself (a switch, or settings checked together by their own function). */
export type PlainOption = OptionBase & { path?: undefined; schema?: undefined; read?: undefined };

export type OptionSpec = ConfigOption | PlainOption;

export type CommandSpec<O extends Record<string, OptionSpec> = Record<string, OptionSpec>> = {
  name: string;
  summary: string;
  usage: string;
  options: O;
  /** Configuration read from an environment variable only, never a flag: config path -> variable. */
  envOnly?: Record<string, string>;
};

/**
 * A command's spec with the exact type of its options (their paths and schemas), which configSchema() turns into the
 * configuration's schema and type.
 */
export function defineCommand<const O extends Record<string, OptionSpec>>(spec: CommandSpec<O>): CommandSpec<O> {
  return spec;
}

/** A set of options shared by several commands or kept in a file of its own, with their exact type. */
export function defineOptions<const O extends Record<string, OptionSpec>>(options: O): O {
  return options;
}

/** Reads one option's value; `envVarOf` tells which environment variable it came from, if it came from one. */
export type OptionPicker = ((name: string) => string | undefined) & { envVarOf(name: string): string | undefined };

export class UsageError extends Error {}

/** Parses argv for one subcommand; unknown flags are usage errors, not silently ignored. */
export function parseCommandArgs(spec: CommandSpec, argv: string[]): Record<string, string | boolean | undefined> {
  const options: ParseArgsConfig['options'] = { help: { type: 'boolean', short: 'h' } };
  for (const [name, o] of Object.entries(spec.options)) {
    options[name] = o.short ? { type: o.type, short: o.short } : { type: o.type };
  }
  try {
    const { values } = parseArgs({ args: argv, options, strict: true, allowPositionals: false });
    return values as Record<string, string | boolean | undefined>;
  } catch (err) {
    throw new UsageError(usageMessage(err as Error & { code?: string }, Object.keys(options)));
  }
}

/** One line for a parse error of node:util's parseArgs, naming the flag and, for a typo, the flag meant. */
export function usageMessage(err: Error & { code?: string }, known: string[]): string {
  const quoted = /'(-[^']*)'/.exec(err.message)?.[1];
  switch (err.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION': {
      const flag = quoted ?? 'option';
      const name = flag.replace(/^-+/, '').split('=')[0] ?? '';
      const meant = closest(name, known);
      return `unknown option ${flag}${meant ? ` (did you mean --${meant}?)` : ''}`;
    }
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE': {
      const name = /--([\w-]+)/.exec(err.message)?.[1];
      return name && /argument missing/.test(err.message)
        ? `option --${name} needs a value (--${name} <value>)`
        : name
          ? `option --${name} takes no value`
          : err.message;
    }
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return `unexpected argument ${quoted ?? /'([^']*)'/.exec(err.message)?.[1] ?? ''}: every value goes after its --flag`;
    default:
      return err.message;
  }
}

export function formatHelp(spec: CommandSpec): string {
  const lines = [`${spec.summary}`, '', `Usage: ${spec.usage}`, '', 'Options:'];
  const rows = Object.entries(spec.options).map(([name, o]) => {
    const flag = `${o.short ? `-${o.short}, ` : '    '}--${name}${o.type === 'string' ? ' <value>' : ''}`;
    const extra = [o.default ? `default: ${o.default}` : '', o.env?.length ? `env: ${o.env.join(', ')}` : '']
      .filter(Boolean)
      .join('; ');
    return [flag, extra ? `${o.description} (${extra})` : o.description] as const;
  });
  rows.push(['-h, --help', 'Show this help']);
  const width = Math.max(...rows.map(([f]) => f.length)) + 2;
  for (const [f, d] of rows) lines.push(`  ${f.padEnd(width)}${d}`);
  return `${lines.join('\n')}\n`;
}

/**
 * The value of one option: the flag when given (an empty flag counts as not given), else the first set environment
 * variable the option names, else its default. Every command reads its options through this.
 */
export function optionPicker(
  spec: { options: Record<string, Pick<OptionBase, 'type' | 'env' | 'default'>> },
  flags: Record<string, unknown>,
  env: NodeJS.ProcessEnv,
): OptionPicker {
  const optionOf = (name: string) => {
    const o = spec.options[name];
    if (!o) throw new Error(`option --${name} is not in the command's spec`);
    return o;
  };
  const given = (name: string) => {
    const v = flags[name];
    return typeof v === 'string' && v !== '' ? v : undefined;
  };
  const pick = (name: string) => given(name) ?? fromEnv(env, optionOf(name).env) ?? optionOf(name).default;
  return Object.assign(pick, {
    envVarOf: (name: string) => (given(name) === undefined ? envVarOf(env, optionOf(name).env) : undefined),
  });
}

/** Reads the first set environment variable of a list. */
export function fromEnv(env: NodeJS.ProcessEnv, names: readonly string[] | undefined): string | undefined {
  const name = envVarOf(env, names);
  return name === undefined ? undefined : env[name];
}

function envVarOf(env: NodeJS.ProcessEnv, names: readonly string[] | undefined): string | undefined {
  return names?.find((n) => env[n] !== undefined && env[n] !== '');
}

/**
 * The configuration the options with a `path` make: each value (through its `read`) at its path. The command's zod
 * schema then checks it; what no single flag decides (one flag's default taken from another) the command adds.
 */
export function optionValues(spec: CommandSpec, pick: OptionPicker): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, o] of Object.entries(spec.options)) {
    if (o.path) setPath(out, o.path, o.read ? o.read(pick(name), flagLabel(name, pick)) : pick(name));
  }
  return out;
}

/** `--name`, or `--name (VAR)` when the value came from that environment variable. */
export function flagLabel(name: string, pick: OptionPicker): string {
  const env = pick.envVarOf(name);
  return env ? `--${name} (${env})` : `--${name}`;
}

/** Sets a dotted path in a plain object, making the objects on the way. */
function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const keys = path.split('.');
  let at = target;
  for (const key of keys.slice(0, -1)) {
    if (typeof at[key] !== 'object' || at[key] === null) at[key] = {};
    at = at[key] as Record<string, unknown>;
  }
  at[keys.at(-1)!] = value;
}

/**
 * What a validation issue at `issuePath` of the configuration is about: the flag whose `path` is the longest prefix of
 * it (an array item or a map key names its list's flag), with the environment variable in parentheses when the value
 * came from there; an environment-only setting by its variable. Undefined when no option owns the path.
 */
export function flagAt(spec: CommandSpec, issuePath: readonly PropertyKey[], pick?: OptionPicker): string | undefined {
  const path = issuePath.map(String);
  const covers = (p: string) => {
    const keys = p.split('.');
    return keys.length <= path.length && keys.every((k, i) => path[i] === k);
  };
  let best: { name: string; depth: number } | undefined;
  for (const [name, o] of Object.entries(spec.options)) {
    const depth = o.path?.split('.').length ?? 0;
    if (o.path && covers(o.path) && depth > (best?.depth ?? 0)) best = { name, depth };
  }
  if (best) return pick ? flagLabel(best.name, pick) : `--${best.name}`;
  const envOnly = Object.entries(spec.envOnly ?? {}).find(([p]) => covers(p));
  return envOnly?.[1];
}

/** The option with this config path (for checks across several flags that name them). */
export function optionAt(spec: CommandSpec, path: string): string {
  const found = Object.entries(spec.options).find(([, o]) => o.path === path);
  if (!found) throw new Error(`no option of ${spec.name} has the path ${path}`);
  return found[0];
}

/**
 * Checks a configuration with its schema; the first problem is a UsageError naming its flag (flagAt), as
 * `<prefix><flag>: <message>`.
 */
export function parseOptions<T>(
  spec: CommandSpec,
  schema: z.ZodType<T>,
  raw: unknown,
  pick: OptionPicker,
  prefix = 'invalid ',
): T {
  const parsed = schema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const named = flagAt(spec, issue.path, pick) ?? issue.path.map(String).join('.');
  throw new UsageError(`${prefix}${named}: ${issue.message}`);
}

/** [path, schema] of each option that fills the configuration. */
type PathSchemas<O> = {
  // An index signature (a spread Record<string, PlainOption>) fills nothing.
  [K in keyof O]: string extends K
    ? never
    : O[K] extends { path: infer P extends string; schema: infer S extends z.ZodType }
      ? [P, S]
      : never;
}[keyof O];
type Head<P extends string> = P extends `${infer H}.${string}` ? H : P;
type Under<E, H extends string> = E extends [`${H}.${infer R}`, infer S] ? [R, S] : never;
type Leaf<E, H extends string> = E extends [H, infer S extends z.ZodType] ? S : never;
/** The z.object shape the paths make: `a.b` and `a.c` become `a: z.object({ b, c })`. */
type ShapeOf<E extends [string, z.ZodType]> = {
  [H in Head<E[0]>]: [Under<E, H>] extends [never] ? Leaf<E, H> : z.ZodObject<ShapeOf<Under<E, H>>>;
};
/** The schema of the configuration the options with a `path` fill (configSchema). */
export type OptionsSchema<O extends Record<string, OptionSpec>> = z.ZodObject<ShapeOf<PathSchemas<O>>>;

type SchemaTree = { [key: string]: z.ZodType | SchemaTree };

/**
 * The schema of a command's configuration, made of its options' schemas at their paths (nested paths make nested
 * objects). Settings no single flag decides are added to it by the command, visibly (`.extend({...})`). An option
 * with a path but no schema is a programming error, thrown here.
 */
export function configSchema<O extends Record<string, OptionSpec>>(options: O): OptionsSchema<O> {
  const tree: SchemaTree = {};
  for (const [name, o] of Object.entries(options)) {
    if (o.path === undefined) continue;
    if (!(o.schema instanceof z.ZodType)) throw new Error(`option --${name} fills ${o.path} but has no zod schema`);
    const keys = o.path.split('.');
    let at = tree;
    for (const key of keys.slice(0, -1)) {
      const next = at[key] ?? (at[key] = {});
      if (next instanceof z.ZodType) throw new Error(`option --${name}: ${o.path} is under another option's path`);
      at = next;
    }
    const leaf = keys.at(-1)!;
    if (at[leaf] !== undefined) throw new Error(`option --${name}: another option fills ${o.path} already`);
    at[leaf] = o.schema;
  }
  const toObject = (t: SchemaTree): z.ZodObject =>
    z.object(Object.fromEntries(Object.entries(t).map(([k, v]) => [k, v instanceof z.ZodType ? v : toObject(v)])));
  return toObject(tree) as OptionsSchema<O>;
}

export const portSchema = z.coerce.number().int().min(0).max(65535);
export const positiveIntSchema = z.coerce.number().int().positive();
