// Deployment name claims and custom host claims in the cluster: a ConfigMap per (tenant, name) or per host, owned by
// the AgentDeployment holding it. ConfigMaps because the control plane's Role already manages them (revision logs):
// no new permission.
import type { V1ConfigMap } from '@kubernetes/client-node';
import { NotFoundError } from '../../lib/errors.ts';
import { API_VERSION } from '../../resources/index.ts';
import {
  claimObjectName,
  hostClaimObjectName,
  type HostClaim,
  type HostClaimStore,
  type NameClaim,
  type NameClaimOwner,
  type NameClaimStore,
} from '../claims.ts';
import { AlreadyExistsError, StaleResourceVersionError } from '../errors.ts';
import type { ResourceStore } from '../resources.ts';
import { call, type KubeContext } from './client.ts';

/** On name-claim ConfigMaps: the AgentDeployment holding the name (its uid is in the ownerReference). */
const LABEL_NAME_CLAIM_OF = 'agentplane.dev/name-claim-of';
/** On custom-host claim ConfigMaps: the AgentDeployment holding the host. */
const LABEL_HOST_CLAIM_OF = 'agentplane.dev/host-claim-of';

export function kubernetesClaims(
  k: KubeContext,
  resources: Pick<ResourceStore, 'get'>,
): NameClaimStore & HostClaimStore {
  function claimBody(
    namespace: string,
    objectName: string,
    labelKey: string,
    data: Record<string, string>,
    owner: NameClaimOwner,
    resourceVersion?: string,
  ): V1ConfigMap {
    return {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: objectName,
        namespace,
        resourceVersion,
        labels: { [labelKey]: owner.name },
        ownerReferences: [{ apiVersion: API_VERSION, kind: 'AgentDeployment', name: owner.name, uid: owner.uid }],
      },
      data,
    };
  }

  /** The deployment a claim names still exists (same uid) and is not being deleted. */
  async function holds(namespace: string, holder: { name: string; uid: string }): Promise<boolean> {
    try {
      const dep = await resources.get('AgentDeployment', namespace, holder.name);
      return dep.metadata.uid === holder.uid && !dep.metadata.deletionTimestamp;
    } catch (err) {
      if (err instanceof NotFoundError) return false;
      throw err;
    }
  }

  /** Creates the claim ConfigMap `objectName` for `owner`, or takes over a stale one (see NameClaimStore). */
  async function claim(
    namespace: string,
    objectName: string,
    labelKey: string,
    data: Record<string, string>,
    owner: NameClaimOwner,
    what: string,
  ) {
    for (let attempt = 0; attempt < 10; attempt++) {
      try {
        await call(() =>
          k.core.createNamespacedConfigMap({
            namespace,
            body: claimBody(namespace, objectName, labelKey, data, owner),
          }),
        );
        return;
      } catch (err) {
        if (!(err instanceof AlreadyExistsError)) throw err;
      }
      let cur: V1ConfigMap;
      try {
        cur = await call(() => k.core.readNamespacedConfigMap({ namespace, name: objectName }));
      } catch (err) {
        if (err instanceof NotFoundError) continue; // released meanwhile: create again
        throw err;
      }
      const holder = cur.metadata?.ownerReferences?.find((o) => o.kind === 'AgentDeployment');
      if (holder?.uid === owner.uid) return;
      if (holder && (await holds(namespace, holder))) {
        throw new AlreadyExistsError(`${what} is held by AgentDeployment "${holder.name}"`);
      }
      // Stale (its deployment is gone or being deleted; garbage collection may lag): take it over, but only if
      // nobody changed it since it was read. Of two processes doing this at once, one gets 409 and looks again.
      try {
        await call(() =>
          k.core.replaceNamespacedConfigMap({
            namespace,
            name: objectName,
            body: claimBody(namespace, objectName, labelKey, data, owner, cur.metadata!.resourceVersion),
          }),
        );
        k.log.info({ claim: objectName, from: holder?.name, to: owner.name }, 'took over a stale claim');
        return;
      } catch (err) {
        if (!(err instanceof StaleResourceVersionError || err instanceof NotFoundError)) throw err;
      }
    }
    throw new AlreadyExistsError(`${what} is contended; try again`);
  }

  /** Deletes the claim ConfigMap if `owner` holds it, never one another deployment took over meanwhile. */
  async function release(namespace: string, objectName: string, owner: NameClaimOwner): Promise<void> {
    let cm: V1ConfigMap;
    try {
      cm = await call(() => k.core.readNamespacedConfigMap({ namespace, name: objectName }));
    } catch (err) {
      if (err instanceof NotFoundError) return;
      throw err;
    }
    const m = cm.metadata!;
    if (!m.ownerReferences?.some((o) => o.uid === owner.uid)) return;
    try {
      await call(() =>
        k.core.deleteNamespacedConfigMap({
          namespace,
          name: objectName,
          body: { preconditions: { uid: m.uid, resourceVersion: m.resourceVersion } },
        }),
      );
    } catch (err) {
      if (!(err instanceof NotFoundError || err instanceof StaleResourceVersionError)) throw err;
    }
  }

  return {
    async claimName(namespace: string, tenant: string, name: string, owner: NameClaimOwner): Promise<void> {
      await claim(
        namespace,
        claimObjectName(tenant, name),
        LABEL_NAME_CLAIM_OF,
        { tenant, name },
        owner,
        `the name "${name}"`,
      );
    },

    async releaseName(namespace: string, tenant: string, name: string, owner: NameClaimOwner): Promise<void> {
      await release(namespace, claimObjectName(tenant, name), owner);
    },

    async listNameClaims(namespace: string): Promise<NameClaim[]> {
      const res = await call(() => k.core.listNamespacedConfigMap({ namespace, labelSelector: LABEL_NAME_CLAIM_OF }));
      return res.items.map((cm) => {
        const o = cm.metadata?.ownerReferences?.find((r) => r.kind === 'AgentDeployment');
        return {
          tenant: cm.data?.tenant ?? '',
          name: cm.data?.name ?? '',
          owner: { name: o?.name ?? '', uid: o?.uid ?? '' },
        };
      });
    },

    // Custom hosts: like names, but shared by every tenant.
    async claimHost(namespace: string, host: string, owner: NameClaimOwner): Promise<void> {
      const key = host.toLowerCase();
      await claim(namespace, hostClaimObjectName(key), LABEL_HOST_CLAIM_OF, { host: key }, owner, `the host "${key}"`);
    },

    async releaseHost(namespace: string, host: string, owner: NameClaimOwner): Promise<void> {
      await release(namespace, hostClaimObjectName(host), owner);
    },

    async hostHolder(namespace: string, host: string): Promise<NameClaimOwner | undefined> {
      let cm: V1ConfigMap;
      try {
        cm = await call(() => k.core.readNamespacedConfigMap({ namespace, name: hostClaimObjectName(host) }));
      } catch (err) {
        if (err instanceof NotFoundError) return undefined;
        throw err;
      }
      const holder = cm.metadata?.ownerReferences?.find((o) => o.kind === 'AgentDeployment');
      return holder && (await holds(namespace, holder)) ? { name: holder.name, uid: holder.uid } : undefined;
    },

    async listHostClaims(namespace: string): Promise<HostClaim[]> {
      const res = await call(() => k.core.listNamespacedConfigMap({ namespace, labelSelector: LABEL_HOST_CLAIM_OF }));
      return res.items.map((cm) => {
        const o = cm.metadata?.ownerReferences?.find((r) => r.kind === 'AgentDeployment');
        return { host: cm.data?.host ?? '', owner: { name: o?.name ?? '', uid: o?.uid ?? '' } };
      });
    },
  };
}
