// Flags shared by the client commands (deploy, deployments, revisions) and the wrapper that turns their failures
// into one line on stderr and exit code 1.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { z } from 'zod';
import {
  configSchema,
  defineOptions,
  flagAt,
  formatHelp,
  optionPicker,
  optionValues,
  UsageError,
  usageMessage,
  type CommandSpec,
  type OptionSpec,
} from '../lib/cli-args.ts';
import { ApiError, ConnectionError, createClient, type ControlPlaneClient } from '../api/client.ts';
import { printable } from './output.ts';

/** A client flag may be given several times (--secret A=1 --secret B=2). */
export type ClientOptionSpec = OptionSpec & { multiple?: boolean };
export type ClientCommandSpec = Omit<CommandSpec, 'options'> & { options: Record<string, ClientOptionSpec> };

export const connectionOptions = defineOptions({
  url: {
    type: 'string',
    description: 'Control plane base URL',
    default: 'http://127.0.0.1:8080',
    env: ['AGENTPLANE_URL'],
    path: 'url',
    schema: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }),
  },
  'api-key': {
    type: 'string',
    description: 'API key sent as X-Api-Key (prefer the env var)',
    env: ['AGENTPLANE_API_KEY'],
    path: 'apiKey',
    schema: z.string({ error: 'is required: pass --api-key or set AGENTPLANE_API_KEY' }).min(1),
  },
  tenant: {
    type: 'string',
    description: 'Tenant (workspace) sent as X-Tenant-Id; needed only with a key of several workspaces',
    env: ['AGENTPLANE_TENANT'],
    path: 'tenant',
    // Optional: a key of one workspace names it (the control plane asks for it when the key has several).
    schema: z.string().min(1).optional(),
  },
  json: { type: 'boolean', description: 'Print JSON for scripts instead of tables' },
});

export type Flags = Record<string, string | boolean | string[] | undefined>;

/** Like parseCommandArgs, plus positionals (ids, names) and repeatable flags. */
export function parseClientArgs(spec: ClientCommandSpec, argv: string[]): { flags: Flags; positionals: string[] } {
  const options: ParseArgsConfig['options'] = { help: { type: 'boolean', short: 'h' } };
  for (const [name, o] of Object.entries(spec.options)) {
    options[name] = { type: o.type, ...(o.short ? { short: o.short } : {}), ...(o.multiple ? { multiple: true } : {}) };
  }
  try {
    const { values, positionals } = parseArgs({ args: argv, options, strict: true, allowPositionals: true });
    return { flags: values as Flags, positionals };
  } catch (err) {
    throw new UsageError(usageMessage(err as Error & { code?: string }, Object.keys(options)));
  }
}

/**
 * The subcommand and its arguments, or null when help was asked for (and printed): `--help` alone or after the
 * subcommand. An unknown subcommand is a usage error naming the known ones.
 */
export function parseSubcommand<S extends string>(
  spec: ClientCommandSpec,
  subcommands: readonly S[],
  argv: string[],
): { sub: S; flags: Flags; positionals: string[] } | null {
  const [sub, ...rest] = argv;
  if (!sub || sub === '--help' || sub === '-h') {
    process.stdout.write(formatHelp(spec));
    return null;
  }
  if (!(subcommands as readonly string[]).includes(sub))
    throw new UsageError(`unknown subcommand "${sub}" (expected ${subcommands.join(', ')})`);
  const { flags, positionals } = parseClientArgs(spec, rest);
  if (flags.help) {
    process.stdout.write(formatHelp(spec));
    return null;
  }
  return { sub: sub as S, flags, positionals };
}

/** A string flag, else its environment variables, else its default. */
export function pickString(
  spec: ClientCommandSpec,
  flags: Flags,
  name: string,
  env: NodeJS.ProcessEnv = process.env,
): string | undefined {
  return optionPicker(spec, flags, env)(name);
}

export function pickList(flags: Flags, name: string): string[] {
  const v = flags[name];
  return Array.isArray(v) ? v : typeof v === 'string' ? [v] : [];
}

const Connection = configSchema(connectionOptions);

export function clientFrom(
  spec: ClientCommandSpec,
  flags: Flags,
  env: NodeJS.ProcessEnv = process.env,
): ControlPlaneClient {
  const pick = optionPicker(spec, flags, env);
  const parsed = Connection.safeParse(optionValues(spec, pick));
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new UsageError(`${flagAt(spec, issue.path, pick)} ${issue.message}`);
  }
  return createClient(parsed.data);
}

/** A failure the user should read (not a bug): printed as one line, exit code 1. */
export class CliError extends Error {}

/** Runs a client command; API, connection and CLI errors become `agentplane <name>: <one line>` and exit code 1. */
export async function runReporting(name: string, fn: () => Promise<number | void>): Promise<void> {
  // `agentplane revisions logs x | head`: a closed pipe ends the output, not with a stack trace.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
    process.exit(process.exitCode ?? 0);
  });
  try {
    const code = await fn();
    if (code) process.exitCode = code;
  } catch (err) {
    if (err instanceof ApiError || err instanceof ConnectionError || err instanceof CliError) {
      // An API error may quote what a workspace wrote (names, an agent's output).
      process.stderr.write(`agentplane ${name}: ${printable(err.message)}\n`);
      process.exitCode = 1;
      return;
    }
    throw err;
  }
}

export const positiveInt = (flag: string, raw: string | undefined, fallback: number): number => {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n <= 0) throw new UsageError(`${flag}: must be a positive whole number, got "${raw}"`);
  return n;
};
