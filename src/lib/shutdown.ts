// Long-running commands stop the same way: on SIGTERM or SIGINT close what they started, then exit 0 (1 if
// closing failed). A second signal while closing is left to Node's default handling.
import type { Logger } from './logger.ts';

export function closeOnSignals(logger: Logger, close: () => Promise<unknown>): void {
  const shutdown = (signal: string) => {
    logger.info({ signal }, 'shutting down');
    close().then(
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
