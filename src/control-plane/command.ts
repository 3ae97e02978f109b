// `agentplane control-plane`: parse flags/env, start, stop cleanly on SIGTERM/SIGINT.
import { formatHelp } from '../lib/cli-args.ts';
import { createLogger } from '../lib/logger.ts';
import { closeOnSignals } from '../lib/shutdown.ts';
import { controlPlaneCommand, parseControlPlaneConfig } from './config.ts';
import { startControlPlane } from './server.ts';

export async function run(argv: string[]): Promise<void> {
  const config = parseControlPlaneConfig(argv, process.env);
  if (!config) {
    process.stdout.write(formatHelp(controlPlaneCommand));
    return;
  }
  const logger = createLogger({ level: config.logLevel, name: 'control-plane' });
  let server: Awaited<ReturnType<typeof startControlPlane>>;
  try {
    server = await startControlPlane(config, logger);
  } catch (err) {
    // Startup problems (unreadable kubeconfig, missing CRDs, port in use) are the operator's to fix: one clear line.
    logger.fatal({ err: { message: (err as Error).message } }, 'control plane failed to start');
    process.stderr.write(`agentplane control-plane: ${(err as Error).message}\n`);
    process.exitCode = 1;
    return;
  }
  const running = server;
  closeOnSignals(logger, () => running.close());
}
