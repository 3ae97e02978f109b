// The build Job of a source revision, in three steps that share emptyDirs:
//   clone (init): clones the repository at repo_ref (or, for an uploaded tarball, downloads it from the control plane
//     with the build's fetch token, checks its SHA-256 against the revision's and extracts it) and writes the
//     generated Dockerfile (with langgraph.json's dockerfile_lines added);
//   build (init): rootless, daemonless BuildKit builds the image into an OCI layout on an emptyDir, with no
//     registry credential (only an optional pull-only one): the Dockerfile's RUN steps execute here, and with
//     --oci-worker-no-process-sandbox they share this container's PID namespace, so anything this container holds
//     (files, environment, memory of buildctl) must be assumed readable by the repository's code;
//   push: skopeo copies the layout to the registry. Only this container mounts the push secret, and it starts after
//     the build container has exited, so no process of the build is alive while the credential is mounted.
// The push container's termination message carries {"commit","digest"}, read from the Pod's status after the Job
// succeeds. The containers' scripts are in build-scripts.ts.
import type { V1Job, V1Secret } from '@kubernetes/client-node';
import { fitName, imageRepositoryOf } from '../../../resources/names.ts';
import { credentialFiles } from '../../../git/clone-auth.ts';
import type { GitCredential } from '../../../git/credentials.ts';
import type { KubernetesRuntimeConfig } from './config.ts';
import { agentDockerfile, DOCKERFILE_LINES_SCRIPT, safeConfigPath } from './dockerfile.ts';
import { ANNOTATION_REVISION, childMeta, LABEL_REVISION, type Target } from './labels.ts';
import {
  BUILD_SCRIPT,
  CLONE_SCRIPT,
  FETCH_JS,
  FETCH_SCRIPT,
  GIT_CREDENTIALS_DIR,
  PUSH_SCRIPT,
} from './build-scripts.ts';

export type BuildInput = {
  /** AgentRevision name (`<deployment>-r<n>`); also the Job name and the image tag. */
  revision: string;
  repoUrl: string;
  repoRef: string;
  graphConfigPath: string;
  installCommand?: string | null;
  buildCommand?: string | null;
  /** The tenant's git credentials Secret this build may use (see src/git/tenant-secret.ts); none: anonymous clone. */
  gitCredentialsSecret?: string;
  /**
   * internal_source: the tarball to download instead of a clone (its URL on the control plane and SHA-256); the
   * fetch token is in the Secret sourceTokenSecretName(revision), made once the Job exists.
   */
  sourceArchive?: { url: string; sha256: string };
};

export const BUILD_CONTAINER = 'build';
export const CLONE_CONTAINER = 'clone';
export const PUSH_CONTAINER = 'push';
/** Where the push credential is mounted, in the push container only. */
export const PUSH_AUTH_DIR = '/var/run/agentplane/push';

/** `<revision>-build`, the revision cut (with a hash) so the name stays a valid label value (its pods' job-name). */
export function buildJobName(revision: string): string {
  return `${fitName(revision, 57)}-build`;
}

/** The short-lived Secret of one build's git credential (an integration's: a minted GitHub token or a stored one). */
export function buildCredentialSecretName(revision: string): string {
  return `${buildJobName(revision)}-git`;
}

/**
 * The build's own git credential Secret, owned by its Job (garbage-collected with it, deleted as soon as the build
 * ends). Its keys are the files the clone step reads (credentialFiles).
 */
export function makeBuildCredentialSecret(job: V1Job, credential: GitCredential): V1Secret {
  return jobSecret(job, buildCredentialSecretName, credentialFiles(credential));
}

