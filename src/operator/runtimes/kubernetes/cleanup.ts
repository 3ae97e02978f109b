// Deleting a deployment: children in our namespace go with the AgentDeployment (owner references); in a tenant
// namespace or a build namespace of their own they are deleted here by label, while the deployment's finalizer
// holds it.
import { LABEL_DEPLOYMENT, type AgentDeployment } from '../../../resources/index.ts';
import { isStatus } from './apply.ts';
import { buildNamespace, HTTP_ROUTES, type DeploymentRef, type RuntimeContext } from './context.ts';
import { tenantNamespaceName } from './tenant-namespace.ts';

/**
 * Children in the AgentDeployment's namespace carry owner references to it and the garbage collector removes
 * them. In a tenant namespace owner references cannot point across namespaces, so the children are deleted here
 * by label, while the deployment's finalizer holds it (the controller removes the finalizer after this).
 */
export async function cleanup(ctx: RuntimeContext, ref: DeploymentRef, dep: AgentDeployment): Promise<void> {
  // Marked first: a deploy queued behind this cleanup with an older read of the deployment writes nothing.
  if (dep.metadata.uid) ctx.cleanedUp.add(dep.metadata.uid);
  if (ctx.perTenant)
    await deleteChildren(
      ctx,
      tenantNamespaceName(ctx.opts.config.tenantNamespaces.prefix, dep.spec.tenantId),
      ref.deployment,
    );
  // Build Jobs in a build namespace of their own (their pods and credential Secrets go with them) and their policy.
  const builds = buildNamespace(ctx);
  if (builds !== ref.namespace) await deleteChildren(ctx, builds, ref.deployment, ['jobs', 'networkpolicies']);
  ctx.urls.delete(`${ref.namespace}/${ref.deployment}`);
}

/** Deletes the deployment's children in `namespace` by label: every kind, or only those in `only`. */
async function deleteChildren(
  ctx: RuntimeContext,
  namespace: string,
  deployment: string,
  only?: string[],
): Promise<void> {
  const labelSelector = `${LABEL_DEPLOYMENT}=${deployment}`;
  const q = { namespace, labelSelector };
  const names = (list: { items: { metadata?: { name?: string } }[] }) => list.items.map((o) => o.metadata!.name!);
  const { apps, core, net, autoscaling, batch, discovery } = ctx;
  const kinds: [string, () => Promise<string[]>, (name: string) => Promise<unknown>][] = [
    [
      'deployments',
      async () => names(await apps.listNamespacedDeployment(q)),
      (name) => apps.deleteNamespacedDeployment({ name, namespace }),
    ],
    [
      'statefulsets',
      async () => names(await apps.listNamespacedStatefulSet(q)),
      (name) => apps.deleteNamespacedStatefulSet({ name, namespace }),
    ],
    [
      'horizontalpodautoscalers',
      async () => names(await autoscaling.listNamespacedHorizontalPodAutoscaler(q)),
      (name) => autoscaling.deleteNamespacedHorizontalPodAutoscaler({ name, namespace }),
    ],
    [
      'ingresses',
      async () => names(await net.listNamespacedIngress(q)),
      (name) => net.deleteNamespacedIngress({ name, namespace }),
    ],
    // Also with the Gateway switched off (routes made while it was on); none where the Gateway API is not installed
    // (404), and none listed where the operator holds no rights to them (403: RBAC older than the chart's).
    [
      'httproutes',
      async () => {
        try {
          return names(
            (await ctx.custom.listNamespacedCustomObject({ ...HTTP_ROUTES, ...q })) as {
              items: { metadata?: { name?: string } }[];
            },
          );
        } catch (err) {
          if (isStatus(err, 404) || (!ctx.opts.config.gateway && isStatus(err, 403))) return [];
          throw err;
        }
      },
      (name: string) => ctx.custom.deleteNamespacedCustomObject({ ...HTTP_ROUTES, namespace, name }),
    ],
    [
      'services',
      async () => names(await core.listNamespacedService(q)),
      (name) => core.deleteNamespacedService({ name, namespace }),
    ],
    // A sleeping deployment's EndpointSlice to the activator (only with one: else the operator has no right there).
    ...(ctx.opts.config.idle.activator
      ? [
          [
            'endpointslices',
            async () => names(await discovery.listNamespacedEndpointSlice(q)),
            (name: string) => discovery.deleteNamespacedEndpointSlice({ name, namespace }),
          ] as [string, () => Promise<string[]>, (name: string) => Promise<unknown>],
        ]
      : []),
    [
      'secrets',
      async () => names(await core.listNamespacedSecret(q)),
      (name) => core.deleteNamespacedSecret({ name, namespace }),
    ],
    [
      'jobs',
      async () => names(await batch.listNamespacedJob(q)),
      (name) => batch.deleteNamespacedJob({ name, namespace, propagationPolicy: 'Background' }),
    ],
    // Last: the pods above are gone or going before their traffic rules are.
    [
      'networkpolicies',
      async () => names(await net.listNamespacedNetworkPolicy(q)),
      (name) => net.deleteNamespacedNetworkPolicy({ name, namespace }),
    ],
  ];
  for (const [kind, list, del] of kinds) {
    if (only && !only.includes(kind)) continue;
    for (const name of await list()) {
      try {
        await del(name);
      } catch (err) {
        if (!isStatus(err, 404)) throw err;
      }
      ctx.log.info({ namespace, kind, name }, 'deleted child');
    }
  }
}
