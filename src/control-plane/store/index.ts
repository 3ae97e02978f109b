// Opens the configured store adapter. The kubernetes adapter is loaded only when asked for. Whatever keeps a store
// from opening is reported as one StoreUnavailableError whose message names the problem and the setting to fix, so
// commands can print it as a single line instead of a stack trace.
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { StoreConfig } from '../config.ts';
import { NotFoundError } from '../../lib/errors.ts';
import type { Logger } from '../../lib/logger.ts';
import { openEmbeddedStore } from './embedded/index.ts';
import type { ControlPlaneStore } from './types.ts';

export { embeddedStoreFile } from './embedded/index.ts';

export class StoreUnavailableError extends Error {}

/** One line: the error's message and those of its causes ("fetch failed: connect ECONNREFUSED ..."). */
export function describeError(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err, depth = 0; e && depth < 4; depth++) {
    const apiBody = (e as { body?: unknown }).body;
    let msg = e instanceof Error ? e.message : String(e);
    // client-node's ApiException carries the Status in `body`; its message repeats headers and the whole body.
    if (typeof (e as { code?: unknown }).code === 'number' && 'headers' in (e as object)) {
      const status = typeof apiBody === 'string' ? safeJson(apiBody) : (apiBody as { message?: string } | undefined);
      const text = status?.message ?? /^Message: (.*)$/m.exec(msg)?.[1];
      msg = `HTTP ${(e as { code: number }).code}${text ? ` ${text}` : ''}`;
    }
    msg = msg.split('\n')[0]!.trim();
    if (msg && !parts.some((p) => p.includes(msg))) parts.push(msg);
    e = (e as { cause?: unknown }).cause;
  }
  return parts.join(': ') || 'unknown error';
}

function safeJson(s: string): { message?: string } | undefined {
  try {
    return JSON.parse(s) as { message?: string };
  } catch {
    return { message: s.slice(0, 200) };
  }
}

function inCluster(): boolean {
  return (
    Boolean(process.env.KUBERNETES_SERVICE_HOST) && existsSync('/var/run/secrets/kubernetes.io/serviceaccount/token')
  );
}

export async function openControlPlaneStore(config: StoreConfig, logger: Logger): Promise<ControlPlaneStore> {
  if (config.store === 'kubernetes') {
    const { openKubernetesStore, loadKubeConfig } = await import('./kubernetes/index.ts');
    if (!config.kubeconfig && !inCluster() && !existsSync(join(homedir(), '.kube', 'config'))) {
      throw new StoreUnavailableError(
        'no Kubernetes configuration: pass --kubeconfig FILE or set KUBECONFIG, create ~/.kube/config, or run inside a cluster',
      );
    }
    let kubeConfig: ReturnType<typeof loadKubeConfig>;
    try {
      kubeConfig = loadKubeConfig(config.kubeconfig);
      if (!kubeConfig.getCurrentCluster()) throw new Error('it names no current cluster (current-context)');
    } catch (err) {
      const which = config.kubeconfig ? `kubeconfig ${config.kubeconfig}` : 'the default kubeconfig';
      throw new StoreUnavailableError(`cannot load ${which}: ${describeError(err)}`);
    }
    const server = kubeConfig.getCurrentCluster()!.server;
    const store = openKubernetesStore({ kubeConfig, namespace: config.namespace, logger });
    // Fail at start with a useful message instead of 500s on every request.
    try {
      await store.list('AgentDeployment', config.namespace);
    } catch (err) {
      await store.close();
      if (err instanceof NotFoundError) {
        throw new StoreUnavailableError(
          'the AgentDeployment custom resource is not installed in this cluster: kubectl apply -f crds/',
        );
      }
      throw new StoreUnavailableError(
        `cannot use the Kubernetes API server at ${server} (namespace ${config.namespace}): ${describeError(err)}`,
      );
    }
    return store;
  }
  try {
    return openEmbeddedStore({ dataDir: config.dataDir, namespace: config.namespace, secretKey: config.secretKey });
  } catch (err) {
    throw new StoreUnavailableError(
      `cannot open the embedded store in --data-dir ${config.dataDir}: ${describeError(err)}`,
    );
  }
}
