// The build Job of a source revision: an init container clones the repository at repo_ref and writes the
// generated Dockerfile; BuildKit (rootless, daemonless) builds and pushes it. The build container's termination
// message carries {"commit","digest"}, which the operator reads from the Pod's status after the Job succeeds.
import type { V1Job } from '@kubernetes/client-node';
import type { KubernetesRuntimeConfig } from './config.ts';
import { agentDockerfile, safeConfigPath } from './dockerfile.ts';
import { ANNOTATION_REVISION, childMeta, LABEL_REVISION, type Target } from './labels.ts';

export type BuildInput = {
  /** AgentRevision name (`<deployment>-r<n>`); also the Job name and the image tag. */
  revision: string;
  repoUrl: string;
  repoRef: string;
  graphConfigPath: string;
  installCommand?: string | null;
  buildCommand?: string | null;
};

export const BUILD_CONTAINER = 'build';
export const CLONE_CONTAINER = 'clone';

export function buildJobName(revision: string): string {
  return `${revision}-build`;
}

/** The tag a revision is pushed under; the recorded image is `<repository>@<digest>`. */
export function imageRepository(config: KubernetesRuntimeConfig, target: Target): string {
  return `${config.registry.replace(/\/+$/, '')}/${target.name}`;
}

// Tries the ref as a branch, a tag, then anything git understands (a commit), like the local runtime.
const CLONE_SCRIPT = `set -eu
git clone --quiet --no-checkout -- "$REPO_URL" /workspace/src
cd /workspace/src
sha=""
for c in "refs/remotes/origin/$REPO_REF" "refs/tags/$REPO_REF" "$REPO_REF"; do
  if sha=$(git rev-parse --verify --quiet "$c^{commit}"); then break; fi
  sha=""
done
if [ -z "$sha" ]; then echo "repo_ref \\"$REPO_REF\\" is not a branch, tag or commit of $REPO_URL" >&2; exit 1; fi
git checkout --quiet --detach "$sha"
echo "resolved $REPO_REF to $sha"
if [ ! -f "$GRAPH_CONFIG" ]; then echo "graph config \\"$GRAPH_CONFIG\\" not found at $sha" >&2; exit 1; fi
rm -rf .git
printf '%s' "$DOCKERFILE" > /workspace/Dockerfile
printf '%s' "$sha" > /workspace/commit
`;

const BUILD_SCRIPT = `set -eu
buildctl-daemonless.sh build \\
  --frontend dockerfile.v0 \\
  --local context=/workspace/src \\
  --local dockerfile=/workspace \\
  --output "type=image,name=$IMAGE,push=true" \\
  --metadata-file /workspace/metadata.json
digest=$(sed -n 's/.*"containerimage.digest": *"\\([^"]*\\)".*/\\1/p' /workspace/metadata.json | head -n 1)
if [ -z "$digest" ]; then echo "buildkit reported no image digest" >&2; exit 1; fi
printf '{"commit":"%s","digest":"%s"}' "$(cat /workspace/commit)" "$digest" > /dev/termination-log
echo "pushed $IMAGE@$digest"
`;

export function makeBuildJob(target: Target, build: BuildInput, config: KubernetesRuntimeConfig): V1Job {
  const configPath = safeConfigPath(build.graphConfigPath);
  const dockerfile = agentDockerfile({
    baseImage: config.baseImage,
    graphConfigPath: configPath,
    installCommand: build.installCommand,
    buildCommand: build.buildCommand,
  });
  const revisionLabel = { [LABEL_REVISION]: build.revision };
  const meta = childMeta(target, buildJobName(build.revision), 'build', revisionLabel);
  const image = `${imageRepository(config, target)}:${build.revision}`;
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { ...meta, annotations: { [ANNOTATION_REVISION]: build.revision } },
    spec: {
      // A failed build is reported, not retried: the user fixes the repo and makes a new revision.
      backoffLimit: 0,
      activeDeadlineSeconds: config.buildTimeoutSeconds,
      template: {
        metadata: { labels: meta.labels },
        spec: {
          restartPolicy: 'Never',
          automountServiceAccountToken: false,
          securityContext: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000 },
          initContainers: [
            {
              name: CLONE_CONTAINER,
              image: config.gitImage,
              command: ['sh', '-c', CLONE_SCRIPT],
              env: [
                { name: 'REPO_URL', value: build.repoUrl },
                { name: 'REPO_REF', value: build.repoRef },
                { name: 'GRAPH_CONFIG', value: configPath },
                { name: 'DOCKERFILE', value: dockerfile },
                { name: 'GIT_TERMINAL_PROMPT', value: '0' },
                { name: 'HOME', value: '/tmp' },
              ],
              volumeMounts: [{ name: 'workspace', mountPath: '/workspace' }],
              securityContext: { allowPrivilegeEscalation: false, runAsNonRoot: true },
            },
          ],
          containers: [
            {
              name: BUILD_CONTAINER,
              image: config.buildImage,
              command: ['sh', '-c', BUILD_SCRIPT],
              env: [
                { name: 'IMAGE', value: image },
                // Rootless BuildKit inside an unprivileged pod cannot create a process sandbox.
                { name: 'BUILDKITD_FLAGS', value: '--oci-worker-no-process-sandbox' },
                ...(config.pushSecretName ? [{ name: 'DOCKER_CONFIG', value: '/home/user/.docker' }] : []),
              ],
              terminationMessagePath: '/dev/termination-log',
              terminationMessagePolicy: 'File',
              securityContext: {
                runAsUser: 1000,
                runAsGroup: 1000,
                // BuildKit rootless needs unconfined seccomp/AppArmor to set up its user namespace.
                seccompProfile: { type: 'Unconfined' },
                appArmorProfile: { type: 'Unconfined' },
              },
              volumeMounts: [
                { name: 'workspace', mountPath: '/workspace' },
                { name: 'buildkitd', mountPath: '/home/user/.local/share/buildkit' },
                ...(config.pushSecretName
                  ? [{ name: 'push-secret', mountPath: '/home/user/.docker', readOnly: true }]
                  : []),
              ],
            },
          ],
          volumes: [
            { name: 'workspace', emptyDir: {} },
            { name: 'buildkitd', emptyDir: {} },
            ...(config.pushSecretName
              ? [
                  {
                    name: 'push-secret',
                    secret: { secretName: config.pushSecretName, items: [{ key: '.dockerconfigjson', path: 'config.json' }] },
                  },
                ]
              : []),
          ],
        },
      },
    },
  };
}

/** Parses the build container's termination message; undefined when it is missing or malformed. */
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
