// agents.gateway on a real Kubernetes control plane: the Gateway API CRDs installed as a cluster admin would (the
// official standard channel, fetched through the Go module proxy), the chart installed with the option on, and the
// control plane and operator run as the chart's ServiceAccounts. The HTTPRoute the operator writes must pass the real
// kube-apiserver's validation (OpenAPI schema and CEL rules) under the chart's RBAC, carry the deployment's host to
// its Service, leave no Ingress, and go with the deployment (the real garbage collector, by owner reference).
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubectl, waitCrdsEstablished } from '../support/helm/index.ts';
import { gatewayApiCrds, HTTPROUTE_CRD } from '../support/gateway-api.ts';
import { startKubeControlPlane, type KubeControlPlane } from '../support/kube-control-plane.ts';
import { BINARIES_ENV } from './global-setup.ts';
import { clusterBed, helmInstall, restAs, restrictedNamespace, until, type Json } from './helpers.ts';

const binaries = process.env[BINARIES_ENV];
const crds = binaries ? gatewayApiCrds() : undefined;
const NS = 'agentplane';
const TENANT = 'team-a';
const ADMIN_KEY = 'kube-gateway-admin-key-7f3a9c0e12';
const IMAGE = 'ghcr.io/agentplane/example-agent';
const BASE_DOMAIN = 'agents.example.test';
const PARENT = { name: 'agents', namespace: 'gateways', sectionName: 'https' };

describe.skipIf(!binaries || !crds)('agents.gateway on a real Kubernetes control plane', () => {
  let kube: KubeControlPlane;
  let base = '';
  const bed = clusterBed(
    () => kube,
    () => kube.dir,
  );
  const { get, logOf } = bed;
  const call = restAs(() => base, ADMIN_KEY, TENANT);

  beforeAll(async () => {
    kube = await startKubeControlPlane({ binaries: binaries! });
    const admin = kube.admin.kubeconfigPath;
    // Server-side: the CRD is too large for client-side apply's last-applied annotation.
    await kubectl(['apply', '--server-side', '-f', join(crds!, HTTPROUTE_CRD)], admin);
    await waitCrdsEstablished(['httproutes.gateway.networking.k8s.io'], admin);
    await restrictedNamespace(admin, NS);
    helmInstall(admin, NS, {
      'agents.ingress.baseDomain': BASE_DOMAIN,
      'agents.gateway': { enabled: true, parentRefs: [PARENT], annotations: { 'example.com/team': 'platform' } },
    });
    base = await bed.startControlPlane(NS, ADMIN_KEY);
    await bed.startOperator(NS, 'agentplane-operator-0', { name: 'agentplane-operator' });
  });

  afterAll(async () => {
    if (kube) await bed.stopAll();
    await kube?.stop();
  });

  it('the operator writes an HTTPRoute the real API server accepts, and no Ingress; deleting the deployment removes it', async () => {
    const created = await call('POST', '/v2/deployments', {
      name: 'kube-gateway-agent',
      source: 'external_docker',
      source_config: { deployment_type: 'dev' },
      source_revision_config: { image_uri: `${IMAGE}:0.1.0` },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = String(created.body.id);
    const name = `ag-${id}`;
    const routePath = `/apis/gateway.networking.k8s.io/v1/namespaces/${NS}/httproutes/${name}`;
    const route = await until('the HTTPRoute', () => get(routePath), 90_000).catch((err) => {
      throw new Error(`${String(err)}\n${logOf('agentplane-operator')}`);
    });
    expect(route.spec.hostnames).toEqual([`${name}.${BASE_DOMAIN}`]);
    // As the real server stored it, its defaults included (a Gateway parent, an exact-match rule on the Service).
    expect(route.spec.parentRefs).toEqual([{ group: 'gateway.networking.k8s.io', kind: 'Gateway', ...PARENT }]);
    expect(route.spec.rules[0].matches).toEqual([{ path: { type: 'PathPrefix', value: '/' } }]);
    expect(route.spec.rules[0].backendRefs).toEqual([
      expect.objectContaining({ group: '', kind: 'Service', name, port: 80 }),
    ]);
    expect(route.metadata.annotations['example.com/team']).toBe('platform');
    expect(route.metadata.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'AgentDeployment', name, controller: true }),
    ]);
    const managers = (route.metadata.managedFields as Json[]).map((m) => `${m.manager}/${m.operation}`);
    expect(managers).toContain('agentplane-operator/Apply');
    expect(await get(`/apis/networking.k8s.io/v1/namespaces/${NS}/ingresses/${name}`)).toBeUndefined();
    await until('the deployment URL on the route host', async () =>
      (await call('GET', `/v2/deployments/${id}`)).body.url === `https://${name}.${BASE_DOMAIN}` ? true : undefined,
    );

    expect((await call('DELETE', `/v2/deployments/${id}`)).status).toBe(204);
    await until('the HTTPRoute gone', async () => ((await get(routePath)) ? undefined : true), 90_000);
  });
});
