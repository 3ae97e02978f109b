// `agentplane operator` configuration: the flags of flags.ts (each with the env var the Helm chart sets and the path of
// its value here), parsed once with zod; a problem names the flag it came from.
import { hostname } from 'node:os';
import { z } from 'zod';
import {
  configSchema,
  optionPicker,
  optionValues,
  parseCommandArgs,
  parseOptions,
  UsageError,
  type OptionPicker,
} from '../lib/cli-args.ts';
import { sourceFetchKey } from '../lib/source-fetch-token.ts';
import { kubernetesRuntimeConfigSchema } from './runtimes/kubernetes/config.ts';
import { githubAppSettingsFrom } from '../git/github-config.ts';
import { operatorCommand } from './flags.ts';
import type { GitHubAppSettings } from '../git/github-app.ts';

const optionsSchema = configSchema(operatorCommand.options);
// The runtime flags' schemas are fields of the runtime's own schema (flags/runtime.ts); the whole of it also checks
// what goes across them (one TLS Secret or one per Ingress) and holds settings no flag gives. The listener settings
// are checked apart, all four or none (listenerOf).
const schema = optionsSchema.omit({ listener: true }).extend({ runtime: kubernetesRuntimeConfigSchema });
/** Where a data-plane-only operator asks for clone tokens: the listener's control plane, with its key. */
export type OperatorListenerSettings = { controlPlaneUrl: string; tenant: string; listenerId: string; apiKey: string };

/**
 * `github`: the control plane's GitHub App, to mint a token for each build of a GitHub integration. `listener`: in a
 * data-plane-only install, the listener's control plane mints them instead (the cluster holds no integrations).
 */
export type OperatorConfig = z.infer<typeof schema> & {
  github?: GitHubAppSettings;
  listener?: OperatorListenerSettings;
};

/** Both settings or neither: one without the other is a usage error. */
function agentAuthOf(url: string | undefined, key: string | undefined) {
  if (!url && !key) return {};
  if (!url || !key) throw new UsageError('--control-plane-url and --deployment-token-key go together');
  return { agentAuth: { controlPlaneUrl: url, tokenKey: Buffer.from(key.trim(), 'base64') } };
}

/** --source-fetch-url and --source-uploads-key together (or neither): the fetch tokens' key is derived here. */
function sourceFetchOf(url: string | undefined, key: string | undefined, peer: unknown) {
  if (!url && !key) return {};
  if (!url || !key) throw new UsageError('--source-fetch-url and --source-uploads-key go together');
  const raw = Buffer.from(key.trim(), 'base64');
  if (raw.length !== 32) throw new UsageError('--source-uploads-key: must be the base64 of exactly 32 bytes');
  return { sourceFetch: { url: url.replace(/\/+$/, ''), tokenKey: sourceFetchKey(raw), ...(peer ? { peer } : {}) } };
}

/** All four --listener-* settings or none, checked as `agentplane listener` checks its own. */
function listenerOf(given: Settings, pick: OptionPicker): { listener?: OperatorListenerSettings } {
  const options = Object.entries(operatorCommand.options).filter(([, o]) => o.path?.startsWith('listener.'));
  const values = Object.fromEntries(
    options.map(([, o]) => o.path!.slice('listener.'.length)).map((k) => [k, str(given[k])?.trim() || undefined]),
  );
  const missing = options.filter(([, o]) => values[o.path!.slice('listener.'.length)] === undefined);
  if (missing.length === options.length) return {};
  const names = (list: typeof options) => list.map(([name]) => `--${name}`).join(', ');
  if (missing.length) throw new UsageError(`${names(options)} go together (missing: ${names(missing)})`);
  return parseOptions(operatorCommand, optionsSchema.pick({ listener: true }), { listener: values }, pick);
}

type Settings = Record<string, unknown>;
const str = (v: unknown) => (typeof v === 'string' ? v : undefined);

/** Returns null for --help. */
export function parseOperatorConfig(argv: string[], env: NodeJS.ProcessEnv): OperatorConfig | null {
  const flags = parseCommandArgs(operatorCommand, argv);
  if (flags.help) return null;
  const pick = optionPicker(operatorCommand, flags, env);
  const { listener, ...config } = optionValues(operatorCommand, pick) as Settings & { listener: Settings };
  const runtime = config.runtime as Settings;
  // What no single flag decides: one flag's default taken from another, settings that only go together.
  runtime.gitImage ??= runtime.baseImage;
  config.leaseNamespace ??= config.namespace;
  config.identity ??= `${hostname()}-${process.pid}`;
  // The Gateway API settings: present only when parent Gateways are named (the others alone change nothing).
  if ((runtime.gateway as Settings).parentRefs === undefined) delete runtime.gateway;
  const agentAuth = runtime.agentAuth as Settings;
  const sourceFetch = runtime.sourceFetch as Settings;
  delete runtime.agentAuth;
  delete runtime.sourceFetch;
  Object.assign(
    runtime,
    agentAuthOf(str(agentAuth.controlPlaneUrl), str(agentAuth.tokenKey)),
    sourceFetchOf(str(sourceFetch.url), str(sourceFetch.tokenKey), sourceFetch.peer),
  );
  const parsed = parseOptions(operatorCommand, schema, config, pick);
  const github = githubAppSettingsFrom(pick, env);
  return { ...parsed, ...(github ? { github } : {}), ...listenerOf(listener, pick) };
}
