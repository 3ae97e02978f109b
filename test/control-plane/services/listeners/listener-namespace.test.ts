// listener_config.k8s_namespace: only a namespace the listener offers (compute_config.k8s_namespaces). A listener
// offering none runs deployments where its data plane serves; another namespace there would never be reconciled
// (its operator neither watches it nor has rights in it), so the API refuses it with the field and the reason.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createControlPlane } from '../../../../src/control-plane/app.ts';
import { silentLogger } from '../../../../src/lib/logger.ts';
import { freshStores, type OpenedStore } from '../../helpers/stores.ts';

const ADMIN = 'listener-namespace-key-0123456789';
const FIELD = 'body.source_config.listener_config.k8s_namespace';

let opened: OpenedStore;
let app: FastifyInstance;
beforeAll(async () => {
  opened = await freshStores('ap-cp-listener-ns-').embedded();
  app = await createControlPlane({
    store: opened.store,
    logger: silentLogger(),
    bootstrapKeys: [{ key: ADMIN, tenants: ['*'] }],
    consoleDir: false,
  });
});
afterAll(async () => {
  await app?.close();
  await opened?.close();
});

const send = async (method: 'POST' | 'PATCH' | 'GET', url: string, body?: unknown) => {
  const res = await app.inject({
    method,
    url,
    headers: { 'x-api-key': ADMIN, 'x-tenant-id': 'ws-a' },
    ...(body ? { payload: body as object } : {}),
  });
  return { status: res.statusCode, body: res.json() as Record<string, any> };
};
const post = (url: string, body: unknown) => send('POST', url, body);
const listener = async (computeId: string, namespaces: string[]) =>
  String(
    (
      await post('/v2/listeners', {
        compute_type: 'k8s',
        compute_id: computeId,
        compute_config: { k8s_namespaces: namespaces },
      })
    ).body.id,
  );
const deployment = (name: string, listenerId: string, namespace?: string) =>
  post('/v2/deployments', {
    name,
    source: 'external_docker',
    source_config: {
      deployment_type: 'dev',
      listener_id: listenerId,
      ...(namespace ? { listener_config: { k8s_namespace: namespace } } : {}),
    },
    source_revision_config: { image_uri: 'example/agent:1' },
    secrets: [],
  });
const issue = (body: Record<string, any>) =>
  (body.detail as { loc: string[]; msg: string }[]).find((d) => d.loc.join('.') === FIELD);

describe('listener_config.k8s_namespace', () => {
  it('is refused on a listener that offers no namespaces, and the deployment runs where the listener serves without it', async () => {
    const lid = await listener('cluster-none', []);
    const res = await deployment('elsewhere', lid, 'team-b');
    expect(res.status).toBe(422);
    expect(issue(res.body)?.msg).toMatch(/offers no namespaces .*omit k8s_namespace/);
    expect((await deployment('default-ns', lid)).status).toBe(201);
  });

  it('names the namespaces the listener offers when another is asked for', async () => {
    const lid = await listener('cluster-two', ['agents']);
    const res = await deployment('wrong', lid, 'kube-system');
    expect(res.status).toBe(422);
    expect(issue(res.body)?.msg).toBe("must be one of the listener's k8s_namespaces: agents");
    expect((await deployment('right', lid, 'agents')).status).toBe(201);
  });
});

// Issue 56: a second namespace used to be stored and then never served (no listener or operator of the data plane
// watches it nor has rights in it), so deployments placed there stayed waiting for ever. Now refused up front.
describe('compute_config.k8s_namespaces with a second namespace', () => {
  const NAMESPACES = 'body.compute_config.k8s_namespaces';
  const problem = (body: Record<string, any>) =>
    (body.detail as { loc: string[]; msg: string }[]).find((d) => d.loc.join('.') === NAMESPACES)?.msg;

  it('is refused when the listener is registered, and nothing is stored', async () => {
    const res = await post('/v2/listeners', {
      compute_type: 'k8s',
      compute_id: 'cluster-both',
      compute_config: { k8s_namespaces: ['agents', 'team-b'] },
    });
    expect(res.status).toBe(422);
    expect(problem(res.body)).toMatch(/serves one namespace.*list at most one/);
    const listed = (await send('GET', '/v2/listeners')).body.resources as { compute_id: string }[];
    expect(listed.map((l) => l.compute_id)).not.toContain('cluster-both');
  });

  it('is refused when added later, and the listener keeps the one it serves', async () => {
    const lid = await listener('cluster-later', ['agents']);
    const res = await send('PATCH', `/v2/listeners/${lid}`, {
      compute_config: { k8s_namespaces: ['agents', 'team-b'] },
    });
    expect(res.status).toBe(422);
    expect(problem(res.body)).toMatch(/serves one namespace/);
    expect((await send('GET', `/v2/listeners/${lid}`)).body.compute_config).toEqual({ k8s_namespaces: ['agents'] });
    // So a deployment can never be placed in the namespace nothing serves.
    expect((await deployment('never-served', lid, 'team-b')).status).toBe(422);
  });
});
