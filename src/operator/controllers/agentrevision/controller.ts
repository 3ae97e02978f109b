// The AgentRevision controller: drives one revision through build and start, and writes its status.
// get -> deletion guard -> observe -> decide -> act -> status.
import type { Logger } from '../../../lib/logger.ts';
import type { ResourceStore } from '../../../state/resources.ts';
import type { SecretStore } from '../../../state/secrets.ts';
import {
  idleTimeoutMinutesOf,
  RevisionPhase,
  runsImage,
  setCondition,
  type AgentDeployment,
  type AgentRevision,
  type AgentRevisionStatus,
} from '../../../resources/index.ts';
import { splitKey } from '../../controller-kit/informer.ts';
import type { ReconcileResult } from '../../controller-kit/controller.ts';
import type { BuildSpec, BuildStatus, Runtime, ServerSpec, ServerStatus } from '../../runtimes/types.ts';
import { pickTarget } from '../agentdeployment/decide.ts';
import { deploymentRef, phaseOf, sameJson, storeReader, views, type ResourceReader } from '../shared.ts';
import { phaseEvent, revisionConditions } from './conditions.ts';
import { noEvents, type EventRecorder } from '../../controller-kit/events.ts';
import { nextRevisionStatus, revisionNeeds, type RevisionFacts } from './decide.ts';

export type RevisionControllerDeps = {
  store: Pick<ResourceStore, 'get' | 'list' | 'updateStatus'> & Pick<SecretStore, 'getSecrets'>;
  /** Where the custom resources are read (default: the store itself). */
  reader?: ResourceReader;
  runtime: Runtime;
  logger: Logger;
  /** Where phase changes and failures are told (`kubectl describe`); default: nowhere. */
  events?: EventRecorder;
};

type Observed = {
  rev: AgentRevision;
  dep: AgentDeployment;
  isTarget: boolean;
  routed: boolean;
  keepServing: boolean;
  build?: BuildStatus;
  server?: ServerStatus;
  supported: RevisionFacts['supported'];
};

const NO_IMAGE_PUSHED_YET =
  'no image pushed yet: ask for a push token (POST /v2/deployments/{id}/push-token), push to its repository_url and ' +
  'PATCH source_revision_config.image_uri, as `langgraph deploy` does';

export function buildSpecOf(
  dep: AgentDeployment,
  rev: AgentRevision,
): BuildSpec | { invalid: string; nothingYet?: boolean } {
  if (rev.spec.source === 'internal_source') {
    const sha256 = rev.spec.sourceRevisionConfig.sourceTarballSha256;
    if (!sha256) {
      return {
        nothingYet: true,
        invalid:
          'no source tarball yet: upload one (POST /v2/deployments/{id}/upload-url, PUT the .tar.gz) and PATCH ' +
          'source_revision_config.source_tarball_path, as `langgraph deploy` does',
      };
    }
    return {
      ...deploymentRef(dep),
      revision: rev.metadata.name,
      repoUrl: '',
      repoRef: '',
      sourceArchive: { sha256 },
      graphConfigPath: rev.spec.sourceRevisionConfig.graphConfigPath || 'langgraph.json',
      installCommand: rev.spec.sourceConfig.installCommand ?? null,
      buildCommand: rev.spec.sourceConfig.buildCommand ?? null,
      tenantId: dep.spec.tenantId,
      integrationId: null,
    };
  }
  const repoUrl = rev.spec.sourceConfig.repoUrl;
  if (!repoUrl) return { invalid: 'source_config.repo_url is required to build from source' };
  return {
    ...deploymentRef(dep),
    revision: rev.metadata.name,
    repoUrl,
    repoRef: rev.spec.sourceRevisionConfig.repoRef || 'HEAD',
    graphConfigPath: rev.spec.sourceRevisionConfig.graphConfigPath || 'langgraph.json',
    installCommand: rev.spec.sourceConfig.installCommand ?? null,
    buildCommand: rev.spec.sourceConfig.buildCommand ?? null,
    tenantId: dep.spec.tenantId,
    integrationId: rev.spec.sourceConfig.integrationId ?? null,
  };
}