/** A Secret of the Job's own, named after its revision, that goes with it. */
function jobSecret(job: V1Job, nameOf: (revision: string) => string, files: Record<string, string>): V1Secret {
  const meta = job.metadata!;
  const data = Object.fromEntries(Object.entries(files).map(([k, v]) => [k, Buffer.from(v).toString('base64')]));
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: {
      name: nameOf(meta.annotations?.[ANNOTATION_REVISION] ?? meta.name!.replace(/-build$/, '')),
      namespace: meta.namespace,
      labels: { ...meta.labels },
      ownerReferences: [
        {
          apiVersion: 'batch/v1',
          kind: 'Job',
          name: meta.name!,
          uid: meta.uid!,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    immutable: true,
    data,
  };
}

/** The short-lived Secret holding one tarball build's fetch token, owned by its Job. */
export function buildSourceTokenSecretName(revision: string): string {
  return `${buildJobName(revision)}-source`;
}

/** Where the fetch token is mounted, in the clone (fetch) container only. */
export const SOURCE_TOKEN_DIR = '/var/run/agentplane/source';

/** The fetch token's Secret, owned by its Job like the git credential one (gone with it, deleted when it ends). */
export function makeSourceTokenSecret(job: V1Job, token: string): V1Secret {
  return jobSecret(job, buildSourceTokenSecretName, { token });
}

/** The tag a revision is pushed under; the recorded image is `<repository>@<digest>`. */
export function imageRepository(config: KubernetesRuntimeConfig, target: Target): string {
  return imageRepositoryOf(config.registry, target.name);
}

export function makeBuildJob(target: Target, build: BuildInput, config: KubernetesRuntimeConfig): V1Job {
  const configPath = safeConfigPath(build.graphConfigPath);
  const archive = build.sourceArchive;
  const dockerfile = agentDockerfile({
    baseImage: config.baseImage,
    graphConfigPath: configPath,
    installCommand: build.installCommand,
    buildCommand: build.buildCommand,
  });
  const revisionLabel = { [LABEL_REVISION]: build.revision };
  const meta = childMeta(target, buildJobName(build.revision), 'build', revisionLabel);
  const image = `${imageRepository(config, target)}:${build.revision}`;
  const resources = { requests: { ...config.buildResources.requests }, limits: { ...config.buildResources.limits } };
  const restricted = {
    allowPrivilegeEscalation: false,
    runAsNonRoot: true,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  };
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { ...meta, annotations: { [ANNOTATION_REVISION]: build.revision } },
    spec: {
      // A failed build is reported, not retried: the user fixes the repo and makes a new revision. A pod lost to a
      // disruption (node drain, preemption) does not count: the Job starts another.
      backoffLimit: 0,
      // status is required before Kubernetes 1.29 (defaulted to True after).
      podFailurePolicy: {
        rules: [{ action: 'Ignore', onPodConditions: [{ type: 'DisruptionTarget', status: 'True' }] }],
      },
      activeDeadlineSeconds: config.buildTimeoutSeconds,
      // The result is recorded on the revision (and the log copied) long before this: the finished Job, its pod
      // and its credential Secret (owned by the Job) go.
      ttlSecondsAfterFinished: config.buildJobTtlSeconds,
      template: {
        metadata: {
          labels: meta.labels,
          // Servers before Kubernetes 1.30 drop securityContext.appArmorProfile and read only this annotation (1.30+
          // accept both when they agree).
          annotations: { [`container.apparmor.security.beta.kubernetes.io/${BUILD_CONTAINER}`]: 'unconfined' },
        },
        spec: {
          restartPolicy: 'Never',
          automountServiceAccountToken: false,
          // The steps run what the repository says: no variables naming the namespace's other Services.
          enableServiceLinks: false,
          // The clone, build and push images may live in a private registry (the build's own pull secret is for
          // BuildKit's base-image pulls, not the kubelet's).
          ...(config.imagePullSecrets.length
            ? { imagePullSecrets: [...new Set(config.imagePullSecrets)].map((name) => ({ name })) }
            : {}),
          securityContext: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000 },
          initContainers: [
            {
              name: CLONE_CONTAINER,
              image: config.gitImage,
              command: ['sh', '-c', archive ? FETCH_SCRIPT : CLONE_SCRIPT],
              env: [
                ...(archive
                  ? [
                      { name: 'SOURCE_URL', value: archive.url },
                      { name: 'SOURCE_SHA256', value: archive.sha256 },
                      { name: 'SOURCE_TOKEN_FILE', value: `${SOURCE_TOKEN_DIR}/token` },
                      { name: 'FETCH_JS', value: FETCH_JS },
                    ]
                  : [
                      { name: 'REPO_URL', value: build.repoUrl },
                      { name: 'REPO_REF', value: build.repoRef },
                    ]),
                { name: 'GRAPH_CONFIG', value: configPath },
                { name: 'DOCKERFILE', value: dockerfile },
                { name: 'DOCKERFILE_LINES_SCRIPT', value: DOCKERFILE_LINES_SCRIPT },
                { name: 'GIT_TERMINAL_PROMPT', value: '0' },
                { name: 'HOME', value: '/tmp' },
                ...(build.gitCredentialsSecret ? [{ name: 'GIT_CREDENTIALS_DIR', value: GIT_CREDENTIALS_DIR }] : []),
              ],
              resources,
              volumeMounts: [
                { name: 'workspace', mountPath: '/workspace' },
                ...(build.gitCredentialsSecret
                  ? [{ name: 'git-credentials', mountPath: GIT_CREDENTIALS_DIR, readOnly: true }]
                  : []),
                ...(archive ? [{ name: 'source-token', mountPath: SOURCE_TOKEN_DIR, readOnly: true }] : []),
              ],
              securityContext: restricted,
              // The script's own failures are written to the termination message; git's come from its log.
              terminationMessagePolicy: 'FallbackToLogsOnError',
            },
            {
              name: BUILD_CONTAINER,
              image: config.buildImage,
              command: ['sh', '-c', BUILD_SCRIPT],
              env: [
                { name: 'IMAGE', value: image },
                // Rootless BuildKit inside an unprivileged pod cannot create a process sandbox.
                { name: 'BUILDKITD_FLAGS', value: '--oci-worker-no-process-sandbox' },
                ...(config.buildPullSecretName ? [{ name: 'DOCKER_CONFIG', value: '/home/user/.docker' }] : []),
              ],
              resources,
              securityContext: {
                runAsUser: 1000,
                runAsGroup: 1000,
                // BuildKit rootless needs unconfined seccomp/AppArmor to set up its user namespace.
                seccompProfile: { type: 'Unconfined' },
                appArmorProfile: { type: 'Unconfined' },
              },
              volumeMounts: [
                // The checkout is input only: the build cannot change the commit the push step reports.
                { name: 'workspace', mountPath: '/workspace', readOnly: true },
                { name: 'image', mountPath: '/image' },
                { name: 'buildkitd', mountPath: '/home/user/.local/share/buildkit' },
                ...(config.buildPullSecretName
                  ? [{ name: 'pull-secret', mountPath: '/home/user/.docker', readOnly: true }]
                  : []),
              ],
            },
          ],
          containers: [
            {
              name: PUSH_CONTAINER,
              image: config.pushImage,
              command: ['sh', '-c', PUSH_SCRIPT],
              env: [
                { name: 'IMAGE', value: image },
                { name: 'HOME', value: '/tmp' },
                ...(config.pushSecretName
                  ? [{ name: 'REGISTRY_AUTH_FILE', value: `${PUSH_AUTH_DIR}/config.json` }]
                  : []),
              ],
              terminationMessagePath: '/dev/termination-log',
              terminationMessagePolicy: 'File',
              resources,
              securityContext: restricted,
              volumeMounts: [
                { name: 'workspace', mountPath: '/workspace', readOnly: true },
                { name: 'image', mountPath: '/image', readOnly: true },
                ...(config.pushSecretName ? [{ name: 'push-secret', mountPath: PUSH_AUTH_DIR, readOnly: true }] : []),
              ],
            },
          ],
          volumes: [
            { name: 'workspace', emptyDir: { sizeLimit: config.buildWorkspaceSize } },
            { name: 'image', emptyDir: { sizeLimit: config.buildWorkspaceSize } },
            { name: 'buildkitd', emptyDir: { sizeLimit: config.buildCacheSize } },
            ...(config.buildPullSecretName ? [dockerConfigVolume('pull-secret', config.buildPullSecretName)] : []),
            ...(config.pushSecretName ? [dockerConfigVolume('push-secret', config.pushSecretName)] : []),
            // 0440 with the pod's fsGroup: readable by the clone step's user only through its group.
            ...(build.gitCredentialsSecret
              ? [{ name: 'git-credentials', secret: { secretName: build.gitCredentialsSecret, defaultMode: 0o440 } }]
              : []),
            ...(archive
              ? [
                  {
                    name: 'source-token',
                    secret: { secretName: buildSourceTokenSecretName(build.revision), defaultMode: 0o440 },
                  },
                ]
              : []),
          ],
        },
      },
    },
  };
}

function dockerConfigVolume(name: string, secretName: string) {
  return { name, secret: { secretName, items: [{ key: '.dockerconfigjson', path: 'config.json' }] } };
}

/** Parses the push container's termination message; undefined when it is missing or malformed. */
export function parseBuildResult(message: string | undefined): { commit: string; digest: string } | undefined {
  if (!message) return undefined;
  try {
    const parsed = JSON.parse(message) as { commit?: unknown; digest?: unknown };
    if (typeof parsed.commit !== 'string' || typeof parsed.digest !== 'string') return undefined;
    if (!/^[0-9a-f]{7,64}$/.test(parsed.commit) || !/^sha256:[0-9a-f]{64}$/.test(parsed.digest)) return undefined;
    return { commit: parsed.commit, digest: parsed.digest };
  } catch {
    return undefined;
  }
}
