// agents.gateway: the HTTPRoute the operator writes instead of an Ingress, checked against the official Gateway API
// CRD (as the API-server double admits it), the Gateway's refusal read back from its status, host ownership across
// Ingresses and routes, the operator's flags and the chart's values and RBAC for it. The operator's whole flow under
// the chart's RBAC is in chart-flows.test.ts; the real kube-apiserver's proof in test/kube/gateway.test.ts.
import type { V1Ingress } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { parseOperatorConfig } from '../../../../src/operator/config.ts';
import { kubernetesRuntimeConfigSchema } from '../../../../src/operator/runtimes/kubernetes/config.ts';
import { httpRouteRefusal } from '../../../../src/operator/runtimes/kubernetes/http-route.ts';
import type { Target } from '../../../../src/operator/runtimes/kubernetes/labels.ts';
import { hostOwner } from '../../../../src/operator/runtimes/kubernetes/policy.ts';
import {
  deploymentUrl,
  makeHttpRoute,
  makeIngress,
  makeService,
} from '../../../../src/operator/runtimes/kubernetes/routing.ts';
import { gatewayApiCrds, HTTPROUTE_CRD } from '../../../support/gateway-api.ts';
import { renderChart } from '../../../support/helm/index.ts';
import { KindRegistry, registerCrds } from '../../../support/kube-apiserver/registry.ts';
import { deploymentTarget } from '../../../support/kubernetes/target.ts';

type Json = Record<string, any>;

const parentRefs = [{ name: 'agents', namespace: 'gateways', sectionName: 'https' }];
const config = kubernetesRuntimeConfigSchema.parse({
  registry: 'registry.example.com/agents/',
  gitImage: 'ghcr.io/agentplane/agentplane:0.1.0',
  baseImage: 'ghcr.io/agentplane/agentplane:0.1.0',
  ingress: { baseDomain: 'agents.example.com' },
  gateway: { parentRefs, annotations: { 'example.com/team': 'platform' } },
});
const id = '0b6c8f1e-5d0a-4f7b-9d7e-2a7c1f0e9b11';
const target = deploymentTarget(id, 'team-a', 'tenant-1', 'uid-1');
const host = `ag-${id}.agents.example.com`;

const crds = gatewayApiCrds();
const httpRouteKind = () => {
  const registry = new KindRegistry();
  registerCrds(registry, crds!, { files: [HTTPROUTE_CRD], otherCel: 'skip' });
  return registry.lookup('gateway.networking.k8s.io', 'v1', 'httproutes')!;
};

describe('makeHttpRoute', () => {
  const route = makeHttpRoute(target, host, config);

  it('serves what the Ingress would: the same host and paths, to the agent Service port, through the Gateways', () => {
    const ingress = makeIngress(target, host, config);
    const service = makeService(target);
    expect(route.metadata).toMatchObject({ name: ingress.metadata!.name, namespace: 'team-a' });
    expect(route.metadata.ownerReferences).toEqual([target.owner]);
    expect(route.metadata.labels).toEqual(ingress.metadata!.labels);
    expect(route.metadata.annotations).toEqual({ 'example.com/team': 'platform' });
    expect(route.spec.hostnames).toEqual([ingress.spec!.rules![0]!.host]);
    expect(route.spec.rules).toEqual([
      {
        matches: [{ path: { type: 'PathPrefix', value: '/' } }],
        backendRefs: [{ name: service.metadata!.name, port: service.spec!.ports![0]!.port }],
      },
    ]);
    expect(route.spec.parentRefs).toEqual([{ group: 'gateway.networking.k8s.io', kind: 'Gateway', ...parentRefs[0] }]);
    // TLS ends at the Gateway's listener: the URL is https unless told otherwise.
    expect(deploymentUrl(target, host, config)).toBe(`https://${host}`);
    const plain = kubernetesRuntimeConfigSchema.parse({ ...config, gateway: { parentRefs, https: false } });
    expect(deploymentUrl(target, host, plain)).toBe(`http://${host}`);
  });

  it.skipIf(!crds)('is a valid gateway.networking.k8s.io/v1 HTTPRoute by the official CRD', () => {
    const kind = httpRouteKind();
    const admitted = kind.admit(structuredClone(route) as Json);
    expect(admitted).toMatchObject({ unknown: [] });
    // The check can fail: what the schema refuses is refused (an upper-case host, a port out of range).
    const bad = structuredClone(route) as Json;
    bad.spec.hostnames = ['Bad_Host.example.com'];
    bad.spec.rules[0].backendRefs[0].port = 70000;
    const refused = kind.admit(bad) as { causes?: { field: string }[] };
    expect(refused.causes?.map((c) => c.field)).toEqual(
      expect.arrayContaining(['spec.hostnames.0', 'spec.rules.0.backendRefs.0.port']),
    );
  });
});

