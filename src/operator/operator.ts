// Wires informers, queues and the two controllers over a store and a runtime. Store-agnostic: the embedded
// store's watch here, the Kubernetes API's in a cluster.
import type { Logger } from '../lib/logger.ts';
import type { ResourceStore } from '../state/resources.ts';
import type { SecretStore } from '../state/secrets.ts';
import type { AgentDeployment, AgentRevision } from '../resources/index.ts';
import { Controller } from './controller-kit/controller.ts';
import { Informer, objectKey } from './controller-kit/informer.ts';
import { WorkQueue } from './controller-kit/workqueue.ts';
import type { Runtime } from './runtimes/types.ts';
import type { EventRecorder } from './controller-kit/events.ts';
import type { ControllerMetrics } from './metrics.ts';
import { createDeploymentReconciler } from './controllers/agentdeployment/controller.ts';
import { createRevisionReconciler } from './controllers/agentrevision/controller.ts';
import { storeListWatch } from './sources.ts';
import type { ResourceReader } from './controllers/shared.ts';
import type { Kind, KindMap } from '../state/resources.ts';

export type OperatorOptions = {
  store: ResourceStore & Pick<SecretStore, 'getSecrets'>;
  runtime: Runtime;
  logger: Logger;
  /** Watch one namespace (default: all). */
  namespace?: string;
  workers?: number;
  resyncMs?: number;
  /** Events on the custom resources (the Kubernetes API's; none on one machine). */
  events?: EventRecorder;
  metrics?: ControllerMetrics;
};

export type Operator = { start(): Promise<void>; stop(): Promise<void> };

export function createOperator(opts: OperatorOptions): Operator {
  const logger = opts.logger.child({ component: 'operator' });
  const deployments = new Informer<AgentDeployment>(storeListWatch(opts.store, 'AgentDeployment', opts.namespace), {
    name: 'agentdeployments',
    logger,
    resyncMs: opts.resyncMs ?? 60_000,
  });
  const revisions = new Informer<AgentRevision>(storeListWatch(opts.store, 'AgentRevision', opts.namespace), {
    name: 'agentrevisions',
    logger,
    resyncMs: opts.resyncMs ?? 60_000,
  });
  const depQueue = new WorkQueue();
  const revQueue = new WorkQueue();

  // Deployments assigned to a listener are built and run by that data plane (which writes its own copies without
  // the assignment); this operator leaves them alone.
  const onListener = (obj: AgentDeployment | AgentRevision) => !!obj.spec.sourceConfig.listenerId;
  const depKeyOfRevision = (rev: AgentRevision) => `${rev.metadata.namespace ?? ''}/${rev.spec.deploymentName}`;
  deployments.onChange((dep, event) => {
    if (onListener(dep)) return;
    depQueue.add(objectKey(dep));
    // A new target (redeploy, new revision) changes what each revision should do. A resync changes nothing: the
    // revision informer resyncs every revision itself, and enqueueing them here too reconciled each one twice.
    if (event === 'resync') return;
    for (const rev of revisions.list())
      if (depKeyOfRevision(rev) === objectKey(dep) && !onListener(rev)) revQueue.add(objectKey(rev));
  });
  revisions.onChange((rev) => {
    if (onListener(rev)) return;
    revQueue.add(objectKey(rev));
    depQueue.add(depKeyOfRevision(rev));
  });
  opts.runtime.onChange((ref) => {
    depQueue.add(`${ref.namespace}/${ref.deployment}`);
    revQueue.add(`${ref.namespace}/${ref.revision}`);
  });

  // The reconcilers read the informers' caches (what triggered them is in the cache already) and write to the store;
  // what they write goes into the caches at once, so the next reconcile never acts on the copy from before.
  const deps = {
    store: writeThrough(opts.store, deployments, revisions),
    reader: cacheReader(deployments, revisions),
    runtime: opts.runtime,
    logger,
    ...(opts.events ? { events: opts.events } : {}),
  };
  const controllers = [
    new Controller({
      name: 'agentdeployment',
      queue: depQueue,
      reconcile: createDeploymentReconciler(deps),
      workers: opts.workers,
      logger,
      metrics: opts.metrics,
    }),
    new Controller({
      name: 'agentrevision',
      queue: revQueue,
      reconcile: createRevisionReconciler(deps),
      workers: opts.workers,
      logger,
      metrics: opts.metrics,
    }),
  ];

  return {
    async start() {
      await Promise.all([deployments.start(), revisions.start()]);
      for (const c of controllers) c.start();
      logger.info('operator started');
    },
    async stop() {
      deployments.stop();
      revisions.stop();
      await Promise.all(controllers.map((c) => c.stop()));
    },
  };
}

/** Reads from the informers: no API request per reconcile (ResourceReader says how stale copies are handled). */
function cacheReader(deployments: Informer<AgentDeployment>, revisions: Informer<AgentRevision>): ResourceReader {
  const informers = { AgentDeployment: deployments, AgentRevision: revisions };
  return {
    get: async <K extends Kind>(kind: K, namespace: string, name: string) =>
      (informers[kind] as unknown as Informer<KindMap[K]>).get(`${namespace}/${name}`),
    revisionsOf: async (dep) =>
      revisions
        .list()
        .filter(
          (r) =>
            (r.metadata.namespace ?? '') === (dep.metadata.namespace ?? '') &&
            r.spec.deploymentName === dep.metadata.name,
        ),
  };
}

/** The store, with every object written by a reconciler also put into its informer's cache. */
function writeThrough(
  store: OperatorOptions['store'],
  deployments: Informer<AgentDeployment>,
  revisions: Informer<AgentRevision>,
): OperatorOptions['store'] {
  const informers = { AgentDeployment: deployments, AgentRevision: revisions };
  const seen = async <K extends Kind>(kind: K, written: Promise<KindMap[K]>): Promise<KindMap[K]> => {
    const obj = await written;
    (informers[kind] as unknown as Informer<KindMap[K]>).observe(obj);
    return obj;
  };
  return {
    get: (kind, namespace, name) => store.get(kind, namespace, name),
    list: (kind, namespace, listOpts) => store.list(kind, namespace, listOpts),
    watch: (...args) => store.watch(...args),
    delete: (kind, namespace, name) => store.delete(kind, namespace, name),
    getSecrets: (namespace, name) => store.getSecrets(namespace, name),
    create: (kind, obj) => seen(kind, store.create(kind, obj)),
    update: (kind, obj) => seen(kind, store.update(kind, obj)),
    updateStatus: (kind, obj) => seen(kind, store.updateStatus(kind, obj)),
  };
}
