// langgraph.json as users write it. Only the keys the agent server uses are checked; the rest (python_version, ...)
// pass through so a file written for the reference CLI still loads.
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parse as parseDotenv } from 'dotenv';
import { z } from 'zod';
import { GRAPH_MODULE_EXTENSIONS, JS_ONLY_MESSAGE } from '../../lib/graph-language.ts';

const graphEntry = z.union([
  z.string().min(1),
  // The reference platform also accepts {path, description}.
  z.looseObject({ path: z.string().min(1), description: z.string().optional() }),
]);

export const langgraphJsonSchema = z.looseObject({
  graphs: z.record(z.string().min(1), graphEntry).refine((g) => Object.keys(g).length > 0, {
    message: 'must name at least one graph',
  }),
  env: z.union([z.string().min(1), z.record(z.string(), z.union([z.string(), z.number(), z.boolean()]))]).optional(),
  dependencies: z.array(z.string()).optional(),
  node_version: z.union([z.string(), z.number()]).optional(),
  // Custom auth: "./auth.ts:auth" exports an Auth from @langchain/langgraph-sdk/auth.
  auth: z
    .looseObject({
      path: z.string().min(1).optional(),
      disable_studio_auth: z.boolean().optional(),
      // Shown in /openapi.json and /docs: how callers authenticate (OpenAPI security schemes and requirements),
      // globally and per route ({"/threads": {"post": [{"bearer": []}]}}).
      openapi: z
        .looseObject({
          securitySchemes: z.record(z.string(), z.record(z.string(), z.unknown())).optional(),
          security: z.array(z.record(z.string(), z.array(z.string()))).optional(),
          paths: z
            .record(z.string(), z.record(z.string(), z.array(z.record(z.string(), z.array(z.string())))))
            .optional(),
        })
        .optional(),
    })
    .optional(),
  // Custom routes and HTTP settings.
  http: z
    .looseObject({
      app: z.string().min(1).optional(),
      enable_custom_route_auth: z.boolean().optional(),
      // Whether the custom app's middleware or authentication sees a request first (the platform's two values).
      middleware_order: z
        .enum(['middleware_first', 'auth_first'], { error: 'must be "middleware_first" or "auth_first"' })
        .optional(),
      disable_assistants: z.boolean().optional(),
      disable_threads: z.boolean().optional(),
      disable_runs: z.boolean().optional(),
      disable_store: z.boolean().optional(),
      disable_meta: z.boolean().optional(),
      disable_ui: z.boolean().optional(),
      disable_webhooks: z.boolean().optional(),
      disable_mcp: z.boolean().optional(),
      disable_a2a: z.boolean().optional(),
      mount_prefix: z
        .string()
        .regex(/^\/[^?#]*[^/?#]$/, 'a path such as "/api" (leading "/", no trailing "/")')
        .optional(),
      configurable_headers: z
        .looseObject({
          // The platform's docs spell the lists both ways.
          include: z.array(z.string().min(1)).nullish(),
          includes: z.array(z.string().min(1)).nullish(),
          exclude: z.array(z.string().min(1)).nullish(),
          excludes: z.array(z.string().min(1)).nullish(),
        })
        .nullish(),
      cors: z
        .object({
          allow_origins: z.array(z.string()).optional(),
          allow_origin_regex: z.string().optional(),
          allow_methods: z.array(z.string()).optional(),
          allow_headers: z.array(z.string()).optional(),
          allow_credentials: z.boolean().optional(),
          expose_headers: z.array(z.string()).optional(),
          max_age: z.number().int().nonnegative().optional(),
        })
        .optional(),
    })
    .optional(),
});

/**
 * Keys of langgraph.json this server does not act on ("store", "ui", "http.configurable_headers", ...), so the
 * caller can say once that they are ignored. Keys used by the build (dependencies, node_version, dockerfile_lines)
 * count as used.
 */
export function ignoredConfigKeys(json: LanggraphJson): string[] {
  const used: Record<string, Set<string> | true> = {
    graphs: true,
    env: true,
    dependencies: true,
    node_version: true,
    dockerfile_lines: true,
    store: new Set(['index', 'ttl']),
    checkpointer: new Set(['ttl']),
    ui: true,
    ui_config: new Set(['shared']),
    auth: new Set(['path', 'disable_studio_auth', 'openapi']),
    webhooks: new Set(['env_prefix', 'url', 'headers']),
    http: new Set([
      'app',
      'enable_custom_route_auth',
      'middleware_order',
      'disable_assistants',
      'disable_threads',
      'disable_runs',
      'disable_store',
      'disable_meta',
      'disable_ui',
      'disable_webhooks',
      'disable_mcp',
      'disable_a2a',
      'mount_prefix',
      'cors',
      'configurable_headers',
    ]),
  };
  const ignored: string[] = [];
  for (const [key, value] of Object.entries(json)) {
    const known = used[key];
    if (!known) ignored.push(key);
    else if (known !== true && value && typeof value === 'object') {
      for (const sub of Object.keys(value)) if (!known.has(sub)) ignored.push(`${key}.${sub}`);
    }
  }
  return ignored;
}

export type LanggraphJson = z.infer<typeof langgraphJsonSchema>;

/** Raised when langgraph.json or a graph it names cannot be used; the message names the file or graph. */
export class GraphConfigError extends Error {
  override name = 'GraphConfigError';
}

export interface ParsedEntry {
  graphId: string;
  /** Absolute path of the module. */
  path: string;
  exportName: string;
}

export async function readLanggraphJson(configPath: string): Promise<LanggraphJson> {
  let text: string;
  try {
    text = await readFile(configPath, 'utf8');
  } catch (err) {
    throw new GraphConfigError(`cannot read graph config ${configPath}: ${(err as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new GraphConfigError(`graph config ${configPath} is not valid JSON: ${(err as Error).message}`);
  }
  const parsed = langgraphJsonSchema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new GraphConfigError(`graph config ${configPath} is invalid: ${problems}`);
  }
  return parsed.data;
}

const MODULE_EXTENSIONS: ReadonlySet<string> = new Set(GRAPH_MODULE_EXTENSIONS);

/** "./src/agent.ts:graph" -> absolute path + export name ("default" when none is given). */
export function parseGraphEntry(
  graphId: string,
  entry: LanggraphJson['graphs'][string],
  projectDir: string,
): ParsedEntry {
  const spec = typeof entry === 'string' ? entry : entry.path;
  const colon = spec.lastIndexOf(':');
  const file = colon >= 0 ? spec.slice(0, colon) : spec;
  const exportName = colon >= 0 ? spec.slice(colon + 1) : 'default';
  if (!file) throw new GraphConfigError(`graph "${graphId}": "${spec}" names no file`);
  if (!exportName) throw new GraphConfigError(`graph "${graphId}": "${spec}" has an empty export name after ":"`);
  const ext = path.extname(file);
  if (ext === '.py') throw new GraphConfigError(`graph "${graphId}": "${file}" is a Python graph: ${JS_ONLY_MESSAGE}`);
  if (!MODULE_EXTENSIONS.has(ext)) {
    throw new GraphConfigError(
      `graph "${graphId}": "${file}" must be a .ts, .mts, .js or .mjs module (got "${ext || 'no extension'}")`,
    );
  }
  return { graphId, path: path.resolve(projectDir, file), exportName };
}

/**
 * The "env" of the langgraph.json at `configPath`, read synchronously for the server's own configuration; {} when
 * the file or its env cannot be read (loading the graphs reports that, naming the problem).
 */
export function langgraphJsonEnv(configPath: string): Record<string, string> {
  try {
    const parsed = langgraphJsonSchema.shape.env.safeParse(
      (JSON.parse(readFileSync(configPath, 'utf8')) as { env?: unknown }).env,
    );
    const env = parsed.success ? parsed.data : undefined;
    if (env === undefined) return {};
    if (typeof env === 'string') return parseDotenv(readFileSync(path.resolve(path.dirname(configPath), env), 'utf8'));
    return envStrings(env);
  } catch {
    return {};
  }
}

/** The "env" key: an object, or a path (relative to langgraph.json) of a .env file. */
export async function readGraphEnv(env: LanggraphJson['env'], projectDir: string): Promise<Record<string, string>> {
  if (env === undefined) return {};
  if (typeof env === 'string') {
    const file = path.resolve(projectDir, env);
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      throw new GraphConfigError(`env file ${file} named in langgraph.json cannot be read: ${(err as Error).message}`);
    }
    return parseDotenv(text);
  }
  return envStrings(env);
}

/** The object form of "env", every value as the string the environment holds. */
function envStrings(env: Record<string, string | number | boolean>): Record<string, string> {
  return Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)]));
}