describe('httpRouteRefusal', () => {
  const parent = { name: 'agents', namespace: 'gateways' };
  const cond = (type: string, status: string, reason = 'R', message = 'm') => ({ type, status, reason, message });
  it.each([
    ['no status yet', undefined, undefined],
    [
      'accepted and resolved',
      [{ parentRef: parent, conditions: [cond('Accepted', 'True'), cond('ResolvedRefs', 'True')] }],
      undefined,
    ],
    [
      'not allowed by the listener',
      [
        {
          parentRef: parent,
          conditions: [cond('Accepted', 'False', 'NotAllowedByListeners', 'namespace not allowed')],
        },
      ],
      'Gateway gateways/agents refuses the HTTPRoute (Accepted=False, NotAllowedByListeners): namespace not allowed',
    ],
    [
      'a backend it cannot resolve, on the second parent',
      [
        { parentRef: { name: 'other' }, conditions: [cond('Accepted', 'True')] },
        { parentRef: parent, conditions: [cond('ResolvedRefs', 'False', 'BackendNotFound', 'no Service')] },
      ],
      'Gateway gateways/agents refuses the HTTPRoute (ResolvedRefs=False, BackendNotFound): no Service',
    ],
  ])('%s', (_title, parents, expected) => {
    expect(httpRouteRefusal(parents ? { status: { parents } } : {})).toBe(expected);
  });
});

describe('hostOwner with HTTPRoutes', () => {
  it("counts another deployment's route as well as its Ingress, never the deployment's own", () => {
    const other: Target = { ...target, name: 'ag-other' };
    const theirRoute = makeHttpRoute(other, 'taken.agents.example.com', config);
    const theirIngress: V1Ingress = makeIngress(other, 'old.agents.example.com', config);
    const mine = makeHttpRoute(target, host, config);
    const all = [theirIngress, theirRoute, mine];
    expect(hostOwner('taken.agents.example.com', all, target)).toBe('team-a/ag-other');
    expect(hostOwner('old.agents.example.com', all, target)).toBe('team-a/ag-other');
    expect(hostOwner(host, all, target)).toBeUndefined();
  });
});

describe('operator flags for a Gateway', () => {
  const base = ['--namespace', 'agents', '--registry', 'registry.example.com/a', '--base-image', 'img:1'];
  it('parses the parent Gateways and annotations; none: Ingresses as before', () => {
    const on = parseOperatorConfig(
      [...base, '--gateway-parent-refs', JSON.stringify(parentRefs), '--gateway-annotations', '{"a.io/b":"c"}'],
      {},
    )!;
    expect(on.runtime.gateway).toEqual({ parentRefs, annotations: { 'a.io/b': 'c' }, https: true });
    expect(parseOperatorConfig(base, {})!.runtime.gateway).toBeUndefined();
  });

  it.each([
    ['[]', /--gateway-parent-refs: at least one parent Gateway/],
    ['[{"name":"Agents"}]', /--gateway-parent-refs.*must be a Kubernetes object name/],
    ['[{"name":"a","port":443}]', /--gateway-parent-refs/],
    ['{oops', /--gateway-parent-refs: not JSON/],
  ])('refuses --gateway-parent-refs %s, naming the flag', (value, message) => {
    expect(() => parseOperatorConfig([...base, '--gateway-parent-refs', value], {})).toThrow(message);
  });
});

