// Agent server configuration: flags win over environment variables, which win over defaults. Parsed once.
import { closeSync, readSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import { z } from 'zod';
import { langSmithFromEnv } from './streams/feedback.ts';
import { langgraphJsonEnv } from './graphs/config.ts';
import { DataKeyError, DataKeyring, keyringFromEnv } from './storage/data-cipher.ts';
import {
  configSchema,
  flagAt,
  flagLabel,
  fromEnv,
  optionPicker,
  optionValues,
  parseCommandArgs,
  UsageError,
} from '../lib/cli-args.ts';
import { agentServerCommand } from './flags.ts';
import { defaultPostgresPoolMaxSize, executorYoungMb, readCgroupFile, usableCpus } from './sizing.ts';

// The flags' own schemas (flags.ts), and what no flag gives: settings of environment variables only.
const Config = configSchema(agentServerCommand.options).extend({
  /** LangSmith (LANGSMITH_API_KEY, LANGSMITH_ENDPOINT): feedback URLs for runs with feedback_keys. */
  langsmith: z
    .object({ apiKey: z.string().min(1), endpoint: z.string().regex(/^https?:\/\/[^\s]+$/, 'must be an http(s) URL') })
    .nullable(),
  /**
   * The keys agent data is encrypted with at rest (LANGGRAPH_AES_KEY, AGENTPLANE_AES_PREVIOUS_KEYS): thread values,
   * checkpoints, store items, run inputs. Logged or serialised, it shows only its key id.
   */
  dataKeyring: z.custom<DataKeyring>((v) => v instanceof DataKeyring).optional(),
  /** Things worth a warning once a logger exists (deprecated settings). */
  notes: z.array(z.string()).optional(),
});
export type AgentServerConfig = z.infer<typeof Config>;

/** Returns null when --help was asked for. */
export function parseAgentServerConfig(
  argv: string[],
  env: NodeJS.ProcessEnv,
  cwd = process.cwd(),
): AgentServerConfig | null {
  const flags = parseCommandArgs(agentServerCommand, argv);
  if (flags.help) return null;
  // A watched server is started again and again: a file descriptor can be read or inherited only once.
  for (const once of ['secrets-fd', 'listen-fd'] as const) {
    if (flags.watch === true && typeof flags[once] === 'string') {
      throw new UsageError(`--watch cannot be combined with --${once} (a descriptor serves one start only)`);
    }
  }
  // Read into this copy only: process.env (and what graph code and its programs inherit) never holds them.
  if (typeof flags['secrets-fd'] === 'string') env = { ...env, ...readSecretsFd(flags['secrets-fd']) };
  const first = resolveConfig(flags, env, cwd);
  // langgraph.json "env" is the deployment's environment on the platform, so the server reads it too (LANGGRAPH_CONFIG,
  // REDIS_URI, N_JOBS_PER_WORKER, ...); the process's own variables and flags still win. The graph config's own path
  // cannot come from there.
  const fileEnv = langgraphJsonEnv(first.configPath);
  if (!Object.keys(fileEnv).length) return first;
  // Nor can --test-truncate: a project's langgraph.json must not switch on a route that deletes everything.
  const merged = resolveConfig(flags, { ...fileEnv, ...env }, cwd);
  return { ...merged, configPath: first.configPath, testTruncate: first.testTruncate };
}

function resolveConfig(
  flags: ReturnType<typeof parseCommandArgs>,
  env: NodeJS.ProcessEnv,
  cwd: string,
): AgentServerConfig {
  const pick = optionPicker(agentServerCommand, flags, env);
  // LANGGRAPH_CONFIG holds per-graph defaults (JSON), as on the LangGraph platform. Older agentplane deployments
  // set it to the path of langgraph.json, so a value that is not a JSON object is read as that path, with a note.
  const notes: string[] = [];
  let graphDefaults: unknown;
  let legacyPath: string | undefined;
  const defaultsText = pick('graph-defaults');
  if (defaultsText !== undefined) {
    if (defaultsText.trim().startsWith('{')) {
      try {
        graphDefaults = JSON.parse(defaultsText);
      } catch (err) {
        throw new UsageError(`${flagLabel('graph-defaults', pick)}: not valid JSON: ${(err as Error).message}`);
      }
    } else if (typeof flags['graph-defaults'] !== 'string') {
      legacyPath = defaultsText;
      notes.push(
        'LANGGRAPH_CONFIG holds a path: read as the path of langgraph.json; use AGENTPLANE_GRAPH_CONFIG for ' +
          'that (LANGGRAPH_CONFIG is JSON of per-graph assistant defaults, as on the LangGraph platform)',
      );
    }
  }
  const configFlag = typeof flags.config === 'string' ? flags.config : undefined;
  // What no single flag decides: paths resolved against the working folder, defaults sized to the machine, switches
  // their environment variable sets with 1 or true.
  const raw = {
    ...optionValues(agentServerCommand, pick),
    configPath: path.resolve(
      cwd,
      configFlag ?? fromEnv(env, ['AGENTPLANE_GRAPH_CONFIG']) ?? legacyPath ?? './langgraph.json',
    ),
    dataDir: path.resolve(cwd, pick('data-dir')!),
    postgresPoolMaxSize:
      pick('postgres-pool-max-size') ??
      defaultPostgresPoolMaxSize(usableCpus(os.availableParallelism(), readCgroupFile)),
    executorThreads: pick('executor-threads') ?? (usableCpus(os.availableParallelism(), readCgroupFile) >= 2 ? 1 : 0),
    executorYoungMb:
      pick('executor-young-mb') ??
      executorYoungMb(v8.getHeapStatistics().heap_size_limit, process.constrainedMemory() ?? 0, os.totalmem()),
    authKeysFile: pick('auth-keys-file') === undefined ? undefined : path.resolve(cwd, pick('auth-keys-file')!),
    activityTokenFile: pick('activity-token-file') ? path.resolve(cwd, pick('activity-token-file')!) : undefined,
    langsmith: langSmithFromEnv(env),
    graphDefaults,
    strict: flags.strict === true || /^(1|true)$/i.test(env.AGENTPLANE_STRICT ?? '') ? true : undefined,
    watch: flags.watch === true ? true : undefined,
    checkReport: pick('check-report') === undefined ? undefined : path.resolve(cwd, pick('check-report')!),
    testTruncate:
      flags['test-truncate'] === true || /^(1|true)$/i.test(env.AGENTPLANE_TEST_TRUNCATE ?? '') ? true : undefined,
    dataKeyring: dataKeyringOf(env),
    notes: notes.length ? notes : undefined,
  };
  const parsed = Config.safeParse(raw);
  if (!parsed.success) {
    const msg = parsed.error.issues
      .map((i) => `${flagAt(agentServerCommand, i.path, pick) ?? i.path.join('.')}: ${i.message}`)
      .join('; ');
    throw new UsageError(msg);
  }
  return parsed.data;
}

function dataKeyringOf(env: NodeJS.ProcessEnv): DataKeyring | undefined {
  try {
    return keyringFromEnv(env);
  } catch (err) {
    if (err instanceof DataKeyError) throw new UsageError(err.message);
    throw err;
  }
}

const SecretVars = z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string());

