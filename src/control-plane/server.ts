// Wires store and API together, listens, and shuts down gracefully.
import type { FastifyInstance } from 'fastify';
import type { Logger } from '../lib/logger.ts';
import { createControlPlane } from './app.ts';
import type { ControlPlaneConfig } from './config.ts';
import { openControlPlaneStore } from './store/index.ts';
import type { ControlPlaneStore } from './store/types.ts';

export interface RunningControlPlane {
  app: FastifyInstance;
  store: ControlPlaneStore;
  url: string;
  close(): Promise<void>;
}

export async function startControlPlane(config: ControlPlaneConfig, logger: Logger): Promise<RunningControlPlane> {
  const store = await openControlPlaneStore(config, logger);
  const app = await createControlPlane({ store, logger, bootstrapKeys: config.bootstrapKeys });
  const url = await app.listen({ host: config.host, port: config.port });
  logger.info({ url, store: config.store, namespace: store.namespace }, 'control plane listening');
  let closing: Promise<void> | null = null;
  return {
    app,
    store,
    url,
    close() {
      closing ??= (async () => {
        await app.close();
        await store.close();
      })();
      return closing;
    },
  };
}
