// A stand-in for the control plane's REST API that the CLI's tests point it at: it answers the few routes a test
// names from a table and records every request (method, path, body), so a test can tell what the CLI sent, or that
// it sent nothing. Routes it does not know answer 503, which the CLI reports as an API error.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Recorded {
  method: string;
  path: string;
  body: string;
}

export interface FakeControlPlane {
  url: string;
  requests: Recorded[];
  close(): Promise<void>;
}

/** `routes`: "GET /v2/deployments" (path without the query) -> the JSON answer. */
export async function fakeControlPlane(routes: Record<string, unknown> = {}): Promise<FakeControlPlane> {
  const requests: Recorded[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const path = (req.url ?? '').split('?')[0]!;
      requests.push({ method: req.method ?? '', path, body });
      const answer = routes[`${req.method} ${path}`];
      res.writeHead(answer === undefined ? 503 : 200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer ?? { detail: 'not part of this test' }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
