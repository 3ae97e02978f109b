// The AgentDeployment controller: owns a deployment's revisions set (ensures the newest exists, supersedes stale
// ones), its traffic (routes to the target revision once it is ready) and its cleanup (finalizer).
// get -> deletion guard -> observe -> decide -> act -> status.
import type { Logger } from '../../../lib/logger.ts';
import { AlreadyExistsError } from '../../../state/errors.ts';
import type { ResourceStore } from '../../../state/resources.ts';
import {
  FINALIZER_RUNTIME,
  latestRevisionName,
  makeRevision,
  RevisionPhase,
  setCondition,
  type AgentDeployment,
  type AgentDeploymentStatus,
  type AgentRevision,
} from '../../../resources/index.ts';
import { splitKey } from '../../controller-kit/informer.ts';
import type { ReconcileResult } from '../../controller-kit/controller.ts';
import type { Runtime, ServerStatus } from '../../runtimes/types.ts';
import { deploymentRef, revisionsOf, sameJson, storeReader, views, type ResourceReader } from '../shared.ts';
import {
  chooseRoute,
  deploymentConditions,
  ignoredSpecChanges,
  ignoredSpecMessage,
  pickTarget,
  readyEvent,
  revisionsToSkip,
  servingCondition,
} from './decide.ts';
import { noEvents, type EventRecorder } from '../../controller-kit/events.ts';
import { sleepingCondition } from '../agentrevision/conditions.ts';

export type DeploymentControllerDeps = {
  store: Pick<ResourceStore, 'get' | 'list' | 'create' | 'update' | 'updateStatus'>;
  /** Where the custom resources are read (default: the store itself). */
  reader?: ResourceReader;
  runtime: Runtime;
  logger: Logger;
  /** Where phase changes and failures are told (`kubectl describe`); default: nowhere. */
  events?: EventRecorder;
};

