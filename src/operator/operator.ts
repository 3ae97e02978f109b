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
import { createDeploymentReconciler } from './controllers/agentdeployment/controller.ts';
import { createRevisionReconciler } from './controllers/agentrevision/controller.ts';
import { storeListWatch } from './sources.ts';

export type OperatorOptions = {
  store: ResourceStore & Pick<SecretStore, 'getSecrets'>;
  runtime: Runtime;
  logger: Logger;
  /** Watch one namespace (default: all). */
  namespace?: string;
  workers?: number;
  resyncMs?: number;
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
  deployments.onChange((dep) => {
    if (onListener(dep)) return;
    depQueue.add(objectKey(dep));
    // A new target (redeploy, new revision) changes what each revision should do.
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

  const deps = { store: opts.store, runtime: opts.runtime, logger };
  const controllers = [
    new Controller({
      name: 'agentdeployment',
      queue: depQueue,
      reconcile: createDeploymentReconciler(deps),
      workers: opts.workers,
      logger,
    }),
    new Controller({
      name: 'agentrevision',
      queue: revQueue,
      reconcile: createRevisionReconciler(deps),
      workers: opts.workers,
      logger,
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
