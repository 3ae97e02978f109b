// The watch half of the listener's sync: makes the local store hold exactly the deployments and revisions of the
// control plane's snapshot, level-triggered (a restart or a long absence converges, and nothing is made twice).
import { isDeepStrictEqual } from 'node:util';
import { NotFoundError } from '../lib/errors.ts';
import {
  API_VERSION,
  LABEL_DEPLOYMENT,
  LABEL_DEPLOYMENT_ID,
  LABEL_REVISION_NUMBER,
  LABEL_TENANT,
  ownerReferenceTo,
  type AgentRevision,
  type SourceConfig,
} from '../resources/index.ts';
import type { ListenerSnapshot } from '../api/schemas/listeners.ts';
import { AlreadyExistsError } from '../state/errors.ts';
import { getOptional, LABEL_LISTENER, ourDeployments, updateDeployment, type SyncContext } from './local-store.ts';

/** The data plane's own copy: the same spec without the assignment, so the local operator reconciles it. */
function localSourceConfig(c: SourceConfig): SourceConfig {
  return { ...c, listenerId: null };
}

export async function applySnapshot(ctx: SyncContext, snap: ListenerSnapshot): Promise<void> {
  const { store, listenerId, tenant, log } = ctx;
  const wanted = new Set<string>();
  for (const d of snap.deployments) {
    // Snapshot content comes from the control plane, but it is checked again here: only this tenant's objects.
    if (d.spec.tenantId !== tenant) continue;
    const ns = d.spec.sourceConfig.listenerConfig?.k8sNamespace || ctx.namespace;
    wanted.add(`${ns}/${d.name}`);
    for (const r of d.revisions) {
      for (const type of ['build', 'deploy'] as const) {
        const key = `${r.name}/${type}`;
        const cp = Number(r.log_cursors[type] ?? '0');
        if (cp > (ctx.shipped.get(key) ?? -1)) ctx.shipped.set(key, cp);
      }
    }
    const spec = { ...d.spec, sourceConfig: localSourceConfig(d.spec.sourceConfig) };
    let local = await getOptional(store, 'AgentDeployment', ns, d.name);
    if (!local) {
      try {
        local = await store.create('AgentDeployment', {
          apiVersion: API_VERSION,
          kind: 'AgentDeployment',
          metadata: {
            name: d.name,
            namespace: ns,
            labels: {
              [LABEL_TENANT]: tenant,
              [LABEL_DEPLOYMENT_ID]: d.spec.deploymentId,
              [LABEL_LISTENER]: listenerId,
            },
            annotations: d.annotations,
          },
          spec,
        });
        log.info({ deployment_id: d.spec.deploymentId, namespace: ns }, 'deployment taken on');
      } catch (err) {
        if (!(err instanceof AlreadyExistsError)) throw err;
        local = await store.get('AgentDeployment', ns, d.name);
      }
    }
    if (local.metadata.labels?.[LABEL_LISTENER] !== listenerId) {
      log.warn({ deployment: d.name, namespace: ns }, 'a deployment of that name exists here and is not ours');
      continue;
    }
    if (local.metadata.deletionTimestamp) continue;
    // Env values first: a revision may be reconciled the moment it exists.
    const sets = new Set([d.spec.secretsName, ...d.revisions.map((r) => r.spec.secretsName)].filter(Boolean));
    for (const set of sets as Set<string>) {
      const values = snap.secrets[set];
      if (!values) continue;
      try {
        await store.putSecrets(ns, set, { kind: 'AgentDeployment', name: d.name, uid: local.metadata.uid! }, values);
      } catch (err) {
        if (!(err instanceof AlreadyExistsError)) throw err;
      }
    }
    // The target first, then its revision: a revision that appears before the deployment points at it would be
    // taken for one superseded already. (The local operator may make the revision itself meanwhile: same spec.)
    if (!isDeepStrictEqual(local.spec, spec)) {
      await updateDeployment(store, ns, d.name, (obj) => ({
        ...obj,
        spec,
        metadata: { ...obj.metadata, annotations: { ...obj.metadata.annotations, ...d.annotations } },
      }));
    }
    for (const r of d.revisions) {
      if (await getOptional(store, 'AgentRevision', ns, r.name)) continue;
      const rev: AgentRevision = {
        apiVersion: API_VERSION,
        kind: 'AgentRevision',
        metadata: {
          name: r.name,
          namespace: ns,
          labels: {
            [LABEL_TENANT]: tenant,
            [LABEL_DEPLOYMENT]: d.name,
            [LABEL_DEPLOYMENT_ID]: d.spec.deploymentId,
            [LABEL_REVISION_NUMBER]: String(r.spec.revisionNumber),
            [LABEL_LISTENER]: listenerId,
          },
          ownerReferences: [ownerReferenceTo(local)],
        },
        spec: { ...r.spec, sourceConfig: localSourceConfig(r.spec.sourceConfig) },
      };
      try {
        await store.create('AgentRevision', rev);
      } catch (err) {
        if (!(err instanceof AlreadyExistsError)) throw err;
      }
    }
  }
  // Deployments deleted on the control plane (also while this listener was away) go here too.
  for (const local of await ourDeployments(ctx, snap)) {
    const key = `${local.metadata.namespace}/${local.metadata.name}`;
    if (wanted.has(key) || local.metadata.deletionTimestamp) continue;
    await store.delete('AgentDeployment', local.metadata.namespace!, local.metadata.name).catch((err: unknown) => {
      if (!(err instanceof NotFoundError)) throw err;
    });
    log.info({ deployment_id: local.spec.deploymentId }, 'deployment deleted on the control plane; removing');
  }
}
