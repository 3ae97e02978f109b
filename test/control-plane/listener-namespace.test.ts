// listener_config.k8s_namespace: only a namespace the listener offers (compute_config.k8s_namespaces). A listener
// offering none runs deployments where its data plane serves; another namespace there would never be reconciled
// (its operator neither watches it nor has rights in it), so the API refuses it with the field and the reason.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createControlPlane } from '../../src/control-plane/app.ts';
import { silentLogger } from '../../src/lib/logger.ts';
import { freshStores, type OpenedStore } from './helpers/stores.ts';

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

const post = async (url: string, body: unknown) => {
  const res = await app.inject({
    method: 'POST',
    url,
    headers: { 'x-api-key': ADMIN, 'x-tenant-id': 'ws-a' },
    payload: body as object,
  });
  return { status: res.statusCode, body: res.json() as Record<string, any> };
};
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
