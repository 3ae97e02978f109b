// `agentplane operator` flags: how a revision is built: the registry, the build Job, its images, resources and credentials.
import { runtimeOptions } from './runtime.ts';
import { list, num } from '../../lib/option-readers.ts';

export const buildOptions = runtimeOptions({
  registry: {
    type: 'string',
    description:
      'Repository prefix source builds push to (e.g. registry.example.com/agents); empty: only external_docker',
    env: ['AGENTPLANE_REGISTRY'],
    path: 'runtime.registry',
    read: (v) => v ?? '',
  },
  'build-namespace': {
    type: 'string',
    description:
      'Namespace of the build Jobs and of the Secrets they mount (push, pull, git credentials); empty: --namespace. Build pods need a privileged namespace: give them one of their own',
    env: ['AGENTPLANE_BUILD_NAMESPACE'],
    path: 'runtime.buildNamespace',
    read: (v) => v || undefined,
  },
  'push-secret': {
    type: 'string',
    description: 'dockerconfigjson Secret BuildKit pushes with',
    env: ['AGENTPLANE_PUSH_SECRET'],
    path: 'runtime.pushSecretName',
  },
  'build-pull-secret': {
    type: 'string',
    description: 'dockerconfigjson Secret the BuildKit step pulls base images with (pull-only: RUN steps can read it)',
    env: ['AGENTPLANE_BUILD_PULL_SECRET'],
    path: 'runtime.buildPullSecretName',
  },
  'git-credentials-prefix': {
    type: 'string',
    description:
      "Prefix of the per-workspace git credentials Secrets (<prefix><workspace id>, labelled or annotated agentplane.dev/tenant=<workspace id>; username+password and/or ssh-privatekey+known_hosts): a build clones only with its own workspace's",
    env: ['AGENTPLANE_GIT_CREDENTIALS_PREFIX'],
    path: 'runtime.gitCredentialsSecretPrefix',
  },
  'build-image': {
    type: 'string',
    description: 'BuildKit rootless image',
    default: 'moby/buildkit:v0.16.0-rootless',
    env: ['AGENTPLANE_BUILD_IMAGE'],
    path: 'runtime.buildImage',
  },
  'push-image': {
    type: 'string',
    description: 'Image of the push step (skopeo)',
    default: 'quay.io/skopeo/stable:v1.16.1',
    env: ['AGENTPLANE_PUSH_IMAGE'],
    path: 'runtime.pushImage',
  },
  'build-cpu-request': {
    type: 'string',
    description: 'CPU request of each build container',
    default: '500m',
    env: ['AGENTPLANE_BUILD_CPU_REQUEST'],
    path: 'runtime.buildResources.requests.cpu',
  },
  'build-memory-request': {
    type: 'string',
    description: 'Memory request of each build container',
    default: '1Gi',
    env: ['AGENTPLANE_BUILD_MEMORY_REQUEST'],
    path: 'runtime.buildResources.requests.memory',
  },
  'build-cpu-limit': {
    type: 'string',
    description: 'CPU limit of each build container',
    default: '2',
    env: ['AGENTPLANE_BUILD_CPU_LIMIT'],
    path: 'runtime.buildResources.limits.cpu',
  },
  'build-memory-limit': {
    type: 'string',
    description: 'Memory limit of each build container',
    default: '4Gi',
    env: ['AGENTPLANE_BUILD_MEMORY_LIMIT'],
    path: 'runtime.buildResources.limits.memory',
  },
  'build-workspace-size': {
    type: 'string',
    description: 'sizeLimit of the build checkout and image emptyDirs',
    default: '4Gi',
    env: ['AGENTPLANE_BUILD_WORKSPACE_SIZE'],
    path: 'runtime.buildWorkspaceSize',
  },
  'build-cache-size': {
    type: 'string',
    description: 'sizeLimit of the BuildKit state emptyDir',
    default: '10Gi',
    env: ['AGENTPLANE_BUILD_CACHE_SIZE'],
    path: 'runtime.buildCacheSize',
  },
  'base-image': {
    type: 'string',
    description: 'Image generated agent Dockerfiles build FROM (the agentplane image)',
    default: 'ghcr.io/agentplane/agentplane:0.1.0',
    env: ['AGENTPLANE_BASE_IMAGE'],
    path: 'runtime.baseImage',
  },
  'git-image': {
    type: 'string',
    description: 'Image with git for the clone step (default: the base image)',
    env: ['AGENTPLANE_GIT_IMAGE'],
    path: 'runtime.gitImage',
  },
  'build-timeout': {
    type: 'string',
    description: 'Seconds a build may take',
    default: '1800',
    env: ['AGENTPLANE_BUILD_TIMEOUT'],
    path: 'runtime.buildTimeoutSeconds',
    read: num,
  },
  'build-job-ttl': {
    type: 'string',
    description: 'Seconds a finished build Job (its pod and build credential) is kept before Kubernetes deletes it',
    default: '3600',
    env: ['AGENTPLANE_BUILD_JOB_TTL'],
    path: 'runtime.buildJobTtlSeconds',
    read: num,
  },
  'image-pull-secrets': {
    type: 'string',
    description:
      'Comma-separated dockerconfigjson Secrets agent and build pods pull images with (the registry builds push to)',
    env: ['AGENTPLANE_IMAGE_PULL_SECRETS'],
    path: 'runtime.imagePullSecrets',
    read: list,
  },
});
