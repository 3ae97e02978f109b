// `agentplane secret-key rotate`: re-encrypts every secret value of an embedded store with a new key, in one
// transaction, while the platform is stopped (store/embedded/rotate-key.ts does the work).
import { existsSync } from 'node:fs';
import path from 'node:path';
import { formatHelp, optionPicker, parseCommandArgs, UsageError, type CommandSpec } from '../lib/cli-args.ts';
import { storeOptions } from './config.ts';
import { embeddedStateFile } from '../state/embedded/index.ts';
import { rotateSecretKey, StoreInUseError } from '../state/embedded/rotate-key.ts';
import { parseKey, SecretKeyError } from '../state/embedded/secret-box.ts';

export const secretKeyCommand: CommandSpec = {
  name: 'secret-key',
  summary:
    'Rotate the key of secret values in the embedded store: every value re-encrypted with a new key in one ' +
    'transaction (stop the platform first)',
  usage:
    'agentplane secret-key rotate [--data-dir DIR] [--json]\n' +
    '       agentplane secret-key rotate --secret-key OLD --new-key NEW [--data-dir DIR]   (key given by env, not kept in DIR)',
  options: {
    'data-dir': storeOptions['data-dir']!,
    'secret-key': {
      ...storeOptions['secret-key']!,
      description:
        'The current key, when the platform is given it (AGENTPLANE_SECRET_KEY) instead of keeping it in <data dir>/secret.key',
    },
    'new-key': {
      type: 'string',
      description:
        'Base64 of 32 bytes: the key to rotate to (e.g. openssl rand -base64 32). Required with --secret-key; ' +
        'without it a random key is written to <data dir>/secret.key',
      env: ['AGENTPLANE_NEW_SECRET_KEY'],
    },
    json: { type: 'boolean', description: 'Print what was re-encrypted as JSON' },
  },
};

export async function run(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  if (!sub || sub === '--help' || sub === '-h') {
    process.stdout.write(formatHelp(secretKeyCommand));
    return;
  }
  if (sub !== 'rotate') throw new UsageError(`unknown subcommand "${sub}" (expected rotate)`);
  const flags = parseCommandArgs(secretKeyCommand, rest);
  if (flags.help) {
    process.stdout.write(formatHelp(secretKeyCommand));
    return;
  }
  const pick = optionPicker(secretKeyCommand, flags, process.env);
  const dataDir = path.resolve(process.cwd(), pick('data-dir')!);
  const currentKey = keyOption(pick('secret-key'), '--secret-key (AGENTPLANE_SECRET_KEY)');
  const newKey = keyOption(pick('new-key'), '--new-key (AGENTPLANE_NEW_SECRET_KEY)');
  if (currentKey && !newKey) {
    throw new UsageError(
      'the current key is given (--secret-key or AGENTPLANE_SECRET_KEY), so there is no key file to write the new ' +
        'one to: pass the new key as --new-key (AGENTPLANE_NEW_SECRET_KEY), e.g. from `openssl rand -base64 32`',
    );
  }
  if (!existsSync(embeddedStateFile(dataDir))) {
    fail(
      `no control-plane store in ${dataDir}: pass the folder of the store as --data-dir (\`agentplane dev --data-dir D\` ` +
        'keeps it in D/control-plane; the default is .agentplane/control-plane under the folder dev was started in)',
    );
    return;
  }
  try {
    const result = await rotateSecretKey({
      dataDir,
      ...(currentKey ? { currentKey } : {}),
      ...(newKey ? { newKey } : {}),
    });
    if (flags.json) {
      process.stdout.write(`${JSON.stringify(result)}\n`);
      return;
    }
    const lines = [
      result.finishedInterrupted
        ? 'Finished a rotation that had been interrupted after its commit (the values were already re-encrypted).'
        : `Re-encrypted ${result.secretSets} secret set(s), ${result.integrations} integration token(s) and ` +
          `${result.authRecords} auth service record(s) with the new key.`,
      result.keyFile
        ? `The new key is in ${result.keyFile}; the old one is kept in ${result.oldKeyFile} for backups taken ` +
          'before now: delete it once you no longer need them.'
        : 'Give the platform the new key (AGENTPLANE_SECRET_KEY) before starting it: the old key no longer opens the store.',
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } catch (err) {
    if (err instanceof StoreInUseError || err instanceof SecretKeyError) {
      fail(err.message);
      return;
    }
    throw err;
  }
}

function keyOption(text: string | undefined, where: string): Buffer | undefined {
  if (text === undefined) return undefined;
  try {
    return parseKey(text, where);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

function fail(message: string): void {
  process.stderr.write(`agentplane secret-key: ${message}\n`);
  process.exitCode = 1;
}
