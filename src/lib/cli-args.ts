import { parseArgs, type ParseArgsConfig } from 'node:util';
import { z } from 'zod';
import { closest } from './near-names.ts';

export type OptionSpec = {
  type: 'string' | 'boolean';
  short?: string;
  /** One line for --help. */
  description: string;
  /** Shown in --help, e.g. "PORT" or "8000". */
  default?: string;
  env?: string[];
};

export type CommandSpec = {
  name: string;
  summary: string;
  usage: string;
  options: Record<string, OptionSpec>;
};

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
  spec: { options: Record<string, Pick<OptionSpec, 'env' | 'default'>> },
  flags: Record<string, unknown>,
  env: NodeJS.ProcessEnv,
): (name: string) => string | undefined {
  return (name) => {
    const o = spec.options[name];
    if (!o) throw new Error(`option --${name} is not in the command's spec`);
    const v = flags[name];
    return (typeof v === 'string' && v !== '' ? v : undefined) ?? fromEnv(env, o.env) ?? o.default;
  };
}

/** Reads the first set environment variable of a list. */
export function fromEnv(env: NodeJS.ProcessEnv, names: string[] | undefined): string | undefined {
  for (const n of names ?? []) {
    const v = env[n];
    if (v !== undefined && v !== '') return v;
  }
  return undefined;
}

export const portSchema = z.coerce.number().int().min(0).max(65535);
export const positiveIntSchema = z.coerce.number().int().positive();