export function createDeploymentReconciler({
  store,
  reader = storeReader(store),
  runtime,
  logger,
  events = noEvents,
}: DeploymentControllerDeps) {
  const log = (key: string) => logger.child({ controller: 'agentdeployment', key });

  async function finalize(dep: AgentDeployment): Promise<void> {
    if (!dep.metadata.finalizers?.includes(FINALIZER_RUNTIME)) return;
    await runtime.cleanup(deploymentRef(dep), dep);
    const finalizers = dep.metadata.finalizers.filter((f) => f !== FINALIZER_RUNTIME);
    await store.update('AgentDeployment', { ...dep, metadata: { ...dep.metadata, finalizers } });
  }

  async function ensureFinalizer(dep: AgentDeployment): Promise<AgentDeployment> {
    if (dep.metadata.finalizers?.includes(FINALIZER_RUNTIME)) return dep;
    const finalizers = [...(dep.metadata.finalizers ?? []), FINALIZER_RUNTIME];
    return store.update('AgentDeployment', { ...dep, metadata: { ...dep.metadata, finalizers } });
  }

  /** The newest revision always exists, whoever wrote the deployment (API or `kubectl apply`). */
  async function ensureLatestRevision(dep: AgentDeployment, revisions: AgentRevision[]): Promise<AgentRevision[]> {
    const name = latestRevisionName(dep);
    if (revisions.some((r) => r.metadata.name === name)) return revisions;
    try {
      return [...revisions, await store.create('AgentRevision', makeRevision(dep))];
    } catch (err) {
      if (err instanceof AlreadyExistsError) return revisionsOf(store, dep);
      throw err;
    }
  }

  /** Marks the named revisions SKIPPED; returns the set with the written copies (a cache would not have them yet). */
  async function skip(revisions: AgentRevision[], names: string[], target: string): Promise<AgentRevision[]> {
    const written = new Map<string, AgentRevision>();
    for (const rev of revisions.filter((r) => names.includes(r.metadata.name))) {
      const updated = await store.updateStatus('AgentRevision', {
        ...rev,
        status: {
          ...rev.status,
          phase: RevisionPhase.SKIPPED,
          statusMessage: `Superseded by ${target} before it went live.`,
          conditions: setCondition(rev.status?.conditions, {
            type: 'Ready',
            status: 'False',
            reason: 'SKIPPED',
            message: `Superseded by ${target}.`,
          }),
        },
      });
      written.set(updated.metadata.name, updated);
    }
    return revisions.map((r) => written.get(r.metadata.name) ?? r);
  }

  function desiredStatus(
    dep: AgentDeployment,
    revisions: AgentRevision[],
    target: string | undefined,
    routed: string | undefined,
    targetServer: ServerStatus | undefined,
    url: string,
  ): AgentDeploymentStatus {
    const current = dep.status ?? {};
    const all = views(revisions);
    const latestName = latestRevisionName(dep);
    const latest = all.find((r) => r.name === latestName);
    const messageOf = (name: string) => revisions.find((r) => r.metadata.name === name)?.status?.statusMessage ?? '';
    const serving = servingCondition(
      routed,
      all.find((r) => r.name === target),
      latest,
      messageOf(latestName),
      targetServer,
    );
    const requested = dep.spec.targetRevisionName ?? latestName;
    const newest = revisions.find((r) => r.metadata.name === latestName);
    const ignored = ignoredSpecChanges(dep.spec, newest?.spec);
    const conditions = deploymentConditions({
      routed,
      requested,
      requestedView: all.find((r) => r.name === requested),
      requestedMessage: messageOf(requested),
      serving,
      ...(ignored.length
        ? {
            ignored: ignoredSpecMessage(
              { name: dep.metadata.name, revisionCounter: dep.spec.revisionCounter },
              ignored,
            ),
          }
        : {}),
    });
    const activeRevisionName = routed ?? current.activeRevisionName;
    // Every condition speaks for this generation: Ready is no longer True while an older revision serves.
    const generation = dep.metadata.generation;
    let list = current.conditions;
    for (const [type, state] of [
      ['Ready', conditions.Ready],
      ['Serving', serving],
      ['Progressing', conditions.Progressing],
      ['Degraded', conditions.Degraded],
    ] as const) {
      list = setCondition(list, { type, ...state, observedGeneration: generation });
    }
    // Sleeping (idle policy) speaks of the routed revision's server, once the runtime was asked about it.
    const sleeping = routed && target === routed ? sleepingCondition(targetServer, generation) : undefined;
    if (sleeping) list = setCondition(list, sleeping);
    return {
      ...current,
      ...(routed ? { phase: 'READY' as const } : {}),
      latestRevisionName: latestName,
      ...(activeRevisionName ? { activeRevisionName } : {}),
      url,
      observedGeneration: generation,
      conditions: list,
    };
  }

  return async function reconcile(key: string): Promise<ReconcileResult> {
    const { namespace, name } = splitKey(key);
    let dep = await reader.get('AgentDeployment', namespace, name);
    if (!dep) return;
    if (dep.metadata.deletionTimestamp) {
      await finalize(dep);
      log(key).info('deployment cleaned up');
      return;
    }
    dep = await ensureFinalizer(dep);

    // observe
    let revisions = await ensureLatestRevision(dep, await reader.revisionsOf(dep));
    const ref = deploymentRef(dep);
    let routed = runtime.routedRevision(ref);

    // decide
    const target = pickTarget(views(revisions), dep.spec.targetRevisionName);
    const stale = revisionsToSkip(views(revisions), target, dep.spec.revisionCounter);
    const active = dep.status?.activeRevisionName;
    const targetServer = target ? runtime.serverStatus({ ...ref, revision: target }) : undefined;
    const routeTo = chooseRoute({
      target,
      targetServer,
      active,
      activeServer: active ? runtime.serverStatus({ ...ref, revision: active }) : undefined,
      routed,
    });

    // act
    if (target && stale.length) revisions = await skip(revisions, stale, target);
    if (routeTo) {
      await runtime.route(ref, routeTo);
      log(key).info({ revision: routeTo, previous: routed }, 'traffic moved');
      routed = routeTo;
    }

    // status
    const url = await runtime.url(ref);
    const status = desiredStatus(dep, revisions, target, routed, routeTo ? undefined : targetServer, url);
    if (!sameJson(status, dep.status ?? {})) {
      await store.updateStatus('AgentDeployment', { ...dep, status });
      // Told from the status, not from route(): a Kubernetes rollout moves traffic without one.
      const before = dep.status?.activeRevisionName;
      if (status.activeRevisionName && status.activeRevisionName !== before) {
        const note = `Serving revision ${status.activeRevisionName}${before ? ` (was ${before})` : ''}.`;
        events.record(dep, { type: 'Normal', reason: 'TrafficMoved', action: 'Route', note });
      }
      const ready = status.conditions?.find((c) => c.type === 'Ready');
      const event =
        ready &&
        readyEvent(
          dep.status?.conditions?.find((c) => c.type === 'Ready'),
          ready,
        );
      if (event) events.record(dep, event);
    }
  };
}
