// The operator in a cluster: the kubernetes store (custom resources) feeding the controllers, the Kubernetes
// runtime acting on the cluster, and, when asked, a Lease so that only one replica acts at a time.
import { loadKubeConfig } from '../lib/kube-config.ts';
import type { Logger } from '../lib/logger.ts';
import { openKubernetesPlatformState } from '../state/kubernetes/index.ts';
import { buildCredentialResolver } from '../git/credentials.ts';
import { listenerCredentialResolver } from '../api/git-credential.ts';
import { createGitHubApp } from '../git/github-app.ts';
import type { OperatorConfig } from './config.ts';
import { startHealthServer, type HealthServer, type OperatorState } from './health.ts';
import { LeaderElector } from './leader/lease.ts';
import { checkCrds } from './crd-check.ts';
import { createOperator } from './operator.ts';
import { KubernetesRuntime } from './runtimes/kubernetes/index.ts';
import { storeLogSink } from './sources.ts';
import { kubeEventRecorder } from './kube-events.ts';
import { createOperatorMetrics } from './metrics.ts';
import { observeRequests } from './kube-requests.ts';

export type Outcome = 'closed' | 'lost-leadership' | 'crds-outdated';

export type RunningOperator = {
  /** Resolves when the operator stops acting for good (close(), lost leadership, or CRDs too old to run on). */
  done: Promise<Outcome>;
  /** Port of /healthz and /readyz once listening (undefined without --health-port). */
  health: Promise<number | undefined>;
  close(): Promise<void>;
};

export function startKubernetesOperator(config: OperatorConfig, logger: Logger): RunningOperator {
  const metrics = createOperatorMetrics();
  const kubeConfig = observeRequests(loadKubeConfig(config.kubeconfig), metrics.apiRequest);
  const store = openKubernetesPlatformState({ kubeConfig, namespace: config.namespace, logger });
  const runtime = new KubernetesRuntime({
    kubeConfig,
    namespace: config.namespace,
    config: config.runtime,
    logs: storeLogSink(store),
    logger,
    // Integrations live in the store's namespace (the control plane's Secrets); GitHub tokens are minted per build.
    // In a data-plane-only install the cluster holds none: the listener's control plane mints them, per build.
    gitCredential: config.listener
      ? listenerCredentialResolver(config.listener)
      : buildCredentialResolver(store, config.github && createGitHubApp(config.github, logger)),
  });
  const events = kubeEventRecorder({ kubeConfig, instance: config.identity, logger });
  const operator = createOperator({ store, runtime, logger, namespace: config.namespace, events, metrics });
  let finish: (why: Outcome) => void = () => {};
  const done = new Promise<Outcome>((r) => (finish = r));
  let acting = false;
  let state: OperatorState = config.leaderElect ? 'standby' : 'starting';
  let healthServer: HealthServer | undefined;
  const health =
    config.healthPort === undefined
      ? Promise.resolve(undefined)
      : startHealthServer(config.healthPort, () => state, metrics.registry).then(
          (h) => ((healthServer = h), logger.info({ port: h.port }, 'health endpoints listening'), h.port),
          (err: unknown) => (logger.error({ err }, 'health endpoints failed to start'), undefined),
        );

  const act = async () => {
    acting = true;
    state = 'starting';
    await runtime.start();
    await operator.start();
    state = 'acting';
    logger.info({ namespace: config.namespace }, 'operator acting');
  };
  const halt = async () => {
    if (!acting) return;
    acting = false;
    state = 'stopped';
    await operator.stop();
    await events.flush();
    await runtime.shutdown();
  };

  const elector = config.leaderElect
    ? new LeaderElector({
        kubeConfig,
        namespace: config.leaseNamespace,
        name: config.leaseName,
        identity: config.identity,
        leaseDurationMs: config.leaseDurationMs,
        logger,
      })
    : undefined;
  // Nothing is acted on (no Lease taken) before the CRDs are known to be recent enough.
  let closed = false;
  const begin = async () => {
    const pod = { namespace: config.leaseNamespace, name: config.identity };
    if (!(await checkCrds({ kubeConfig, logger, pod }))) return finish('crds-outdated');
    if (closed) return;
    if (elector) {
      elector.run({
        onStartedLeading: async () => {
          try {
            await act();
          } catch (err) {
            logger.error({ err }, 'operator failed to start');
            await halt();
            finish('lost-leadership');
          }
        },
        // A replica that lost the Lease may hold stale state: stop at once and let the process restart.
        // Exit first: waiting for in-flight reconciles here would let a stuck one go on acting after the Lease may
        // have passed to another replica. The stop is still started so that a caller that keeps the process sees it.
        onStoppedLeading: async () => {
          finish('lost-leadership');
          void halt().catch((err: unknown) => logger.warn({ err }, 'stopping after lost leadership failed'));
        },
      });
    } else {
      void act().catch((err: unknown) => {
        logger.error({ err }, 'operator failed to start');
        finish('lost-leadership');
      });
    }
  };
  void begin();

  return {
    done,
    health,
    async close() {
      closed = true;
      if (elector) await elector.stop();
      await halt();
      await store.close();
      await health;
      await healthServer?.close();
      finish('closed');
    },
  };
}
