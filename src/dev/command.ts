// `agentplane dev` (= `npm start`): the whole platform on one machine, no Kubernetes.
import { join } from 'node:path';
import { createLogger } from '../lib/logger.ts';
import { formatHelp } from '../lib/cli-args.ts';
import { devCommand, parseDevConfig } from './config.ts';
import { startDev } from './server.ts';
import { closeOnSignals } from '../lib/shutdown.ts';

export async function run(argv: string[]): Promise<void> {
  const config = parseDevConfig(argv, process.env);
  if (!config) {
    process.stdout.write(formatHelp(devCommand));
    return;
  }
  const logger = createLogger({ level: config.logLevel, name: 'dev' });
  const dev = await startDev(config, logger);
  const storeDir = join(config.dataDir, 'control-plane');
  process.stdout.write(
    [
      '',
      `agentplane dev is running`,
      `  web console         ${dev.url}/`,
      `  control plane API   ${dev.url}/v2/deployments   (also under ${dev.url}/api-host)`,
      `  API docs            ${dev.url}/docs`,
      `  deployment URLs     ${dev.agentPorts}, one origin per deployment (the url of GET /v2/deployments/<id>)`,
      `  data                ${config.dataDir}`,
      `  isolation           ${dev.isolation}`,
      `  local repo_url from ${config.allowLocalRepos.join(', ') || 'nowhere'}`,
      '',
      ...keyAdvice(config.bootstrapKey !== undefined, storeDir),
      '',
    ].join('\n'),
  );
  closeOnSignals(logger, () => dev.close());
}

/** How to get a key: the bootstrap key is named as set when it is, and the command that makes workspace keys. */
function keyAdvice(bootstrapSet: boolean, storeDir: string): string[] {
  const create = `  npx agentplane api-key create --tenant <workspace id> --data-dir ${storeDir}`;
  const use =
    'X-Api-Key: <key> and X-Tenant-Id: <workspace id>. Agents answer only keys of their own workspace, never the ' +
    'bootstrap key.';
  if (bootstrapSet) {
    return [
      'The bootstrap key (AGENTPLANE_BOOTSTRAP_API_KEY, as set) signs in to the web console and calls the API for any',
      'workspace. Keys of one workspace (printed once), for agents and CI:',
      create,
      `Call the API with the headers ${use}`,
    ];
  }
  return [
    'Create an API key (printed once) in another terminal:',
    create,
    'or start with AGENTPLANE_BOOTSTRAP_API_KEY=<key of 16+ characters> to use <key> for any workspace;',
    `then sign in to the web console with both, or call the API with the headers ${use}`,
  ];
}
