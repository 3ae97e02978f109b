// Traffic: a rolling update moves it by itself, so routing is observing the Deployment and its ReplicaSets (which
// revision serves, where the deployment is reached) and rolling back a revision that must not run.
import type { V1Deployment, V1ReplicaSet } from '@kubernetes/client-node';
import type { AgentDeployment } from '../../../resources/index.ts';
import type { RevisionRef, ServerStatus } from '../types.ts';
import { apply, isStatus } from './apply.ts';
import { serviceHost } from './config.ts';
import { beingDeleted, serverDeployment, type DeploymentRef, type RuntimeContext } from './context.ts';
import { LABEL_REVISION } from './labels.ts';
import { sleepingStatus } from './idle.ts';
import { rolloutStatusOf } from './observe.ts';
import { ANNOTATION_URL } from './server.ts';

/** What the revision's server is doing now, from the informers' caches. */
export function serverStatus(ctx: RuntimeContext, ref: RevisionRef): ServerStatus | undefined {
  const d = serverDeployment(ctx, ref);
  return (
    sleepingStatus(d, ref.revision) ??
    rolloutStatusOf(d, ctx.replicaSets.list(), ctx.pods.list(), ref.revision, ctx.opts.config.crashLoopRestarts)
  );
}

/**
 * The revision whose pods serve: the Deployment's once its rollout is done, else the newest ReplicaSet that
 * still has available pods (the old revision during a rollout or after a rollback).
 */
export function routedRevision(ctx: RuntimeContext, ref: DeploymentRef): string | undefined {
  const d = serverDeployment(ctx, ref);
  if (!d) return undefined;
  const running = d.spec?.template?.metadata?.labels?.[LABEL_REVISION];
  if (running && serverStatus(ctx, { ...ref, revision: running })?.phase === 'Ready') return running;
  const serving = ownedReplicaSets(ctx, d)
    .filter((rs) => (rs.status?.availableReplicas ?? 0) > 0)
    .sort((a, b) => revisionNumberOf(b) - revisionNumberOf(a))[0];
  return serving?.spec?.template?.metadata?.labels?.[LABEL_REVISION];
}

/** The deployment's URL: the one its last deploy computed, else the one on its Deployment, else the default. */
export function deploymentUrlOf(ctx: RuntimeContext, ref: DeploymentRef): string {
  const known =
    ctx.urls.get(`${ref.namespace}/${ref.deployment}`) ??
    serverDeployment(ctx, ref)?.metadata.annotations?.[ANNOTATION_URL];
  if (known) return known;
  const base = ctx.opts.config.ingress.baseDomain;
  return base
    ? `http://${ref.deployment}.${base}`
    : `http://${serviceHost(ref.deployment, ref.namespace, ctx.opts.config)}`;
}

/**
 * Stops a revision that must not run: when the Deployment is rolling to it (say it failed), roll back to the
 * pod template of the revision still serving, or scale to zero when none serves.
 */
export async function rollBack(ctx: RuntimeContext, ref: RevisionRef, dep: AgentDeployment): Promise<void> {
  const rollingTo = (x: V1Deployment | undefined) =>
    x?.spec?.template?.metadata?.labels?.[LABEL_REVISION] === ref.revision;
  const cached = serverDeployment(ctx, ref);
  if (!cached || !rollingTo(cached)) return;
  // The cache may not show a write of this process yet (the serving revision put back a moment ago): act on what
  // the API server holds, or this would write the Deployment a second time.
  const d = await ctx.ops.deployment
    .read(cached.metadata.namespace ?? ref.namespace, cached.metadata.name)
    .catch((err: unknown) => {
      if (isStatus(err, 404)) return undefined;
      throw err;
    });
  if (!d || !rollingTo(d)) return;
  const routed = routedRevision(ctx, ref);
  if (routed === ref.revision) return;
  // A deployment being deleted keeps what it has (apply could recreate a child its cleanup just removed).
  if (beingDeleted(ctx, dep)) return;
  const back = routed
    ? ownedReplicaSets(ctx, d).find((rs) => rs.spec?.template?.metadata?.labels?.[LABEL_REVISION] === routed)
    : undefined;
  if (back?.spec?.template) {
    const { ['pod-template-hash']: _h, ...labels } = back.spec.template.metadata?.labels ?? {};
    const template = { ...back.spec.template, metadata: { ...back.spec.template.metadata, labels } };
    await apply(ctx.ops.deployment, { ...d, spec: { ...d.spec!, template } } as V1Deployment, { owned: false });
    ctx.log.info({ deployment: ref.deployment, from: ref.revision, to: routed }, 'rolled back');
  } else if ((d.spec?.replicas ?? 0) > 0) {
    await apply(ctx.ops.deployment, { ...d, spec: { ...d.spec!, replicas: 0 } } as V1Deployment, { owned: false });
    ctx.log.info({ deployment: ref.deployment, revision: ref.revision }, 'scaled to zero');
  }
}

function ownedReplicaSets(ctx: RuntimeContext, d: V1Deployment): V1ReplicaSet[] {
  return ctx.replicaSets.list().filter((rs) => rs.metadata.ownerReferences?.some((o) => o.uid === d.metadata?.uid));
}

function revisionNumberOf(rs: V1ReplicaSet): number {
  return Number(rs.metadata?.annotations?.['deployment.kubernetes.io/revision'] ?? 0);
}