/** The variables a supervisor wrote to `fdText` (read to its end, then closed). */
function readSecretsFd(fdText: string): Record<string, string> {
  const fd = Number(fdText);
  if (!Number.isInteger(fd) || fd < 3)
    throw new UsageError(`--secrets-fd: ${fdText} is not a descriptor number above 2`);
  const chunks: Buffer[] = [];
  const buf = Buffer.alloc(64 * 1024);
  let total = 0;
  try {
    for (;;) {
      let n: number;
      try {
        n = readSync(fd, buf);
      } catch (err) {
        // A non-blocking descriptor with nothing yet: wait a little (this runs once, before anything else).
        if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
        continue;
      }
      if (n === 0) break;
      total += n;
      if (total > 4 * 1024 * 1024) throw new UsageError('--secrets-fd: more than 4 MiB');
      chunks.push(Buffer.from(buf.subarray(0, n)));
    }
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`--secrets-fd ${fd}: ${(err as Error).message}`);
  } finally {
    try {
      closeSync(fd);
    } catch {
      // already closed
    }
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new UsageError('--secrets-fd: not a JSON object');
  }
  const vars = SecretVars.safeParse(parsed);
  if (!vars.success) throw new UsageError('--secrets-fd: not a JSON object of variable names to strings');
  return vars.data;
}

/**
 * Removes the data keys from the process's environment once the configuration holds them: graph code runs in this
 * process and every program it starts inherits the environment, neither has a use for them.
 */
export function forgetDataKeys(env: NodeJS.ProcessEnv): void {
  delete env.LANGGRAPH_AES_KEY;
  delete env.AGENTPLANE_AES_PREVIOUS_KEYS;
}
