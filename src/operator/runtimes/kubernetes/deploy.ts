// Deploys: a revision's agent server is one Deployment per deployment (rolled from revision to revision) with its
// Secret, Service, optional Ingress and autoscaler, network policies and dev Postgres. What the tenant asked for is
// admitted against the cluster before anything is written.
import { randomBytes } from 'node:crypto';
import type { V1Deployment } from '@kubernetes/client-node';
import { deploymentAuthEnv } from '../../../lib/deployment-token.ts';
import { reservedEnvName } from '../../../lib/reserved-env.ts';
import { LABEL_DEPLOYMENT, runsImage, type AgentRevision } from '../../../resources/index.ts';
import type { HeldResources, ServerSpec, ServerStatus } from '../types.ts';
import { apply, isStatus } from './apply.ts';
import { builtImage, recordedImage } from './builds.ts';
import { deleteIfPresent, HTTP_ROUTES, orUndefined, serverTarget, type RuntimeContext } from './context.ts';
import { httpRouteRefusal, type HttpRoute } from './http-route.ts';
import { isChildOf, LABEL_REVISION, selectorLabels, type Target } from './labels.ts';
import { makeAgentNetworkPolicy, makePostgresNetworkPolicy } from './network-policy.ts';
import { databaseRefusal, rolloutStatusOf } from './observe.ts';
import {
  boundsViolation,
  hostOwner,
  secretReferenceViolation,
  verifyServiceAccount,
  type VerifiedServiceAccount,
} from './policy.ts';
import { makePostgresSecret, makePostgresService, makePostgresStatefulSet, postgresName } from './postgres.ts';
import {
  databaseFor,
  envSecretName,
  ACTIVITY_TOKEN_KEY,
  makeActivitySecret,
  makeAutoscaler,
  makeDeployment,
  makeSecret,
  serverName,
} from './server.ts';
import { deploymentUrl, ingressHost, makeHttpRoute, makeIngress } from './routing.ts';
import { ensureTenantNamespace } from './tenant-namespace.ts';
import { applySleepRouting, clearStaleSleepRecord, sleepOf, sleepingStatus } from './idle.ts';

/**
 * The deployment's activity token: 32 random bytes, written once to its Secret (never replaced, so the pods' mounted
 * copy stays right) and read back from what the write or the read before it returned.
 */
async function ensureActivityToken(ctx: RuntimeContext, target: Target): Promise<string | undefined> {
  const fresh = randomBytes(32).toString('base64url');
  const { object } = await apply(ctx.ops.secret, makeActivitySecret(target, fresh), { createOnly: true });
  const stored = object.data?.[ACTIVITY_TOKEN_KEY];
  const token = stored ? Buffer.from(stored, 'base64').toString('utf8') : object.stringData?.[ACTIVITY_TOKEN_KEY];
  if (!token) ctx.log.warn({ deployment: target.name }, 'the activity token Secret has no token: it stays awake');
  return token || undefined;
}

