// One process, one port: the control plane API, and under /deployments/<id>/ each deployment's agent server.
// Two fastify apps behind one node:http server, dispatched by path, so the control plane's auth hooks never see
// agent traffic and the proxy never sees API keys.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from '../lib/logger.ts';
import { openEmbeddedStore } from '../control-plane/store/embedded/index.ts';
import type { ControlPlaneStore } from '../control-plane/store/types.ts';
import { createOperator, type Operator } from '../operator/operator.ts';
import { LocalRuntime } from '../operator/runtimes/local/index.ts';
import { deploymentProxy, DEPLOYMENTS_PREFIX } from '../operator/runtimes/local/proxy.ts';
import { storeLogSink } from '../operator/sources.ts';
import { buildControlPlane } from './control-plane.ts';
import type { DevConfig } from './config.ts';

export type DevServer = {
  /** http://host:port */
  url: string;
  store: ControlPlaneStore;
  runtime: LocalRuntime;
  close(): Promise<void>;
};

export async function startDev(config: DevConfig, logger: Logger): Promise<DevServer> {
  const store = openEmbeddedStore({ dataDir: join(config.dataDir, 'control-plane') });
  const runtime = new LocalRuntime({
    dataDir: join(config.dataDir, 'runtime'),
    logs: storeLogSink(store),
    logger: logger.child({ component: 'local-runtime' }),
    databaseUrl: config.databaseUrl,
    healthTimeoutMs: config.healthTimeoutSecs * 1000,
  });
  // No child may outlive this process, whatever way it ends.
  const killChildren = () => runtime.killAllNow();
  process.once('exit', killChildren);

  const api: FastifyInstance = await buildControlPlane(store, logger, config.bootstrapKey);
  // Agent traffic is logged by the agent servers; the proxy reports only its own problems.
  const proxy = Fastify({ loggerInstance: logger.child({ component: 'proxy' }, { level: 'warn' }) as FastifyBaseLogger });
  await deploymentProxy(proxy, { resolve: (id) => runtime.backend(id) });
  await Promise.all([api.ready(), proxy.ready()]);

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const target = req.url?.startsWith(`${DEPLOYMENTS_PREFIX}/`) ? proxy : api;
    target.routing(req, res);
  });
  // Long joins and streams pass through; keep-alive sockets of idle clients must not block shutdown.
  server.requestTimeout = 0;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const { port } = server.address() as { port: number };
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  const url = `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`;
  runtime.setBaseUrl(url);

  const operator: Operator = createOperator({ store, runtime, logger });
  await operator.start();

  let closing: Promise<void> | undefined;
  return {
    url,
    store,
    runtime,
    close() {
      closing ??= (async () => {
        await operator.stop();
        await runtime.shutdown();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
        await Promise.all([api.close(), proxy.close()]);
        await store.close();
        process.removeListener('exit', killChildren);
      })();
      return closing;
    },
  };
}
