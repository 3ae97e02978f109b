// `agentplane api-key create`: makes a key for one or more tenants, prints it once, stores only its hash.
import { z } from 'zod';
import { formatHelp, parseCommandArgs, UsageError, type CommandSpec } from '../lib/cli-args.ts';
import { createLogger } from '../lib/logger.ts';
import { isAppError } from '../lib/errors.ts';
import { assertTenantId, createApiKey } from './auth/keys.ts';
import { parseOrUsage, picker, storeConfigFrom, storeOptions, StoreConfig } from './config.ts';
import { describeError, openControlPlaneStore, StoreUnavailableError } from './store/index.ts';
import type { ControlPlaneStore } from './store/types.ts';

export const apiKeyCommand: CommandSpec = {
  name: 'api-key',
  summary: 'Create an API key for the control plane (printed once; only its SHA-256 hash is stored)',
  usage: 'agentplane api-key create --tenant <id>[,<id>...] [--name NAME] [--data-dir DIR | --store kubernetes [--namespace NS]]',
  options: {
    tenant: { type: 'string', description: 'Tenant (workspace) id(s) the key may act for, comma-separated; * = every tenant' },
    name: { type: 'string', description: 'A label for the key', default: 'api-key' },
    ...storeOptions,
    json: { type: 'boolean', description: 'Print {"key","id","tenants"} as JSON instead of the bare key' },
  },
};

export async function run(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  if (!sub || sub === '--help' || sub === '-h') {
    process.stdout.write(formatHelp(apiKeyCommand));
    return;
  }
  if (sub !== 'create') throw new UsageError(`unknown subcommand "${sub}" (expected "create")`);
  const flags = parseCommandArgs(apiKeyCommand, rest);
  if (flags.help) {
    process.stdout.write(formatHelp(apiKeyCommand));
    return;
  }
  const pick = picker(apiKeyCommand, flags, process.env);
  const tenants = (typeof flags.tenant === 'string' ? flags.tenant : '').split(',').map((t) => t.trim()).filter(Boolean);
  if (!tenants.length) throw new UsageError('--tenant is required');
  for (const t of tenants) {
    if (t === '*') continue;
    try {
      assertTenantId(t);
    } catch (err) {
      throw new UsageError(`--tenant: ${(err as Error).message}`);
    }
  }
  const storeConfig = parseOrUsage(StoreConfig, storeConfigFrom(pick, process.cwd()));
  const logger = createLogger({ level: 'warn', name: 'api-key' });
  let store: ControlPlaneStore | undefined;
  try {
    store = await openControlPlaneStore(storeConfig, logger);
    const { key, record } = await createApiKey(store, { tenants, name: z.string().parse(pick('name')) });
    process.stdout.write(flags.json ? JSON.stringify({ key, id: record.id, name: record.name, tenants }) + '\n' : key + '\n');
    process.stderr.write(`Created API key ${record.id} for ${tenants.join(', ')}. Store it now: it is not shown again.\n`);
  } catch (err) {
    // The store is unreachable, refuses the write, or the input is wrong: one line naming it, no stack trace.
    const where = storeConfig.store === 'kubernetes' ? `kubernetes store, namespace ${storeConfig.namespace}` : `--data-dir ${storeConfig.dataDir}`;
    const message = err instanceof StoreUnavailableError || isAppError(err) ? err.message : `could not store the key (${where}): ${describeError(err)}`;
    process.stderr.write(`agentplane api-key: ${message}\n`);
    process.exitCode = 1;
  } finally {
    await store?.close().catch(() => undefined);
  }
}