/** Writes what the revision's server needs (when it differs) and reports its rollout. */
export async function deploy(
  ctx: RuntimeContext,
  spec: ServerSpec,
  { deployment: dep, revision: rev }: HeldResources,
): Promise<ServerStatus> {
  const target = serverTarget(ctx, dep);
  // Nothing new for a deployment being deleted: children written after its cleanup would outlive it.
  if (target.deleting) return { phase: 'Starting' };
  const image = runsImage(rev.spec.source)
    ? rev.spec.sourceRevisionConfig.imageUri
    : (recordedImage(ctx, spec, rev.status?.image) ?? (await builtImage(ctx, spec)));
  if (!image)
    return {
      phase: 'Failed',
      message: runsImage(rev.spec.source)
        ? `image_uri is required for ${rev.spec.source}`
        : 'No built image for this revision.',
    };
  const cfg = ctx.opts.config;
  const env = { ...spec.env, ...deploymentAuthEnv(cfg.agentAuth, spec.tenantId, spec.deploymentId) };
  const envNames = Object.keys(env).sort();
  const refs = rev.spec.secretReferences ?? [];
  const sourceConfig = rev.spec.sourceConfig;
  // The control plane refuses these names (422); one stored before the rule, or written to the resource directly,
  // is refused here too: the loader, a shell or Node in the image would obey it before the agent's code runs.
  const reserved = [...envNames, ...refs.map((r) => r.name)].map(reservedEnvName).find(Boolean);
  if (reserved) {
    await ctx.opts.logs.append(spec, 'deploy', [reserved]);
    return { phase: 'Failed', message: reserved };
  }

  // A tenant namespace, and the operator's own rights in it (a RoleBinding there), come first: admit reads the
  // ServiceAccount and Secrets the deployment names in it, and without rights there the API server answers 403
  // (it authorizes before it looks), even where nothing exists yet. The namespace is the tenant's either way.
  if (ctx.perTenant) await ensureTenantNamespace(ctx, target);
  // What the tenant asked for is checked before anything else is written: a refused revision leaves no trace.
  const admitted = await admit(ctx, target, rev);
  if ('message' in admitted) {
    await ctx.opts.logs.append(spec, 'deploy', [admitted.message]);
    return { phase: 'Failed', message: admitted.message };
  }
  const publicAccess = sourceConfig.accessMode === 'public';
  const { host } = admitted;
  // The idle policy: the state recorded on the Deployment and where it goes now (a wake asked for, due work). Its
  // pods tell their activity only to the holder of the deployment's own token, made once and kept in a Secret.
  const idleCovered = Boolean(cfg.idle.activator) && (spec.idleTimeoutMinutes ?? 0) > 0 && !target.deleting;
  const activityToken = idleCovered ? await ensureActivityToken(ctx, target) : undefined;
  const sleep = sleepOf(ctx, target, spec, dep, activityToken);
  let url: string;
  let deployment: V1Deployment;
  try {
    // A custom_url with a scheme is what users call (TLS may end before the Ingress); else what we serve.
    url = sourceConfig.customUrl?.includes('://')
      ? new URL(sourceConfig.customUrl).origin
      : deploymentUrl(target, host, cfg);
    deployment = makeDeployment(
      target,
      {
        revision: spec.revision,
        image,
        resourceSpec: sourceConfig.resourceSpec,
        envNames,
        secretReferences: refs,
        url,
        serviceAccount: admitted.serviceAccount,
        public: publicAccess,
        ...(sleep ? { sleep } : {}),
        ...(activityToken ? { activityToken: true } : {}),
      },
      cfg,
    );
  } catch (err) {
    return { phase: 'Failed', message: (err as Error).message };
  }
  const internalDb = databaseFor(envNames, refs).kind === 'internal';
  if (internalDb && cfg.postgres.mode === 'external') {
    return {
      phase: 'Failed',
      message:
        'No DATABASE_URI: this cluster needs an external Postgres (postgres mode external); add a secret or secret_reference named DATABASE_URI.',
    };
  }
  // Policies first, so no pod of the deployment ever runs unprotected.
  if (cfg.networkPolicy.enabled) {
    await apply(ctx.ops.networkPolicy, makeAgentNetworkPolicy(target, cfg));
    if (internalDb) await apply(ctx.ops.networkPolicy, makePostgresNetworkPolicy(target));
  }
  if (envNames.length) await apply(ctx.ops.secret, makeSecret(target, spec.revision, env), { createOnly: true });
  if (internalDb) {
    await apply(ctx.ops.secret, makePostgresSecret(target, randomBytes(18).toString('base64url'), cfg), {
      createOnly: true,
    });
    await apply(ctx.ops.service, makePostgresService(target));
    const sts = await apply(ctx.ops.statefulSet, makePostgresStatefulSet(target, cfg), {
      immutable: [['spec', 'volumeClaimTemplates']],
    });
    // A StatefulSet's volume claim templates cannot change: a new storage size or class reaches new deployments
    // only (an existing volume is resized by editing its PersistentVolumeClaim, where the class allows it).
    if (sts.unchanged)
      ctx.log.warn(
        { deployment: spec.deployment, statefulSet: sts.object.metadata?.name, fields: sts.unchanged },
        'postgres storage settings changed; the existing StatefulSet keeps its volume claim template',
      );
  }
  // Falling asleep, traffic goes to the activator before the replicas go; waking, the replicas come first and the
  // Service selects them again only once one is ready (nextSleep).
  if (sleep?.kind === 'asleep') await applySleepRouting(ctx, target, sleep, host);
  // Switching to an autoscaler keeps the current replica count until the autoscaler sets its own.
  // Before the apply, so no reconcile ever reads a half-cleared record (a stale sleeping-since reads as asleep).
  const live = ctx.deployments.get(`${target.namespace}/${serverName(target)}`);
  if (live) await clearStaleSleepRecord(ctx, target, live, sleep ?? { kind: 'awake' });
  const written = await apply(ctx.ops.deployment, deployment, { retain: [['spec', 'replicas']] });
  if (sleep?.kind !== 'asleep') await applySleepRouting(ctx, target, sleep ?? { kind: 'awake' }, host);
  const ingressName = { name: serverName(target), namespace: target.namespace };
  const ingressKey = `ingresses/${target.namespace}/${serverName(target)}`;
  const hpaKey = `horizontalpodautoscalers/${target.namespace}/${serverName(target)}`;
  const routeKey = `httproutes/${target.namespace}/${serverName(target)}`;
  // With a Gateway configured the host is served by an HTTPRoute instead of an Ingress (never both: two
  // controllers answering one host would split its traffic); switching either way removes the other object.
  let routeRefused: string | undefined;
  if (host && cfg.gateway) {
    ctx.absent.delete(routeKey);
    // What apply returns (the write's answer or the live object) carries the route's status: no extra read.
    routeRefused = httpRouteRefusal((await apply(ctx.ops.httpRoute, makeHttpRoute(target, host, cfg))).object);
    if (routeRefused) ctx.log.warn({ deployment: spec.deployment, reason: routeRefused }, 'HTTPRoute refused');
  } else await deleteRouteIfPresent(ctx, routeKey, target);
  if (host && !cfg.gateway) {
    ctx.absent.delete(ingressKey);
    await apply(ctx.ops.ingress, makeIngress(target, host, cfg));
  }
  // A custom_url (or base domain) removed, or a Gateway now serving it: no Ingress.
  else
    await deleteIfPresent(
      ctx,
      ingressKey,
      () => ctx.net.deleteNamespacedIngress(ingressName),
      () => ctx.net.readNamespacedIngress(ingressName),
      () => ctx.ops.ingress.forget?.(target.namespace, serverName(target)),
      (ingress) => isChildOf(ingress, target),
    );
  const hpa = makeAutoscaler(target, sourceConfig.resourceSpec);
  if (hpa) {
    ctx.absent.delete(hpaKey);
    await apply(ctx.ops.autoscaler, hpa);
  } else
    await deleteIfPresent(
      ctx,
      hpaKey,
      () =>
        ctx.autoscaling.deleteNamespacedHorizontalPodAutoscaler({
          name: serverName(target),
          namespace: target.namespace,
        }),
      () =>
        ctx.autoscaling.readNamespacedHorizontalPodAutoscaler({
          name: serverName(target),
          namespace: target.namespace,
        }),
      () => ctx.ops.autoscaler.forget?.(target.namespace, serverName(target)),
    );
  ctx.urls.set(`${spec.namespace}/${spec.deployment}`, url);
  if (written.wrote) ctx.log.info({ deployment: spec.deployment, revision: spec.revision }, 'rollout started');

  const current = written.wrote
    ? written.object
    : (ctx.deployments.get(`${target.namespace}/${serverName(target)}`) ?? written.object);
  let status: ServerStatus = sleepingStatus(current, spec.revision) ??
    rolloutStatusOf(current, ctx.replicaSets.list(), ctx.pods.list(), spec.revision, cfg.crashLoopRestarts) ?? {
      phase: 'Starting',
    };
  if (internalDb && status.phase === 'Starting') {
    const refused = await postgresRefused(ctx, target);
    if (refused) status = { phase: 'Failed', message: refused };
  }
  // A Gateway refusing the route leaves the pods fine but the host unserved: said while the rollout waits, beside
  // any trouble of the pods' own (which comes first).
  if (routeRefused && status.phase === 'Starting' && !status.trouble)
    status = { phase: 'Starting', trouble: { reason: 'HTTPRouteRefused', message: routeRefused } };
  if (status.phase === 'Failed') await ctx.opts.logs.append(spec, 'deploy', [status.message]);
  if (status.phase === 'Ready') await sweepEnvSecrets(ctx, target, spec.revision);
  return status;
}

