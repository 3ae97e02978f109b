// Start-up check that the cluster's CustomResourceDefinitions are at least the revision this operator needs
// (helm upgrade never changes CRDs: an operator upgraded without `kubectl apply -f crds/` would otherwise write
// fields the old schemas prune). Too old or missing: one clear log line, an Event on the operator's Pod, and the
// caller exits non-zero. Unreadable (403 from a chart older than the ClusterRole that grants it): a warning only.
import { randomBytes } from 'node:crypto';
import { ApiException, ApiextensionsV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from '../lib/logger.ts';
import { CRD_REVISION, CRD_REVISION_ANNOTATION, buildCrds } from '../resources/crd.ts';

export const CRD_UPGRADE_HINT = 'apply crds/ first (docs/kubernetes.md#upgrading)';

export type CrdProblem = { crd: string; message: string };

/** What is wrong with the CRDs served by the cluster; empty when all are recent enough. Throws on API errors. */
export async function crdProblems(kubeConfig: KubeConfig): Promise<CrdProblem[]> {
  const api = kubeConfig.makeApiClient(ApiextensionsV1Api);
  const problems: CrdProblem[] = [];
  for (const { crd } of buildCrds()) {
    const name = (crd.metadata as { name: string }).name;
    let found;
    try {
      found = await api.readCustomResourceDefinition({ name });
    } catch (err) {
      if (err instanceof ApiException && err.code === 404) {
        problems.push({ crd: name, message: `CRD ${name} is missing; needs revision ${CRD_REVISION}` });
        continue;
      }
      throw err;
    }
    const raw = found.metadata?.annotations?.[CRD_REVISION_ANNOTATION];
    const has = raw === undefined ? 0 : Number(raw);
    if (!Number.isInteger(has) || has < CRD_REVISION)
      problems.push({
        crd: name,
        message: `CRD ${name} has revision ${raw ?? '0 (no ' + CRD_REVISION_ANNOTATION + ' annotation)'}; needs ${CRD_REVISION}`,
      });
  }
  return problems;
}

export type CrdCheckOptions = {
  kubeConfig: KubeConfig;
  logger: Logger;
  /** The operator's own Pod (the Event's subject): its namespace and name. */
  pod: { namespace: string; name: string };
};

/** true: the operator may run. false: the CRDs are too old or missing (logged, and an Event recorded). */
export async function checkCrds(opts: CrdCheckOptions): Promise<boolean> {
  let problems: CrdProblem[];
  try {
    problems = await crdProblems(opts.kubeConfig);
  } catch (err) {
    const code = err instanceof ApiException ? err.code : undefined;
    opts.logger.warn(
      { err: code === undefined ? err : undefined, code },
      code === 403
        ? 'cannot read CustomResourceDefinitions (forbidden: the chart predates the operator ClusterRole that grants it); CRD revision not checked'
        : 'cannot read CustomResourceDefinitions; CRD revision not checked',
    );
    return true;
  }
  if (!problems.length) return true;
  const message = `${problems.map((p) => p.message).join('; ')}: ${CRD_UPGRADE_HINT}`;
  opts.logger.error({ crds: problems.map((p) => p.crd) }, message);
  await recordEvent(opts, message).catch((err: unknown) =>
    opts.logger.warn({ err }, 'could not record the CRD revision Event'),
  );
  return false;
}

async function recordEvent(opts: CrdCheckOptions, message: string): Promise<void> {
  const now = new Date();
  await opts.kubeConfig.makeApiClient(CoreV1Api).createNamespacedEvent({
    namespace: opts.pod.namespace,
    body: {
      // Named as the real event recorder names them: <object>.<unique suffix>.
      metadata: { name: `${opts.pod.name}.${randomBytes(8).toString('hex')}`, namespace: opts.pod.namespace },
      involvedObject: { apiVersion: 'v1', kind: 'Pod', namespace: opts.pod.namespace, name: opts.pod.name },
      reason: 'CRDsOutdated',
      message,
      type: 'Warning',
      source: { component: 'agentplane-operator' },
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    },
  });
}
