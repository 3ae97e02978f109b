// The platform's shared state (the ground floor the control plane, operator, dev and listener stand on): opens the
// configured backend. The kubernetes backend is loaded only when asked for. Whatever keeps the state from opening is
// reported as one StateUnavailableError whose message names the problem and the setting to fix, so commands can print
// it as a single line instead of a stack trace.
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { describeError, NotFoundError } from '../lib/errors.ts';
import type { Logger } from '../lib/logger.ts';
import { openEmbeddedPlatformState } from './embedded/index.ts';
import { claimHostsOfOlderDeployments } from './older-host-claims.ts';
import type { PlatformState } from './types.ts';

/** Which backend holds the state and where (the control plane's --store, --data-dir, ... options). */
export type PlatformStateConfig = {
  store: 'embedded' | 'kubernetes';
  dataDir: string;
  namespace: string;
  kubeconfig?: string;
  /** AES-256 key of the embedded backend's secret values. */
  secretKey?: Buffer;
};

export class StateUnavailableError extends Error {}

function inCluster(): boolean {
  return (
    Boolean(process.env.KUBERNETES_SERVICE_HOST) && existsSync('/var/run/secrets/kubernetes.io/serviceaccount/token')
  );
}

/** How long the start probe waits out 429s before it gives up (a CRD's storage takes seconds, not minutes). */
const PROBE_RETRY_MS = 60_000;

/**
 * Seconds the API server asked to wait (429 Too Many Requests, its Retry-After) when `err` or one of its causes is
 * such an answer; undefined for any other failure.
 */
function retryAfterSeconds(err: unknown): number | undefined {
  for (let e: unknown = err, depth = 0; e && depth < 4; depth++) {
    const x = e as { code?: unknown; headers?: Record<string, string> };
    if (x.code === 429) return Math.min(10, Math.max(1, Number(x.headers?.['retry-after'] ?? 1) || 1));
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

// A real API server answers 429 "storage is (re)initializing" for a custom resource for a few seconds after its CRD
// was created (`helm install` creates the CRDs and then the pods that read them), and API priority and fairness
// answers 429 under load; client-go waits Retry-After and tries again, client-node does not.
async function probeWithRetries<T>(probe: () => Promise<T>, logger: Logger): Promise<T> {
  const deadline = Date.now() + PROBE_RETRY_MS;
  for (;;) {
    try {
      return await probe();
    } catch (err) {
      const wait = retryAfterSeconds(err);
      if (wait === undefined || Date.now() + wait * 1000 > deadline) throw err;
      logger.warn({ err: describeError(err), retryAfterSeconds: wait }, 'Kubernetes API server busy; trying again');
      await new Promise((r) => setTimeout(r, wait * 1000));
    }
  }
}

export async function openPlatformState(config: PlatformStateConfig, logger: Logger): Promise<PlatformState> {
  if (config.store === 'kubernetes') {
    const { openKubernetesPlatformState, loadKubeConfig } = await import('./kubernetes/index.ts');
    if (!config.kubeconfig && !inCluster() && !existsSync(join(homedir(), '.kube', 'config'))) {
      throw new StateUnavailableError(
        'no Kubernetes configuration: pass --kubeconfig FILE or set KUBECONFIG, create ~/.kube/config, or run inside a cluster',
      );
    }
    let kubeConfig: ReturnType<typeof loadKubeConfig>;
    try {
      kubeConfig = loadKubeConfig(config.kubeconfig);
      if (!kubeConfig.getCurrentCluster()) throw new Error('it names no current cluster (current-context)');
    } catch (err) {
      const which = config.kubeconfig ? `kubeconfig ${config.kubeconfig}` : 'the default kubeconfig';
      throw new StateUnavailableError(`cannot load ${which}: ${describeError(err)}`);
    }
    const server = kubeConfig.getCurrentCluster()!.server;
    const store = openKubernetesPlatformState({ kubeConfig, namespace: config.namespace, logger });
    // Fail at start with a useful message instead of 500s on every request.
    try {
      await probeWithRetries(() => store.list('AgentDeployment', config.namespace), logger);
    } catch (err) {
      await store.close();
      if (err instanceof NotFoundError) {
        throw new StateUnavailableError(
          'the AgentDeployment custom resource is not installed in this cluster: kubectl apply -f crds/',
        );
      }
      throw new StateUnavailableError(
        `cannot use the Kubernetes API server at ${server} (namespace ${config.namespace}): ${describeError(err)}`,
      );
    }
    try {
      await claimHostsOfOlderDeployments(store, logger);
    } catch (err) {
      await store.close();
      throw err;
    }
    return store;
  }
  try {
    return openEmbeddedPlatformState({
      dataDir: config.dataDir,
      namespace: config.namespace,
      secretKey: config.secretKey,
    });
  } catch (err) {
    throw new StateUnavailableError(
      `cannot open the embedded store in --data-dir ${config.dataDir}: ${describeError(err)}`,
    );
  }
}