/**
 * Why the deployment's Postgres cannot start (observe.ts databaseRefusal), from the watched pods; the
 * StatefulSet's Events are listed only while it has no pod (one list per reconcile of a rollout that waits).
 */
async function postgresRefused(ctx: RuntimeContext, target: Target): Promise<string | undefined> {
  const selector = selectorLabels(target, 'database');
  const pods = ctx.pods
    .list()
    .filter(
      (p) =>
        p.metadata.namespace === target.namespace &&
        Object.entries(selector).every(([k, v]) => p.metadata.labels?.[k] === v),
    );
  const name = postgresName(target);
  const events = pods.length
    ? []
    : (
        await ctx.core
          .listNamespacedEvent({
            namespace: target.namespace,
            fieldSelector: `involvedObject.kind=StatefulSet,involvedObject.name=${name}`,
          })
          .catch((err: unknown) => {
            ctx.log.warn({ err, statefulSet: name }, 'cannot read the Postgres StatefulSet events');
            return { items: [] };
          })
      ).items;
  return databaseRefusal(pods, events, Date.now());
}

/** `n` of a revision named `<deployment>-r<n>`. */
function revisionNumber(revision: string): number | undefined {
  const m = /-r([0-9]+)$/.exec(revision);
  return m ? Number(m[1]) : undefined;
}

