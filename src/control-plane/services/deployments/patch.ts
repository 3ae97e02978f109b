// Changing a deployment: renames and custom hosts move their claims (new one first, old one released after the
// write), and changes to what a build or pod gets make a new revision within the revision quota.
import { BadRequestError, ValidationError } from '../../../lib/errors.ts';
import {
  revisionName,
  type AgentDeployment,
  type SourceConfig,
  type SourceRevisionConfig,
} from '../../../resources/index.ts';
import { NO_PUSH_REGISTRY } from '../source-uploads/messages.ts';
import type { DeploymentPatch } from '../../../api/schemas/deployments.ts';
import type { Deployment } from '../../../api/schemas/deployment-views.ts';
import { integrationIssues } from '../integrations/issues.ts';
import { localRepoIssues } from '../repo-source.ts';
import {
  LABEL_NAME_HASH,
  SECRET_NAMES_ANNOTATION,
  withRevisionQuota,
  withTenantLock,
  type DeploymentDeps,
} from './deps.ts';
import {
  resourceSpecFromApi,
  secretReferencesFromApi,
  sourceConfigFromApi,
  sourceRevisionConfigFromApi,
} from './mapping.ts';
import { assertNameFree, claimName, nameHash, releaseNameQuietly } from './names.ts';
import { ensureRevision, hasServed, putSecretSet, render, requireDeployment, updateDeployment } from './records.ts';
import { hostOf, refuse } from './tenant-checks.ts';
import { foreignImageProblem } from './own-images.ts';

/**
 * internal_source: the revision asked for names an upload of this deployment, resolved here to its bytes' hash (the
 * revision keeps the hash, so a rebuild extracts the same bytes). Other sources take no tarball.
 */
async function tarballChange(
  deps: DeploymentDeps,
  tenant: string,
  current: AgentDeployment,
  body: DeploymentPatch,
  srcChange: Partial<SourceRevisionConfig>,
): Promise<void> {
  const source = current.spec.source;
  if (body.revision_source !== undefined && body.revision_source !== source) {
    throw new BadRequestError(
      body.revision_source === 'internal_docker' && !deps.pushTokens
        ? NO_PUSH_REGISTRY
        : `revision_source ${body.revision_source} does not match the deployment's source ${source}.`,
    );
  }
  const path = srcChange.sourceTarballPath;
  if (path === undefined || path === null) {
    if (path === null && source === 'internal_source') {
      throw new BadRequestError('source_tarball_path cannot be removed from an internal_source deployment.');
    }
    return;
  }
  if (source !== 'internal_source') {
    throw new BadRequestError(`source_tarball_path is for source internal_source; this deployment's is ${source}.`);
  }
  if (!deps.sourceUploads) throw new BadRequestError('This control plane stores no source uploads.');
  const { sha256 } = await deps.sourceUploads.resolve(tenant, current.spec.deploymentId, path);
  srcChange.sourceTarballSha256 = sha256;
}

const IMMUTABLE_SOURCE_CONFIG = {
  deployment_type: 'deploymentType',
  listener_id: 'listenerId',
} as const;

/** Where the code comes from: changeable until a revision has served (a failed first build can be fixed). */
const SOURCE_FIELDS = {
  integration_id: 'integrationId',
  repo_url: 'repoUrl',
} as const;

type Owner = { name: string; uid: string };

