// The operator's probe endpoints: /healthz answers while the process and its event loop run; /readyz once the
// replica has filled its caches and acts, or stands by for the Lease; /metrics, Prometheus text, when a registry is
// given. Plain node:http: three fixed answers need no framework.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export type OperatorState = 'starting' | 'standby' | 'acting' | 'stopped';

export type HealthServer = { port: number; close(): Promise<void> };

export async function startHealthServer(
  port: number,
  state: () => OperatorState,
  metrics?: Registry,
): Promise<HealthServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/metrics' && metrics) {
      metrics.metrics().then(
        (text) => res.writeHead(200, { 'content-type': metrics.contentType }).end(text),
        () => res.writeHead(500).end(),
      );
      return;
    }
    const current = state();
    const ok =
      path === '/healthz'
        ? current !== 'stopped'
        : path === '/readyz'
          ? current === 'acting' || current === 'standby'
          : undefined;
    if (ok === undefined) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' }).end(`${current}\n`);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '0.0.0.0', resolve);
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