/**
 * Once `revision` serves alone, the environment Secrets of the revisions before it go: no pod uses them any more,
 * and a later rollback to one of them writes it again from the revision's stored secrets. Only older revisions (by
 * number) are touched, so a newer one whose rollout a stale cache does not show yet keeps its Secret. Once per
 * revision per process: a resync of a converged deployment lists nothing.
 */
async function sweepEnvSecrets(ctx: RuntimeContext, target: Target, revision: string): Promise<void> {
  const key = `${target.namespace}/${target.name}`;
  const serving = revisionNumber(revision);
  if (serving === undefined || ctx.envSwept.get(key) === revision) return;
  const { items } = await ctx.core.listNamespacedSecret({
    namespace: target.namespace,
    labelSelector: `${LABEL_DEPLOYMENT}=${target.name},${LABEL_REVISION}`,
  });
  for (const secret of items) {
    const of = secret.metadata?.labels?.[LABEL_REVISION] ?? '';
    const n = revisionNumber(of);
    // Only the runtime's own copies (`<revision>-env`), never a Secret someone else labelled alike.
    if (n === undefined || n >= serving || secret.metadata?.name !== envSecretName(of)) continue;
    await ctx.core
      .deleteNamespacedSecret({ name: secret.metadata.name, namespace: target.namespace })
      .catch((err: unknown) => {
        if (!isStatus(err, 404)) throw err;
      });
    ctx.log.info({ deployment: target.name, revision: of }, 'environment Secret of a superseded revision deleted');
  }
  ctx.envSwept.set(key, revision);
}

/**
 * Removes the HTTPRoute of a deployment no longer served through a Gateway (a host dropped, agents.gateway switched
 * off), if it is the operator's own (by its labels). Without the Gateway API installed (404) there is none; without
 * rights to HTTPRoutes (403: a chart older than the one that keeps get and delete with the option off, or RBAC of
 * an admin's own) the route is left, and goes with its AgentDeployment (owner reference).
 */
