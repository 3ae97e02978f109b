// `agentplane data-key rotate`: gives deployments of an embedded store (`agentplane dev`, a listener's local data
// plane) a new data key, the key their agent data is encrypted with at rest (data-keys.ts). Safe while the platform
// runs: an agent server takes its keys when it starts, and at its next start it reseals its data under the new key.
import path from 'node:path';
import { formatHelp, optionPicker, parseCommandArgs, UsageError, type CommandSpec } from '../lib/cli-args.ts';
import { storeOptions } from '../control-plane/config.ts';
import { openEmbeddedPlatformState } from '../state/embedded/index.ts';
import { parseKey } from '../state/embedded/secret-box.ts';
import { rotateDataKeys } from './data-keys.ts';

export const dataKeyCommand: CommandSpec = {
  name: 'data-key',
  summary:
    "Rotate deployments' data keys (encryption at rest of their threads, checkpoints, store items and run inputs); " +
    'each agent server reseals its data under the new key at its next start',
  usage: 'agentplane data-key rotate [--deployment NAME[,NAME...]] [--data-dir DIR] [--json]',
  options: {
    deployment: {
      type: 'string',
      description: 'Comma-separated deployments (resource name or deployment id) to rotate (default: every deployment)',
    },
    'data-dir': storeOptions['data-dir']!,
    'secret-key': storeOptions['secret-key']!,
    json: { type: 'boolean', description: 'Print the rotated deployments as JSON' },
  },
};

export async function run(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  if (!sub || sub === '--help' || sub === '-h') {
    process.stdout.write(formatHelp(dataKeyCommand));
    return;
  }
  if (sub !== 'rotate') throw new UsageError(`unknown subcommand "${sub}" (expected rotate)`);
  const flags = parseCommandArgs(dataKeyCommand, rest);
  if (flags.help) {
    process.stdout.write(formatHelp(dataKeyCommand));
    return;
  }
  const pick = optionPicker(dataKeyCommand, flags, process.env);
  const secretKey = pick('secret-key');
  let key: Buffer | undefined;
  try {
    key = secretKey === undefined ? undefined : parseKey(secretKey, '--secret-key (AGENTPLANE_SECRET_KEY)');
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const store = openEmbeddedPlatformState({
    dataDir: path.resolve(process.cwd(), pick('data-dir')!),
    ...(key ? { secretKey: key } : {}),
  });
  try {
    const wanted = (pick('deployment') ?? '')
      .split(',')
      .map((w) => w.trim())
      .filter(Boolean);
    const all = (await store.list('AgentDeployment', store.namespace)).items;
    const chosen = wanted.length
      ? wanted.map((w) => {
          const dep = all.find((d) => d.metadata.name === w || d.spec.deploymentId === w);
          if (!dep) throw new UsageError(`--deployment ${w}: no such deployment in this store`);
          return dep;
        })
      : all;
    const rotated: string[] = [];
    for (const dep of chosen) {
      if (await rotateDataKeys(store, store.namespace, dep.metadata.name)) rotated.push(dep.metadata.name);
    }
    if (flags.json) {
      process.stdout.write(`${JSON.stringify({ rotated })}\n`);
      return;
    }
    process.stdout.write(
      rotated.length
        ? `New data key for ${rotated.join(', ')}: each agent server reseals its data under it at its next start ` +
            '(a redeploy, or a restart of the platform); the earlier keys stay as previous keys.\n'
        : 'No deployment has a data key yet (one is made at its first start).\n',
    );
  } finally {
    await store.close();
  }
}
