// Creating a deployment: every input check first, then the deployment, its name (and host) claim, secrets and
// first revision, all or nothing, within the workspace's deployment and revision quotas.
import { randomUUID } from 'node:crypto';
import {
  API_VERSION,
  LABEL_DEPLOYMENT_ID,
  LABEL_TENANT,
  deploymentName,
  revisionName,
  runsImage,
  secretsName,
  type AgentDeployment,
  type SourceConfig,
} from '../../../resources/index.ts';
import type { DeploymentCreate } from '../../../api/schemas/deployments.ts';
import type { Deployment } from '../../../api/schemas/deployment-views.ts';
import { integrationIssues } from '../integrations/issues.ts';
import { listenerIssues } from '../listeners/assignment.ts';
import { localRepoIssues } from '../repo-source.ts';
import {
  LABEL_NAME_HASH,
  SECRET_NAMES_ANNOTATION,
  withRevisionQuota,
  withTenantLock,
  type DeploymentDeps,
} from './deps.ts';
import {
  UPDATED_AT_ANNOTATION,
  secretReferencesFromApi,
  sourceConfigFromApi,
  sourceRevisionConfigFromApi,
} from './mapping.ts';
import { assertNameFree, claimName, nameHash } from './names.ts';
import { ensureRevision, putSecretSet, render } from './records.ts';
import { foreignImageProblem } from './own-images.ts';
import { BadRequestError } from '../../../lib/errors.ts';
import { hostOf, refuse } from './tenant-checks.ts';

export async function createDeployment(
  deps: DeploymentDeps,
  tenant: string,
  body: DeploymentCreate,
): Promise<Deployment> {
  const { store, checks } = deps;
  refuse(checks.policyIssues(body.source_config.resource_spec, body.source_config.custom_url));
  refuse(await checks.referenceIssues(tenant, body.source_config.resource_spec, body.secret_references));
  refuse(
    await integrationIssues(store, tenant, body.source_config.integration_id, body.source_config.repo_url, deps.github),
  );
  await listenerIssues(
    store,
    tenant,
    body.source_config.listener_id,
    body.source_config.listener_config?.k8s_namespace,
  );
  // A listener builds on its own machine, under its own --allow-local-repos.
  if (!body.source_config.listener_id) {
    const ref = body.source_revision_config.repo_ref;
    const anonymous = !body.source_config.integration_id;
    refuse(await localRepoIssues(body.source_config.repo_url, deps.localRepos, ref, { anonymous }));
  }
  const foreign = foreignImageProblem(deps.buildRegistry, undefined, body.source_revision_config.image_uri);
  if (foreign) throw new BadRequestError(foreign);
  const host = hostOf(body.source_config.custom_url);
  return withTenantLock(deps, tenant, () =>
    deps.quotas.admit(
      tenant,
      'deployments',
      () => deploymentCount(deps, tenant),
      () => withRevisionQuota(deps, tenant, () => createNow(deps, tenant, body, host)),
    ),
  );
}

/** The workspace's deployments that are not being deleted (the deployments quota counts these). */
async function deploymentCount({ store, ns }: DeploymentDeps, tenant: string): Promise<number> {
  const { items } = await store.list('AgentDeployment', ns, { labelSelector: `${LABEL_TENANT}=${tenant}` });
  return items.filter((d) => d.spec.tenantId === tenant && !d.metadata.deletionTimestamp).length;
}

async function createNow(
  deps: DeploymentDeps,
  tenant: string,
  body: DeploymentCreate,
  host: string | undefined,
): Promise<Deployment> {
  const { store, ns, logger, checks } = deps;
  await assertNameFree(deps, tenant, body.name);
  if (host) await checks.assertHostFree(host);
  const id = randomUUID();
  const name = deploymentName(id);
  const sourceConfig: SourceConfig = {
    deploymentType: 'dev',
    buildOnPush: false,
    ...sourceConfigFromApi(body.source_config),
  };
  const src = sourceRevisionConfigFromApi(body.source_revision_config);
  const now = new Date().toISOString();
  const input: AgentDeployment = {
    apiVersion: API_VERSION,
    kind: 'AgentDeployment',
    metadata: {
      name,
      namespace: ns,
      labels: { [LABEL_TENANT]: tenant, [LABEL_DEPLOYMENT_ID]: id, [LABEL_NAME_HASH]: nameHash(body.name) },
      annotations: {
        [UPDATED_AT_ANNOTATION]: now,
        [SECRET_NAMES_ANNOTATION]: body.secrets.map((x) => x.name).join(','),
      },
    },
    spec: {
      deploymentId: id,
      tenantId: tenant,
      displayName: body.name,
      source: body.source,
      sourceConfig,
      sourceRevisionConfig: {
        repoRef: src.repoRef ?? null,
        graphConfigPath: src.graphConfigPath ?? (runsImage(body.source) ? null : 'langgraph.json'),
        imageUri: src.imageUri ?? null,
      },
      secretsName: body.secrets.length ? secretsName(name, 1) : null,
      secretReferences: secretReferencesFromApi(body.secret_references),
      revisionCounter: 1,
      targetRevisionName: revisionName(name, 1),
    },
  };
  const dep = await store.create('AgentDeployment', input);
  // Compensation: any failure below removes the deployment, and with it (owner GC) its name claim, secrets and
  // revision. The claim comes first: another process creating the same name at once loses here.
  try {
    await claimName(deps, tenant, body.name, dep);
    if (host) await checks.claimHost(host, dep);
    if (body.secrets.length) await putSecretSet(deps, dep, 1, body.secrets);
    await ensureRevision(deps, dep);
  } catch (err) {
    await store
      .delete('AgentDeployment', ns, name)
      .catch((e: unknown) => logger.error({ err: e, deployment: name }, 'compensating delete failed'));
    throw err;
  }
  logger.info({ deployment_id: id, tenant }, 'deployment created');
  return render(deps, dep);
}
