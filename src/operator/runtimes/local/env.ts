// The environment of every process the local runtime starts (build steps and agent servers), built from an
// allow-list: the dev process's own variables (bootstrap API key, database URL, cloud credentials...) never reach
// code a workspace controls.
import { reservedEnvName } from '../../../lib/reserved-env.ts';

/** Variables copied from the dev process when set: locale, time zone, search path, proxies and CA bundles. */
const PASSED = new Set([
  'PATH',
  'NODE_EXTRA_CA_CERTS',
  'SSL_CERT_FILE',
  'SSL_CERT_DIR',
  'LANG',
  'LANGUAGE',
  'TZ',
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'NO_PROXY',
  'ALL_PROXY',
  'http_proxy',
  'https_proxy',
  'no_proxy',
  'all_proxy',
]);
const PASSED_PREFIX = /^LC_[A-Z_]+$/;

const FALLBACK_PATH = '/usr/local/bin:/usr/bin:/bin';

export type ChildEnvInput = {
  /** The dev process's environment (only allow-listed names are read). */
  base: NodeJS.ProcessEnv;
  /** The deployment's own home folder. */
  home: string;
  /** npm's cache folder. */
  npmCache: string;
  /** Added last and winning: the deployment's secrets for an agent server, the runtime's own settings. */
  extra?: Record<string, string>;
};

export function childEnv({ base, home, npmCache, extra = {} }: ChildEnvInput): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(base)) {
    if (value !== undefined && (PASSED.has(name) || PASSED_PREFIX.test(name))) env[name] = value;
  }
  env.PATH ??= FALLBACK_PATH;
  Object.assign(env, {
    HOME: home,
    npm_config_cache: npmCache,
    npm_config_update_notifier: 'false',
    npm_config_fund: 'false',
    npm_config_audit: 'false',
  });
  return { ...env, ...extra };
}

/** Linux refuses a single "NAME=value" string longer than this (MAX_ARG_STRLEN) with E2BIG. */
const MAX_ENTRY_BYTES = 128 * 1024;
/** Environment and arguments share one limit (ARG_MAX, often 2 MiB); stay well below it. */
const MAX_TOTAL_BYTES = 1024 * 1024;
/** bwrap takes at most 9000 arguments, and each variable costs three (--setenv NAME VALUE). */
const MAX_VARIABLES = 2000;

/** Why this environment cannot be given to a process, or undefined when it can. Names only, never values. */
export function envProblem(env: Record<string, string>): string | undefined {
  let total = 0;
  for (const [name, value] of Object.entries(env)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))
      return `environment variable name ${JSON.stringify(name.slice(0, 64))} is not valid`;
    if (value.includes('\0')) return `environment variable ${name} contains a NUL character`;
    const bytes = Buffer.byteLength(name) + Buffer.byteLength(value) + 2;
    if (bytes > MAX_ENTRY_BYTES)
      return `environment variable ${name} is too large (${Math.ceil(bytes / 1024)} KiB; at most 128 KiB)`;
    total += bytes;
  }
  if (total > MAX_TOTAL_BYTES) return `the environment is too large (${Math.ceil(total / 1024)} KiB; at most 1024 KiB)`;
  const count = Object.keys(env).length;
  if (count > MAX_VARIABLES) return `the environment has ${count} variables; at most ${MAX_VARIABLES}`;
  return undefined;
}

/** Why a deployment's secrets cannot be given to its server: envProblem's reasons, or a reserved name. */
export function secretsProblem(secrets: Record<string, string>): string | undefined {
  for (const name of Object.keys(secrets)) {
    const reserved = reservedEnvName(name);
    if (reserved) return reserved;
  }
  return envProblem(secrets);
}
