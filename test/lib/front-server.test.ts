// The server dev and the listener put in front of their fastify apps keeps fastify's keep-alive and sets timeouts.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, expect, it } from 'vitest';
import { createFrontServer, FRONT_SERVER_TIMEOUTS } from '../../src/lib/http.ts';

const server = createFrontServer((_req, res) => res.end('ok'));
afterAll(() => new Promise<void>((r) => server.close(() => r())));

it('announces a 72 s keep-alive (not Node’s 5 s) and bounds only how long a request may take to arrive', async () => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as AddressInfo;
  const agent = new http.Agent({ keepAlive: true });
  const res = await new Promise<http.IncomingMessage>((resolve, reject) =>
    http.get({ host: '127.0.0.1', port, path: '/', agent }, resolve).on('error', reject),
  );
  res.resume();
  expect(res.headers['keep-alive']).toBe('timeout=72');
  // Slow senders are cut (test/operator/runtimes/local/local-proxy.test.ts attacks this); long answers are not.
  expect(server.headersTimeout).toBe(FRONT_SERVER_TIMEOUTS.headersTimeoutMs);
  expect(server.requestTimeout).toBe(FRONT_SERVER_TIMEOUTS.requestTimeoutMs);
  agent.destroy();
});
