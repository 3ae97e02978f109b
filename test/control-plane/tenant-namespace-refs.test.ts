// With a namespace per tenant, a deployment's ServiceAccount and Secret references are checked where its pods
// will run (the tenant's namespace), not in the control plane's namespace: on the API-server double.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createControlPlane } from '../../src/control-plane/app.ts';
import { loadKubeConfig, openKubernetesPlatformState } from '../../src/state/kubernetes/index.ts';
import { createLogger } from '../../src/lib/logger.ts';
import { LABEL_TENANT, tenantNamespaceName } from '../../src/resources/index.ts';
import { githubBody } from './helpers/harness.ts';
import { startKube } from './helpers/kube.ts';

const KEY = 'tenant-namespace-refs-key-0123456789';
const PREFIX = 'agents-';
const TENANT = 'tenant-a';
const TENANT_NS = tenantNamespaceName(PREFIX, TENANT);
const logger = createLogger({ level: 'silent', name: 'test' });

let kube: Awaited<ReturnType<typeof startKube>>;
let store: ReturnType<typeof openKubernetesPlatformState>;
let app: FastifyInstance;

beforeAll(async () => {
  kube = await startKube({ namespaces: ['tenants', TENANT_NS] });
  const core = loadKubeConfig(kube.kubeconfig).makeApiClient(CoreV1Api);
  const labels = { [LABEL_TENANT]: TENANT };
  // The tenant's own objects, in its namespace (where its pods run)...
  await core.createNamespacedServiceAccount({ namespace: TENANT_NS, body: { metadata: { name: 'a-runner', labels } } });
  await core.createNamespacedSecret({
    namespace: TENANT_NS,
    body: { metadata: { name: 'a-db', labels }, stringData: { url: 'postgres://a' } },
  });
  // ...and one labelled for the tenant but only in the control plane's namespace, which its pods cannot mount.
  await core.createNamespacedSecret({
    namespace: 'tenants',
    body: { metadata: { name: 'cp-only', labels }, stringData: { url: 'postgres://x' } },
  });
  store = openKubernetesPlatformState({ kubeConfig: loadKubeConfig(kube.kubeconfig), namespace: 'tenants', logger });
  app = await createControlPlane({
    store,
    logger,
    bootstrapKeys: [{ key: KEY, tenants: ['*'] }],
    referenceNamespace: (tenant) => tenantNamespaceName(PREFIX, tenant),
  });
});
afterAll(async () => {
  await app?.close();
  await store?.close();
  await kube?.stop();
});

const post = (body: unknown) =>
  app.inject({
    method: 'POST',
    url: '/v2/deployments',
    headers: { 'x-api-key': KEY, 'x-tenant-id': TENANT },
    payload: body as object,
  });

describe('references with a namespace per tenant', () => {
  it("accepts the tenant's ServiceAccount and Secret from its own namespace", async () => {
    const res = await post(
      githubBody('own', {
        secret_references: [{ name: 'DB', secret_name: 'a-db', secret_key: 'url' }],
        source_config: { ...githubBody('own').source_config, resource_spec: { service_account_name: 'a-runner' } },
      }),
    );
    expect(res.statusCode, res.body).toBe(201);
  });

  it("refuses a Secret found only in the control plane's namespace, naming the tenant namespace", async () => {
    const res = await post(
      githubBody('cp', { secret_references: [{ name: 'DB', secret_name: 'cp-only', secret_key: 'url' }] }),
    );
    expect(res.statusCode, res.body).toBe(422);
    expect(res.body).toContain(`Secret \\"cp-only\\" does not exist in namespace ${TENANT_NS}`);
  });
});

describe('a tenant namespace the control plane cannot read yet (RBAC: the operator has not bound it there)', () => {
  it('refuses the references instead of failing the request', async () => {
    const rbacKube = await startKube({ rbac: true });
    const dir = mkdtempSync(join(tmpdir(), 'ap-refs-'));
    const kubeconfig = rbacKube.server.writeKubeconfig(
      join(dir, 'kubeconfig'),
      'tenants',
      rbacKube.server.serviceAccountToken('tenants', 'agentplane-control-plane'),
    );
    const s = openKubernetesPlatformState({ kubeConfig: loadKubeConfig(kubeconfig), namespace: 'tenants', logger });
    try {
      const refs = { serviceAccounts: ['b-runner'], secrets: ['b-db'] };
      expect(await s.checkTenantReferences!(tenantNamespaceName(PREFIX, 'tenant-b'), 'tenant-b', refs)).toEqual(
        expect.arrayContaining([
          { kind: 'ServiceAccount', name: 'b-runner' },
          { kind: 'Secret', name: 'b-db' },
        ]),
      );
    } finally {
      await s.close();
      await rbacKube.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
