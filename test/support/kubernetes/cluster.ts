// A Kubernetes API-server double with the CRDs and the built-in kinds, and a KubeConfig for it. With `rbac` the
// double enforces RBAC: the chart is rendered with the real helm and its ServiceAccounts, Roles and bindings are
// installed, and `as(account)` gives that ServiceAccount's kubeconfig (the test's own is the administrator's).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { loadKubeConfig } from '../../../src/lib/kube-config.ts';
import { KubeApiServer, type KubeApiServerOptions } from '../kube-apiserver/server.ts';
import { registerBuiltinKinds } from '../kube-apiserver/builtins.ts';
import { seedCrdObjects } from '../kube-apiserver/crd-objects.ts';
import { registerCrds } from '../kube-apiserver/registry.ts';
import { HTTPROUTE_CRD } from '../gateway-api.ts';
import { renderChart } from '../helm/index.ts';

type Json = Record<string, any>;
export type Identity = { kubeConfig: KubeConfig; kubeconfigPath: string };
export type TestCluster = Identity & {
  api: KubeApiServer;
  /** Renders the chart with `values` (release "agentplane" unless named, in the cluster's namespace) and installs its RBAC. */
  installChartRbac(values?: Json, release?: string): void;
  /** Credentials of a ServiceAccount of the release namespace (e.g. "agentplane-operator"). */
  as(serviceAccount: string): Identity;
  close(): Promise<void>;
};

const RBAC_KINDS: Record<string, [string, string]> = {
  ServiceAccount: ['', 'serviceaccounts'],
  Role: ['rbac.authorization.k8s.io', 'roles'],
  ClusterRole: ['rbac.authorization.k8s.io', 'clusterroles'],
  RoleBinding: ['rbac.authorization.k8s.io', 'rolebindings'],
  ClusterRoleBinding: ['rbac.authorization.k8s.io', 'clusterrolebindings'],
};
const CHART_LABEL = 'app.kubernetes.io/instance';

export async function startCluster(
  namespace = 'agents',
  opts: Pick<
    KubeApiServerOptions,
    | 'historyLimit'
    | 'rbac'
    | 'tls'
    | 'bookmarkMs'
    | 'gcDelayMs'
    | 'ownerReferencesPermissionEnforcement'
    | 'watchTimeoutMs'
  > & {
    /** A folder of Gateway API CRDs (test/support/gateway-api.ts): HTTPRoutes are then served and validated. */
    gatewayApiCrds?: string;
  } = {},
): Promise<TestCluster> {
  const { gatewayApiCrds, ...serverOpts } = opts;
  // The release namespace exists before the chart is installed (helm install --create-namespace).
  const api = new KubeApiServer({
    crdDir: join(import.meta.dirname, '../../../crds'),
    namespaces: [namespace],
    ...serverOpts,
  });
  registerBuiltinKinds(api.registry);
  // Their CEL rules are left to the kube tier's real API server; the OpenAPI schema is checked here.
  if (gatewayApiCrds) registerCrds(api.registry, gatewayApiCrds, { files: [HTTPROUTE_CRD], otherCel: 'skip' });
  seedCrdObjects(api, join(import.meta.dirname, '../../../crds'));
  await api.start();
  const dir = mkdtempSync(join(tmpdir(), 'ap-k8s-'));
  const identity = (file: string, token?: string): Identity => {
    const kubeconfigPath = api.writeKubeconfig(join(dir, file), namespace, token);
    // As agentplane's processes load it (their API clients reuse connections).
    const kubeConfig = loadKubeConfig(kubeconfigPath);
    return { kubeConfig, kubeconfigPath };
  };
  const accounts = new Map<string, Identity>();
  return {
    api,
    ...identity('kubeconfig'),
    installChartRbac(values = {}, release = 'agentplane') {
      // An upgrade: what the previous render installed goes, then the new render's objects are stored.
      for (const [group, plural] of Object.values(RBAC_KINDS)) {
        if (plural !== 'serviceaccounts')
          api.unseed(group, plural, (o) => o.metadata.labels?.[CHART_LABEL] === release);
      }
      for (const doc of renderChart({ namespace, values, release })) {
        if (!RBAC_KINDS[doc.kind]) continue;
        if (
          doc.kind === 'ServiceAccount' &&
          api.peek('', 'serviceaccounts', doc.metadata.namespace ?? namespace, doc.metadata.name)
        )
          continue;
        api.seed(doc, namespace);
      }
    },
    as(serviceAccount) {
      let id = accounts.get(serviceAccount);
      if (!id) {
        id = identity(`kubeconfig-${serviceAccount}`, api.serviceAccountToken(namespace, serviceAccount));
        accounts.set(serviceAccount, id);
      }
      return id;
    },
    async close() {
      await api.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Polls `check` until it returns a truthy value (or throws after `timeoutMs`, naming what was awaited). The deadline
 * only names what never came; it is no timing target: on a loaded 2-core machine the operator's round trips took 8x
 * as long (operator.test.ts's source build: 3.5 s alone, 28 s under a load of 40), and 15 s failed a wait there.
 */
export async function until<T>(what: string, check: () => T | Promise<T>, timeoutMs = 45_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * The flags an operator under test starts with: the operator's identity in `cluster`, `namespace`, the test
 * registry, push secret and base image. Each test adds its own settings after them.
 */
export function operatorTestFlags(cluster: TestCluster, namespace: string, user = 'agentplane-operator'): string[] {
  return [
    '--kubeconfig',
    cluster.as(user).kubeconfigPath,
    '--namespace',
    namespace,
    '--registry',
    'registry.test/agents',
    '--push-secret',
    'push',
    '--base-image',
    'agentplane:test',
  ];
}
