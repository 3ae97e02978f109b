// `agentplane agent-server`: parse flags/env, start, stop cleanly on SIGTERM/SIGINT.
import { createLogger } from '../lib/logger.ts';
import { formatHelp } from '../lib/cli-args.ts';
import { agentServerCommand, parseAgentServerConfig } from './config.ts';
import { startAgentServer } from './server.ts';

export async function run(argv: string[]): Promise<void> {
  const config = parseAgentServerConfig(argv, process.env);
  if (!config) {
    process.stdout.write(formatHelp(agentServerCommand));
    return;
  }
  const logger = createLogger({ level: config.logLevel, name: 'agent-server' });
  const server = await startAgentServer(config, logger);
  const shutdown = (signal: string) => {
    logger.info({ signal }, 'shutting down');
    server.close().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
}