export async function patchDeployment(
  deps: DeploymentDeps,
  tenant: string,
  id: string,
  body: DeploymentPatch,
): Promise<Deployment> {
  const { store, ns, logger, checks } = deps;
  const current = await requireDeployment(deps, tenant, id);
  if (body.source !== undefined && body.source !== current.spec.source) {
    throw new BadRequestError('source is immutable and cannot be changed.');
  }
  const changes = body.source_config ? sourceConfigFromApi(body.source_config) : {};
  const changed = (specKey: keyof SourceConfig) => {
    const v = changes[specKey];
    return v !== undefined && (v ?? null) !== (current.spec.sourceConfig[specKey] ?? null);
  };
  for (const [apiKey, specKey] of Object.entries(IMMUTABLE_SOURCE_CONFIG)) {
    if (changed(specKey)) {
      throw new BadRequestError(
        `source_config.${apiKey} is immutable and cannot be changed: delete the deployment and create it again.`,
      );
    }
  }
  const sourceChanged = Object.entries(SOURCE_FIELDS).filter(([, specKey]) => changed(specKey));
  if (sourceChanged.length) {
    if (body.source_config?.repo_url === null && current.spec.source === 'github') {
      refuse([{ loc: ['body', 'source_config', 'repo_url'], msg: 'required for source github', type: 'value_error' }]);
    }
    if (await hasServed(deps, current)) {
      const fields = sourceChanged.map(([apiKey]) => `source_config.${apiKey}`).join(' and ');
      throw new BadRequestError(
        `${fields} cannot be changed once a revision of the deployment has been deployed: delete the deployment ` +
          'and create it again with the new source.',
      );
    }
    const repoUrl = changes.repoUrl ?? current.spec.sourceConfig.repoUrl;
    const integrationId =
      changes.integrationId !== undefined ? changes.integrationId : current.spec.sourceConfig.integrationId;
    refuse(await integrationIssues(store, tenant, integrationId, repoUrl, deps.github));
  }
  // A new repository or ref is checked as at create: a ref the local repository lacks is a 422 now.
  const newRef = body.source_revision_config?.repo_ref;
  if ((sourceChanged.length || newRef) && !current.spec.sourceConfig.listenerId) {
    const repoUrl = changes.repoUrl ?? current.spec.sourceConfig.repoUrl;
    const ref = newRef ?? current.spec.sourceRevisionConfig.repoRef;
    const anonymous = !(changes.integrationId !== undefined
      ? changes.integrationId
      : current.spec.sourceConfig.integrationId);
    refuse(await localRepoIssues(repoUrl, deps.localRepos, ref, { anonymous }));
  }
  refuse(checks.policyIssues(body.source_config?.resource_spec, body.source_config?.custom_url));
  refuse(await checks.referenceIssues(tenant, body.source_config?.resource_spec, body.secret_references));
  const srcChange = body.source_revision_config ? sourceRevisionConfigFromApi(body.source_revision_config) : {};
  await tarballChange(deps, tenant, current, body, srcChange);
  const foreign = foreignImageProblem(
    deps.buildRegistry,
    current.spec.deploymentId,
    srcChange.imageUri,
    current.spec.source === 'internal_docker',
  );
  if (foreign) throw new BadRequestError(foreign);
  const secrets = body.secrets?.length ? body.secrets : undefined;
  // source_revision_config present, even unchanged or empty, asks for a new revision (a rebuild of the ref).
  const newRevision =
    sourceChanged.length > 0 ||
    body.source_revision_config != null ||
    body.source_config?.resource_spec !== undefined ||
    (body.source_config?.access_mode !== undefined &&
      body.source_config.access_mode !== (current.spec.sourceConfig.accessMode ?? 'api_key')) ||
    secrets !== undefined ||
    body.secret_references !== undefined;

  const apply = async (): Promise<AgentDeployment> => {
    let secretSet: string | undefined;
    let claimed: { oldName: string; newName: string; owner: Owner } | undefined;
    let hostMoved: { oldHost?: string; newHost?: string; owner: Owner } | undefined;
    try {
      const updated = await updateDeployment(deps, tenant, id, async (dep) => {
        claimed = undefined; // a retry starts from the re-read deployment
        hostMoved = undefined;
        const s = dep.spec;
        if (body.source_config?.custom_url !== undefined) {
          const oldHost = hostOf(s.sourceConfig.customUrl);
          const newHost = hostOf(body.source_config.custom_url);
          if (newHost !== oldHost) {
            const owner = { name: dep.metadata.name, uid: dep.metadata.uid! };
            // Like a rename: claim the new host before the deployment carries it, release the old one after.
            if (newHost) {
              await checks.assertHostFree(newHost, dep.metadata.uid);
              await checks.claimHost(newHost, dep);
            }
            hostMoved = { oldHost, newHost, owner };
          }
        }
        if (body.name !== undefined && body.name !== s.displayName) {
          await assertNameFree(deps, tenant, body.name, id);
          // Claim the new name before the deployment carries it; the old claim goes once the rename is written.
          await claimName(deps, tenant, body.name, dep);
          claimed = {
            oldName: s.displayName,
            newName: body.name,
            owner: { name: dep.metadata.name, uid: dep.metadata.uid! },
          };
          s.displayName = body.name;
          dep.metadata.labels = { ...dep.metadata.labels, [LABEL_NAME_HASH]: nameHash(body.name) };
        }
        // Key by key; resource_spec (when given) replaces the old one whole.
        s.sourceConfig = { ...s.sourceConfig, ...changes };
        if (body.source_config?.resource_spec !== undefined) {
          s.sourceConfig.resourceSpec = resourceSpecFromApi(body.source_config.resource_spec) ?? null;
        }
        s.sourceRevisionConfig = { ...s.sourceRevisionConfig, ...srcChange };
        const ref = s.sourceRevisionConfig.repoRef;
        if (s.sourceConfig.buildOnPush && ref?.startsWith('refs/tags/')) {
          throw new ValidationError('build_on_push must be false when repo_ref is a tag', [
            {
              loc: ['body', 'source_config', 'build_on_push'],
              msg: 'must be false when repo_ref is a tag (refs/tags/...)',
              type: 'value_error',
            },
          ]);
        }
        if (body.secret_references !== undefined) s.secretReferences = secretReferencesFromApi(body.secret_references);
        if (newRevision) {
          s.revisionCounter += 1;
          s.targetRevisionName = revisionName(dep.metadata.name, s.revisionCounter);
          if (secrets) {
            if (secretSet) await store.deleteSecrets(ns, secretSet);
            secretSet = await putSecretSet(deps, dep, s.revisionCounter, secrets);
            s.secretsName = secretSet;
            dep.metadata.annotations = {
              ...dep.metadata.annotations,
              [SECRET_NAMES_ANNOTATION]: secrets.map((x) => x.name).join(','),
            };
          }
        }
        return dep;
      });
      if (claimed) await releaseNameQuietly(deps, tenant, claimed.oldName, claimed.owner);
      if (hostMoved?.oldHost) await checks.releaseHostQuietly(hostMoved.oldHost, hostMoved.owner);
      return updated;
    } catch (err) {
      if (secretSet) await store.deleteSecrets(ns, secretSet).catch(() => undefined);
      if (claimed) await releaseNameQuietly(deps, tenant, claimed.newName, claimed.owner);
      if (hostMoved?.newHost) await checks.releaseHostQuietly(hostMoved.newHost, hostMoved.owner);
      throw err;
    }
  };

  const applied = body.name !== undefined ? () => withTenantLock(deps, tenant, apply) : apply;
  if (!newRevision) return render(deps, await applied());
  const dep = await withRevisionQuota(deps, tenant, applied);
  await ensureRevision(deps, dep);
  logger.info({ deployment_id: id, revision: dep.spec.targetRevisionName }, 'revision created');
  return render(deps, dep);
}