export function createRevisionReconciler({
  store,
  reader = storeReader(store),
  runtime,
  logger,
  events = noEvents,
}: RevisionControllerDeps) {
  const serverSpec = async (dep: AgentDeployment, rev: AgentRevision): Promise<ServerSpec> => {
    const ns = rev.metadata.namespace ?? 'default';
    const env = rev.spec.secretsName ? await store.getSecrets(ns, rev.spec.secretsName) : {};
    const build = buildSpecOf(dep, rev);
    const commitSha = rev.status?.repoCommitSha;
    return {
      ...(commitSha && !('invalid' in build) ? { builtFrom: { spec: build, commitSha } } : {}),
      ...deploymentRef(dep),
      revision: rev.metadata.name,
      graphConfigPath: rev.spec.sourceRevisionConfig.graphConfigPath || 'langgraph.json',
      env,
      tenantId: dep.spec.tenantId,
      access: rev.spec.sourceConfig.accessMode ?? 'api_key',
      proven: phaseOf(rev) === RevisionPhase.DEPLOYED,
      resourceSpec: rev.spec.sourceConfig.resourceSpec ?? null,
      // The deployment's current policy (its type may change without a new revision).
      idleTimeoutMinutes: idleTimeoutMinutesOf({
        deploymentType: dep.spec.sourceConfig.deploymentType,
        resourceSpec: rev.spec.sourceConfig.resourceSpec,
      }),
    };
  };

  async function observe(dep: AgentDeployment, rev: AgentRevision): Promise<Observed> {
    const revisions = await reader.revisionsOf(dep);
    const isTarget = pickTarget(views(revisions), dep.spec.targetRevisionName) === rev.metadata.name;
    const routedNow = runtime.routedRevision(deploymentRef(dep));
    const routed = routedNow === rev.metadata.name;
    const keepServing = routedNow === undefined && dep.status?.activeRevisionName === rev.metadata.name;
    let supported: RevisionFacts['supported'] = runtime.supports(rev.spec.source);
    const needs = revisionNeeds(phaseOf(rev), isTarget, routed, keepServing);
    let build: BuildStatus | undefined;
    let server: ServerStatus | undefined;
    if (supported.ok && needs.build && runsImage(rev.spec.source)) {
      // A prebuilt image has nothing to build (runtimes that cannot run images refuse it in supports()).
      if (rev.spec.sourceRevisionConfig.imageUri) build = { phase: 'Succeeded', commitSha: '' };
      else if (rev.spec.source === 'internal_docker') {
        // The deployment's first revision, made before its first push: skipped, as internal_source's before an upload.
        supported = { ok: false, nothingYet: true, message: NO_IMAGE_PUSHED_YET };
      } else supported = { ok: false, message: 'source_revision_config.image_uri is required for external_docker' };
    } else if (supported.ok && needs.build) {
      const spec = buildSpecOf(dep, rev);
      if ('invalid' in spec) supported = { ok: false, message: spec.invalid, nothingYet: spec.nothingYet };
      else {
        const ns = rev.metadata.namespace ?? 'default';
        const serverEnv = async () => (rev.spec.secretsName ? store.getSecrets(ns, rev.spec.secretsName) : {});
        build = await runtime.build(spec, { deployment: dep, revision: rev, serverEnv });
      }
    }
    if (supported.ok && needs.serve)
      server = await runtime.deploy(await serverSpec(dep, rev), { deployment: dep, revision: rev });
    return { rev, dep, isTarget, routed, keepServing, build, server, supported };
  }

  function desiredStatus(o: Observed): AgentRevisionStatus {
    const current = o.rev.status ?? {};
    const out = nextRevisionStatus(
      {
        status: phaseOf(o.rev),
        supported: o.supported,
        isTarget: o.isTarget,
        routed: o.routed,
        keepServing: o.keepServing,
        build: o.build,
        server: o.server,
      },
      current.statusMessage ?? '',
    );
    let conditions = current.conditions;
    // The server was asked about only when this revision should serve; then Ready tells whether it does.
    for (const c of revisionConditions(out.status, out.message, o.rev.metadata.generation, o.server)) {
      conditions = setCondition(conditions, c);
    }
    return {
      ...current,
      phase: out.status,
      statusMessage: out.message,
      // The image a runtime reports (a registry digest in a cluster) wins over the local runtime's git id.
      ...(out.commitSha
        ? {
            repoCommitSha: out.commitSha,
            image: (o.build?.phase === 'Succeeded' && o.build.image) || `git:${out.commitSha}`,
          }
        : {}),
      observedGeneration: o.rev.metadata.generation,
      conditions,
    };
  }

  return async function reconcile(key: string): Promise<ReconcileResult> {
    const { namespace, name } = splitKey(key);
    const rev = await reader.get('AgentRevision', namespace, name);
    if (!rev) return; // gone: the deployment controller already cleaned up its processes
    const dep = await reader.get('AgentDeployment', namespace, rev.spec.deploymentName);
    if (!dep || dep.metadata.deletionTimestamp) return; // the deployment controller cleans up everything

    const observed = await observe(dep, rev);
    const status = desiredStatus(observed);

    const needs = revisionNeeds(
      status.phase ?? RevisionPhase.CREATING,
      observed.isTarget,
      observed.routed,
      observed.keepServing,
    );
    if (needs.stop)
      await runtime.stop({ ...deploymentRef(dep), revision: rev.metadata.name }, { deployment: dep, revision: rev });

    if (!sameJson(status, rev.status ?? {})) {
      if (status.phase !== rev.status?.phase) {
        logger.info(
          { controller: 'agentrevision', key, from: phaseOf(rev), to: status.phase, message: status.statusMessage },
          'revision status',
        );
      }
      await store.updateStatus('AgentRevision', { ...rev, status });
      const event = phaseEvent(phaseOf(rev), status.phase ?? RevisionPhase.CREATING, status.statusMessage ?? '');
      if (event) events.record(rev, event);
    }
  };
}
