// A deployment's display name is unique per tenant: a label with its hash finds holders quickly, and the store's
// name claim decides races between processes.
import { createHash } from 'node:crypto';
import { ConflictError } from '../../../lib/errors.ts';
import { LABEL_TENANT, type AgentDeployment } from '../../../resources/index.ts';
import { AlreadyExistsError } from '../../../state/errors.ts';
import { LABEL_NAME_HASH, type DeploymentDeps } from './deps.ts';

export const nameHash = (name: string) => createHash('sha256').update(name).digest('hex').slice(0, 40);

function nameTaken(name: string): ConflictError {
  return new ConflictError(`A deployment named "${name}" already exists in this workspace.`);
}

export async function assertNameFree(
  { store, ns }: DeploymentDeps,
  tenant: string,
  name: string,
  exceptId?: string,
): Promise<void> {
  const { items } = await store.list('AgentDeployment', ns, {
    labelSelector: `${LABEL_TENANT}=${tenant},${LABEL_NAME_HASH}=${nameHash(name)}`,
  });
  // A deployment being deleted no longer holds its name (its claim is stale and gets taken over).
  if (
    items.some((d) => d.spec.displayName === name && d.spec.deploymentId !== exceptId && !d.metadata.deletionTimestamp)
  ) {
    throw nameTaken(name);
  }
}

/** Claims `name` for `dep` in the store (atomic across processes); a live holder -> 409. */
export async function claimName(
  { store, ns }: DeploymentDeps,
  tenant: string,
  name: string,
  dep: AgentDeployment,
): Promise<void> {
  try {
    await store.claimName(ns, tenant, name, { name: dep.metadata.name, uid: dep.metadata.uid! });
  } catch (err) {
    if (err instanceof AlreadyExistsError) throw nameTaken(name);
    throw err;
  }
}

/**
 * Drops `owner`'s claim on `name`. A failure only leaves the name reserved for this deployment until it is deleted
 * (the rename itself is done), so it is logged, not answered.
 */
export async function releaseNameQuietly(
  { store, ns, logger }: DeploymentDeps,
  tenant: string,
  name: string,
  owner: { name: string; uid: string },
) {
  await store
    .releaseName(ns, tenant, name, owner)
    .catch((err: unknown) => logger.warn({ err, deployment: owner.name, name }, 'releasing a name claim failed'));
}
