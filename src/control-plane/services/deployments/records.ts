// Reading and writing one tenant's deployment, its revisions and its secret sets; another tenant's deployment is
// answered exactly like a missing one.
import { ConflictError, NotFoundError } from '../../../lib/errors.ts';
import {
  LABEL_DEPLOYMENT,
  deploymentName,
  isUuid,
  latestRevisionName,
  makeRevision,
  RevisionPhase,
  secretsName,
  type AgentDeployment,
  type AgentRevision,
} from '../../../resources/index.ts';
import type { Deployment } from '../../../api/schemas/deployment-views.ts';
import { AlreadyExistsError, StaleResourceVersionError } from '../../../state/errors.ts';
import { waitingMessage } from '../listeners/assignment.ts';
import { SECRET_NAMES_ANNOTATION, type DeploymentDeps } from './deps.ts';
import { UPDATED_AT_ANNOTATION, toApiDeployment } from './mapping.ts';

export function notFound(id: string): NotFoundError {
  return new NotFoundError(`Deployment ID ${id} not found.`);
}

export async function requireDeployment(
  { store, ns }: DeploymentDeps,
  tenant: string,
  id: string,
): Promise<AgentDeployment> {
  if (!isUuid(id)) throw notFound(id);
  try {
    const dep = await store.get('AgentDeployment', ns, deploymentName(id));
    if (dep.spec.tenantId !== tenant) throw notFound(id);
    return dep;
  } catch (err) {
    if (err instanceof NotFoundError) throw notFound(id);
    throw err;
  }
}

/** The deployment's revisions, newest first. */
export async function revisionsOf({ store, ns }: DeploymentDeps, dep: AgentDeployment): Promise<AgentRevision[]> {
  const { items } = await store.list('AgentRevision', ns, {
    labelSelector: `${LABEL_DEPLOYMENT}=${dep.metadata.name}`,
  });
  return items.sort((a, b) => b.spec.revisionNumber - a.spec.revisionNumber);
}

/** Whether a revision of `dep` ever served (the runtime keeps status.activeRevisionName once it is set). */
export async function hasServed(deps: DeploymentDeps, dep: AgentDeployment): Promise<boolean> {
  if (dep.status?.activeRevisionName) return true;
  return (await revisionsOf(deps, dep)).some((r) => r.status?.phase === RevisionPhase.DEPLOYED);
}

async function getOptional(
  { store, ns }: DeploymentDeps,
  name: string | undefined,
): Promise<AgentRevision | undefined> {
  if (!name) return undefined;
  try {
    return await store.get('AgentRevision', ns, name);
  } catch (err) {
    if (err instanceof NotFoundError) return undefined;
    throw err;
  }
}

/** Secret names are not secret: kept in an annotation so rendering needs no Secret read (older objects: read). */
async function secretNamesOf({ store, ns }: DeploymentDeps, dep: AgentDeployment): Promise<string[]> {
  if (!dep.spec.secretsName) return [];
  const ann = dep.metadata.annotations?.[SECRET_NAMES_ANNOTATION];
  if (ann !== undefined) return ann ? ann.split(',') : [];
  return store.secretNames(ns, dep.spec.secretsName).catch(() => []);
}

/** The API view of `dep`; `revisions` (by name), when given, saves a read per revision. */
export async function render(
  deps: DeploymentDeps,
  dep: AgentDeployment,
  revisions?: Map<string, AgentRevision>,
): Promise<Deployment> {
  const rev = (name: string | undefined) =>
    revisions ? Promise.resolve(name ? revisions.get(name) : undefined) : getOptional(deps, name);
  const [latestRevision, activeRevision, targetRevision, secretNames] = await Promise.all([
    rev(latestRevisionName(dep)),
    rev(dep.status?.activeRevisionName),
    rev(dep.spec.targetRevisionName),
    secretNamesOf(deps, dep),
  ]);
  return toApiDeployment(dep, {
    secretNames: [...secretNames].sort(),
    latestRevision,
    activeRevision,
    targetRevision,
  });
}

/** Creates revision n of `dep` ("ensure": an operator may have made it already). */
export async function ensureRevision({ store, ns }: DeploymentDeps, dep: AgentDeployment): Promise<AgentRevision> {
  const rev = makeRevision(dep);
  try {
    const created = await store.create('AgentRevision', rev);
    const listenerId = dep.spec.sourceConfig.listenerId;
    if (!listenerId) return created;
    // Nobody here builds it: say who will, until that listener reports on it.
    return await store.updateStatus('AgentRevision', {
      ...created,
      status: { phase: RevisionPhase.QUEUED, statusMessage: waitingMessage(listenerId) },
    });
  } catch (err) {
    if (err instanceof AlreadyExistsError) return store.get('AgentRevision', ns, rev.metadata.name);
    throw err;
  }
}

/** Re-reads and re-applies `change` when someone else (the operator) wrote the deployment meanwhile. */
export async function updateDeployment(
  deps: DeploymentDeps,
  tenant: string,
  id: string,
  change: (dep: AgentDeployment) => Promise<AgentDeployment | undefined>,
): Promise<AgentDeployment> {
  for (let attempt = 0; ; attempt++) {
    const dep = await requireDeployment(deps, tenant, id);
    if (dep.metadata.deletionTimestamp) throw new ConflictError(`Deployment ID ${id} is being deleted.`);
    const next = await change(structuredClone(dep));
    if (!next) return dep;
    next.metadata.annotations = { ...next.metadata.annotations, [UPDATED_AT_ANNOTATION]: new Date().toISOString() };
    try {
      return await deps.store.update('AgentDeployment', next);
    } catch (err) {
      if (err instanceof StaleResourceVersionError && attempt < 10) continue;
      throw err;
    }
  }
}

/** Stores a new immutable secret set for revision n; returns its name. */
export async function putSecretSet(
  { store, ns }: DeploymentDeps,
  dep: AgentDeployment,
  n: number,
  secrets: { name: string; value: string }[],
) {
  const name = secretsName(dep.metadata.name, n);
  const owner = { kind: 'AgentDeployment' as const, name: dep.metadata.name, uid: dep.metadata.uid! };
  try {
    await store.putSecrets(ns, name, owner, Object.fromEntries(secrets.map((s) => [s.name, s.value])));
  } catch (err) {
    // A retry of the same revision number after a lost race: replace the orphaned set.
    if (!(err instanceof AlreadyExistsError)) throw err;
    await store.deleteSecrets(ns, name);
    await store.putSecrets(ns, name, owner, Object.fromEntries(secrets.map((s) => [s.name, s.value])));
  }
  return name;
}