async function deleteRouteIfPresent(ctx: RuntimeContext, key: string, target: Target): Promise<void> {
  const ref = { name: serverName(target), namespace: target.namespace };
  try {
    await deleteIfPresent(
      ctx,
      key,
      () => ctx.custom.deleteNamespacedCustomObject({ ...HTTP_ROUTES, ...ref }),
      () => ctx.ops.httpRoute.read(ref.namespace, ref.name),
      () => ctx.ops.httpRoute.forget?.(ref.namespace, ref.name),
      (route) => isChildOf(route, target),
    );
  } catch (err) {
    if (!isStatus(err, 403)) throw err;
    // Once per deployment per process: the mark stops the next reconciles from asking again.
    ctx.log.warn(
      { deployment: target.name, namespace: target.namespace },
      'no rights to remove the HTTPRoute of this deployment; it stays until the deployment is deleted',
    );
    ctx.absent.add(key);
  }
}

/**
 * The tenant-controlled parts of a revision against the cluster: bounds, the ServiceAccount, every referenced
 * Secret and the Ingress host (allowed domain, not served by another deployment).
 */
async function admit(
  ctx: RuntimeContext,
  target: Target,
  rev: AgentRevision,
): Promise<{ message: string } | { host?: string; serviceAccount?: VerifiedServiceAccount }> {
  const cfg = ctx.opts.config;
  const { resourceSpec, customUrl } = rev.spec.sourceConfig;
  const bounds = boundsViolation(resourceSpec, cfg.limits);
  if (bounds) return { message: bounds };
  let serviceAccount: VerifiedServiceAccount | undefined;
  if (resourceSpec?.serviceAccountName) {
    const name = resourceSpec.serviceAccountName;
    const account = await orUndefined(() =>
      ctx.core.readNamespacedServiceAccount({ name, namespace: target.namespace }),
    );
    const verified = verifyServiceAccount(name, account, target.tenantId);
    if (!verified.ok) return { message: verified.message };
    serviceAccount = verified.serviceAccount;
  }
  for (const ref of rev.spec.secretReferences ?? []) {
    // From the watched tenant Secrets when there; a miss is read from the server, so a Secret without the label
    // gets the same answer as before.
    const secret =
      (ctx.tenantSecrets?.hasSynced ? ctx.tenantSecrets.get(`${target.namespace}/${ref.secretName}`) : undefined) ??
      (await orUndefined(() => ctx.core.readNamespacedSecret({ name: ref.secretName, namespace: target.namespace })));
    const problem = secretReferenceViolation(ref, secret, target.tenantId, cfg);
    if (problem) return { message: problem };
  }
  let host: string | undefined;
  try {
    host = ingressHost(target, customUrl, cfg);
  } catch (err) {
    return { message: (err as Error).message };
  }
  if (host) {
    const ingresses = ctx.ingresses.hasSynced
      ? ctx.ingresses.list()
      : ctx.perTenant
        ? (await ctx.net.listIngressForAllNamespaces()).items
        : (await ctx.net.listNamespacedIngress({ namespace: target.namespace })).items;
    const routes = !cfg.gateway
      ? []
      : ctx.httpRoutes?.hasSynced
        ? ctx.httpRoutes.list()
        : await listHttpRoutes(ctx, target.namespace);
    const owner = hostOwner(host, [...ingresses, ...routes], target);
    if (owner) return { message: `host "${host}" is already served by another deployment (${owner})` };
  }
  return { host, serviceAccount };
}

/** Every agent HTTPRoute a host could clash with: all tenants' with a namespace per tenant, else this namespace's. */
async function listHttpRoutes(ctx: RuntimeContext, namespace: string): Promise<HttpRoute[]> {
  const list = (
    ctx.perTenant
      ? await ctx.custom.listClusterCustomObject({ ...HTTP_ROUTES })
      : await ctx.custom.listNamespacedCustomObject({ ...HTTP_ROUTES, namespace })
  ) as { items: HttpRoute[] };
  return list.items;
}