describe('chart: agents.gateway', () => {
  const gateway = { enabled: true, parentRefs, annotations: { 'example.com/team': 'platform' } };
  const routeRules = (docs: Json[]) =>
    docs
      .filter((d) => d.kind === 'Role' || d.kind === 'ClusterRole')
      .flatMap((d) => (d.rules as Json[]).map((r): Json => ({ role: d.metadata.name as string, ...r })))
      .filter((r) => (r.resources as string[]).includes('httproutes'));
  const operatorEnv = (docs: Json[]) => {
    const d = docs.find((x) => x.kind === 'Deployment' && x.metadata.name.endsWith('-operator'))!;
    return Object.fromEntries((d.spec.template.spec.containers[0].env as Json[]).map((e) => [e.name, e.value]));
  };

  it('off (the default): no Gateway settings, and only the rights to remove the routes made while it was on', () => {
    const route = { apiGroups: ['gateway.networking.k8s.io'], resources: ['httproutes'] };
    const docs = renderChart({ values: {} });
    expect(operatorEnv(docs).AGENTPLANE_GATEWAY_PARENT_REFS).toBeUndefined();
    // Never create, patch or update: switched off, the operator only deletes its own routes (by label).
    expect(routeRules(docs)).toEqual([{ role: 'agentplane-operator', ...route, verbs: ['get', 'delete'] }]);
    const tenants = routeRules(renderChart({ values: { 'agents.namespacePerTenant': true } }));
    expect(tenants.map((r) => [r.role, r.verbs]).sort()).toEqual([
      ['agentplane-operator', ['get', 'delete']],
      // A deleted deployment's cleanup lists what it left in its tenant namespace.
      ['agentplane-operator-tenant', ['get', 'list', 'delete']],
    ]);
  });

  it('on: the operator gets its parent Gateways and exactly the rights it uses, in every namespace it writes', () => {
    const docs = renderChart({ values: { 'agents.gateway': gateway } });
    const env = operatorEnv(docs);
    expect(JSON.parse(env.AGENTPLANE_GATEWAY_PARENT_REFS)).toEqual(parentRefs);
    expect(JSON.parse(env.AGENTPLANE_GATEWAY_ANNOTATIONS)).toEqual(gateway.annotations);
    expect(env.AGENTPLANE_GATEWAY_HTTPS).toBe('true');
    // watch: the operator reads the routes from a watch-fed cache.
    const verbs = ['get', 'delete', 'list', 'watch', 'create', 'patch', 'update'];
    expect(routeRules(docs)).toEqual([
      { role: 'agentplane-operator', apiGroups: ['gateway.networking.k8s.io'], resources: ['httproutes'], verbs },
    ]);
    const tenants = routeRules(
      renderChart({ values: { 'agents.gateway': gateway, 'agents.namespacePerTenant': true } }),
    );
    // Its own namespace, every tenant namespace (bound there per namespace), and list across them for host checks.
    expect(tenants.map((r) => [r.role, r.verbs]).sort()).toEqual([
      ['agentplane-operator', verbs],
      ['agentplane-operator-namespaces', ['list', 'watch']],
      ['agentplane-operator-tenant', ['get', 'list', 'delete', 'create', 'patch', 'update']],
    ]);
  });

  it('refuses enabled without a parent Gateway, and parentRefs fields the Gateway API has no use for', () => {
    expect(() => renderChart({ values: { 'agents.gateway': { enabled: true } } })).toThrow(/parentRefs/);
    expect(() =>
      renderChart({ values: { 'agents.gateway': { enabled: true, parentRefs: [{ name: 'a', port: 443 }] } } }),
    ).toThrow(/port/);
  });
});
