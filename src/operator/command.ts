// `agentplane operator`: parse flags/env, reconcile until SIGTERM/SIGINT; exit non-zero on lost leadership (so
// the pod restarts with a clean state) and on CRDs older than this operator needs.
import { formatHelp } from '../lib/cli-args.ts';
import { createLogger } from '../lib/logger.ts';
import { parseOperatorConfig } from './config.ts';
import { operatorCommand } from './flags.ts';
import { startKubernetesOperator } from './kubernetes.ts';
import { closeOnSignals } from '../lib/shutdown.ts';

export async function run(argv: string[]): Promise<void> {
  const config = parseOperatorConfig(argv, process.env);
  if (!config) {
    process.stdout.write(formatHelp(operatorCommand));
    return;
  }
  const logger = createLogger({ level: config.logLevel, name: 'operator' });
  const running = startKubernetesOperator(config, logger);
  closeOnSignals(logger, () => running.close());
  if ((await running.done) !== 'closed') process.exit(1);
}
