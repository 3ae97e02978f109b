// `agentplane backup --to DIR` and `agentplane restore --from DIR`: one machine's data folder (backup.ts does the
// work). Backup runs beside a running platform; restore refuses one.
import path from 'node:path';
import { formatHelp, optionPicker, parseCommandArgs, UsageError, type CommandSpec } from '../lib/cli-args.ts';
import { backup, BackupError, restore } from './backup.ts';
import { devCommand } from './config.ts';

const dataDirOption = {
  ...devCommand.options['data-dir']!,
  description: 'The data folder of `agentplane dev` (npm start)',
};

export const backupCommand: CommandSpec = {
  name: 'backup',
  summary:
    'Copy what a restore needs of a data folder (every SQLite store, consistently, the secret key, the ports) into ' +
    'DIR, while the platform runs',
  usage: 'agentplane backup --to DIR [--data-dir DIR]',
  options: {
    to: { type: 'string', description: 'A new or empty folder to write the backup to' },
    'data-dir': dataDirOption,
  },
};

export const restoreCommand: CommandSpec = {
  name: 'restore',
  summary: 'Put a backup made by `agentplane backup` into a new data folder (the platform stopped)',
  usage: 'agentplane restore --from DIR [--data-dir DIR]',
  options: {
    from: { type: 'string', description: 'The folder `agentplane backup --to` wrote' },
    'data-dir': { ...dataDirOption, description: 'The data folder to restore into: new or empty' },
  },
};

function parse(spec: CommandSpec, argv: string[], folder: 'to' | 'from') {
  const flags = parseCommandArgs(spec, argv);
  if (flags.help) return undefined;
  const pick = optionPicker(spec, flags, process.env);
  const dir = pick(folder);
  if (!dir) throw new UsageError(`--${folder} DIR is required`);
  return { dir: path.resolve(dir), dataDir: path.resolve(pick('data-dir')!) };
}

export async function runBackup(argv: string[]): Promise<void> {
  const args = parse(backupCommand, argv, 'to');
  if (!args) {
    process.stdout.write(formatHelp(backupCommand));
    return;
  }
  await failing('backup', async () => {
    const m = await backup(args.dataDir, args.dir);
    const stores = m.files.filter((f) => f.kind === 'sqlite').length;
    process.stdout.write(
      `Backed up ${args.dataDir} to ${args.dir}: ${stores} SQLite store(s) and ${m.files.length - stores} file(s).\n` +
        'It holds the secret key with the store: keep it where only you can read it.\n',
    );
  });
}

export async function runRestore(argv: string[]): Promise<void> {
  const args = parse(restoreCommand, argv, 'from');
  if (!args) {
    process.stdout.write(formatHelp(restoreCommand));
    return;
  }
  await failing('restore', async () => {
    const m = restore(args.dir, args.dataDir);
    process.stdout.write(
      `Restored ${m.files.length} file(s) of the backup of ${m.createdAt} into ${args.dataDir}.\n` +
        `Start the platform on it (agentplane dev --data-dir ${args.dataDir}): it builds every serving revision ` +
        'again from its commit and serves it on its old URL.\n',
    );
  });
}

async function failing(name: string, work: () => Promise<void>): Promise<void> {
  try {
    await work();
  } catch (err) {
    if (!(err instanceof BackupError)) throw err;
    process.stderr.write(`agentplane ${name}: ${err.message}\n`);
    process.exitCode = 1;
  }
}
