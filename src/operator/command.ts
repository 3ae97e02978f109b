// `agentplane operator`: parse flags/env, reconcile until SIGTERM/SIGINT; exit non-zero on lost leadership so
// the pod restarts with a clean state.
import { formatHelp } from '../lib/cli-args.ts';
import { createLogger } from '../lib/logger.ts';
import { operatorCommand, parseOperatorConfig } from './config.ts';
import { startKubernetesOperator } from './kubernetes.ts';

export async function run(argv: string[]): Promise<void> {
  const config = parseOperatorConfig(argv, process.env);
  if (!config) {
    process.stdout.write(formatHelp(operatorCommand));
    return;
  }
  const logger = createLogger({ level: config.logLevel, name: 'operator' });
  const running = startKubernetesOperator(config, logger);
  const shutdown = (signal: string) => {
    logger.info({ signal }, 'shutting down');
    running.close().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
  if ((await running.done) === 'lost-leadership') process.exit(1);
}
