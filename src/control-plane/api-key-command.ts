// `agentplane api-key create`: makes a key for one or more workspaces (tenants in code), prints it once, stores only its hash.
import { existsSync } from 'node:fs';
import { z } from 'zod';
import { formatHelp, parseCommandArgs, UsageError, type CommandSpec } from '../lib/cli-args.ts';
import { createLogger } from '../lib/logger.ts';
import { describeError, isAppError } from '../lib/errors.ts';
import { assertTenantId, createApiKey } from './api-keys/keys.ts';
import { optionPicker } from '../lib/cli-args.ts';
import { parseStoreConfig, storeOptions } from './config.ts';
import { embeddedStateFile } from '../state/embedded/index.ts';
import { openPlatformState, StateUnavailableError } from '../state/index.ts';
import type { PlatformState } from '../state/types.ts';

export const apiKeyCommand: CommandSpec = {
  name: 'api-key',
  summary: 'Create, list or revoke API keys (a key is printed once; only its SHA-256 hash is stored)',
  usage:
    'agentplane api-key create --tenant <id>[,<id>...] [--name NAME] [store flags]\n' +
    '       agentplane api-key list [--json] [store flags]\n' +
    '       agentplane api-key revoke <key id> [store flags]\n' +
    '  store flags: --data-dir DIR | --store kubernetes [--namespace NS] [--kubeconfig FILE]',
  options: {
    tenant: {
      type: 'string',
      description: 'create: workspace id(s) the key may act for, comma-separated; * = every workspace',
    },
    name: { type: 'string', description: 'create: a label for the key', default: 'api-key' },
    ...storeOptions,
    json: { type: 'boolean', description: 'create: print {"key","id","tenants"}; list: print the keys as JSON' },
    init: {
      type: 'boolean',
      description:
        'create: start a new embedded store in --data-dir when there is none (without it, a folder with no store is an error)',
    },
  },
};

const SUBCOMMANDS = ['create', 'list', 'revoke'] as const;

export async function run(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  if (!sub || sub === '--help' || sub === '-h') {
    process.stdout.write(formatHelp(apiKeyCommand));
    return;
  }
  if (!(SUBCOMMANDS as readonly string[]).includes(sub))
    throw new UsageError(`unknown subcommand "${sub}" (expected ${SUBCOMMANDS.join(', ')})`);
  let keyId: string | undefined;
  if (sub === 'revoke') {
    keyId = rest[0] && !rest[0].startsWith('-') ? rest.shift() : undefined;
    if (!keyId) throw new UsageError('revoke needs the id of the key (see `agentplane api-key list`)');
  }
  const flags = parseCommandArgs(apiKeyCommand, rest);
  if (flags.help) {
    process.stdout.write(formatHelp(apiKeyCommand));
    return;
  }
  const pick = optionPicker(apiKeyCommand, flags, process.env);
  const tenants = (typeof flags.tenant === 'string' ? flags.tenant : '')
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  if (sub === 'create') {
    if (!tenants.length) throw new UsageError('--tenant is required');
    for (const t of tenants) {
      if (t === '*') continue;
      try {
        assertTenantId(t);
      } catch (err) {
        throw new UsageError(`--tenant: ${(err as Error).message}`);
      }
    }
  } else if (tenants.length) {
    throw new UsageError(`--tenant is only for create`);
  }
  const storeConfig = parseStoreConfig(apiKeyCommand, pick, process.cwd());
  if (storeConfig.store === 'embedded' && !existsSync(embeddedStateFile(storeConfig.dataDir))) {
    // Opening would create an empty store: a key made there is unknown to the platform, which reads another folder.
    if (!(sub === 'create' && flags.init)) {
      process.stderr.write(`agentplane api-key: ${noStoreMessage(storeConfig.dataDir, sub === 'create')}\n`);
      process.exitCode = 1;
      return;
    }
  }
  const logger = createLogger({ level: 'warn', name: 'api-key' });
  let store: PlatformState | undefined;
  try {
    store = await openPlatformState(storeConfig, logger);
    if (sub === 'create') {
      const { key, record } = await createApiKey(store, { tenants, name: z.string().parse(pick('name')) });
      process.stdout.write(
        flags.json ? `${JSON.stringify({ key, id: record.id, name: record.name, tenants })}\n` : `${key}\n`,
      );
      process.stderr.write(
        `Created API key ${record.id} for ${tenants.join(', ')}. Store it now: it is not shown again.\n`,
      );
    } else if (sub === 'list') {
      const keys = (await store.listApiKeys()).map((k) => ({
        id: k.id,
        name: k.name,
        tenants: k.tenants,
        created_at: k.createdAt,
      }));
      if (flags.json) process.stdout.write(`${JSON.stringify(keys)}\n`);
      else process.stdout.write(formatKeyTable(keys));
    } else {
      if (!(await store.deleteApiKey(keyId!))) {
        process.stderr.write(`agentplane api-key: no API key with id ${keyId}\n`);
        process.exitCode = 1;
        return;
      }
      process.stderr.write(`Revoked API key ${keyId}. Agents stop accepting it within seconds.\n`);
    }
  } catch (err) {
    // The store is unreachable, refuses the write, or the input is wrong: one line naming it, no stack trace.
    const where =
      storeConfig.store === 'kubernetes'
        ? `kubernetes store, namespace ${storeConfig.namespace}`
        : `--data-dir ${storeConfig.dataDir}`;
    const verb =
      sub === 'create'
        ? 'could not store the key'
        : sub === 'list'
          ? 'could not list the keys'
          : 'could not revoke the key';
    const message =
      err instanceof StateUnavailableError || isAppError(err)
        ? err.message
        : `${verb} (${where}): ${describeError(err)}`;
    process.stderr.write(`agentplane api-key: ${message}\n`);
    process.exitCode = 1;
  } finally {
    await store?.close().catch(() => undefined);
  }
}

function noStoreMessage(dataDir: string, create: boolean): string {
  return (
    `no control-plane store in ${dataDir}: pass the folder your platform uses as --data-dir ` +
    `(\`agentplane dev --data-dir D\` keeps it in D/control-plane; the default is .agentplane/control-plane ` +
    `under the folder dev was started in)${create ? ', or add --init to start a new store there' : ''}`
  );
}

function formatKeyTable(keys: { id: string; name: string; tenants: string[]; created_at: string }[]): string {
  if (!keys.length) return 'no API keys\n';
  const rows = [
    ['ID', 'NAME', 'TENANTS', 'CREATED'],
    ...keys.map((k) => [k.id, k.name, k.tenants.join(','), k.created_at]),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return `${rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n')}\n`;
}
