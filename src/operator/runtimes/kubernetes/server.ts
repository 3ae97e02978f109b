// The agent server of a deployment: one Deployment per AgentDeployment whose pod template names the revision it
// runs (a new revision is a rolling update), its environment Secret and its autoscaler (the Service, Ingress or
// HTTPRoute that reach it: routing.ts). Pure: the same input always gives the same objects, so applying them again changes nothing.
import type { V1Deployment, V1EnvVar, V1Secret, V1Volume, V2HorizontalPodAutoscaler } from '@kubernetes/client-node';
import type { ResourceSpec, SecretReference } from '../../../resources/agent-deployment.ts';
import { ValidationError } from '../../../lib/errors.ts';
import type { KubernetesRuntimeConfig } from './config.ts';
import {
  ANNOTATION_REVISION,
  childLabels,
  childMeta,
  LABEL_REVISION,
  selectorLabels,
  tenantKeysSecretName,
  type Target,
} from './labels.ts';
import { boundsViolation, type VerifiedServiceAccount } from './policy.ts';
import { postgresSecretName, POSTGRES_URI_KEY, waitForPostgres } from './postgres.ts';
import { replicasIn, sleepAnnotations, type SleepState } from './sleep.ts';

export const SERVER_PORT = 8000;
export const ANNOTATION_URL = 'agentplane.dev/url';
export const SERVER_CONTAINER = 'agent-server';
/** The `node` user of the agent images (official Node.js images). */
export const AGENT_UID = 1000;
/** What Pod Security `restricted` asks of every container. */
export const RESTRICTED_CONTAINER = {
  allowPrivilegeEscalation: false,
  runAsNonRoot: true,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' },
};
/** The agent's only writable folder: its image stays as built, whatever its code does. */
export const AGENT_TMP = '/tmp';
const DATABASE_ENV = ['DATABASE_URI', 'POSTGRES_URI', 'DATABASE_URL'];
/** Where the tenant's data-plane key hashes are mounted (the whole Secret, not subPath, so updates arrive). */
export const KEYS_DIR = '/var/run/agentplane/keys';
export const KEYS_FILE = `${KEYS_DIR}/keys.json`;
/** Where the deployment's activity token is mounted (GET /ok?activity=1 answers only the operator, which sends it). */
export const ACTIVITY_DIR = '/var/run/agentplane/activity';
export const ACTIVITY_TOKEN_KEY = 'token';

export type ServerInput = {
  revision: string;
  image: string;
  resourceSpec?: ResourceSpec | null;
  /** Names of the environment variables in the revision's Secret (values never enter the Deployment). */
  envNames: string[];
  secretReferences?: SecretReference[];
  /** The deployment's stable URL, kept as an annotation so a restarted operator reports it before acting. */
  url?: string;
  /**
   * resource_spec.service_account_name after the runtime checked it (verifyServiceAccount); a name in
   * resource_spec without this is refused.
   */
  serviceAccount?: VerifiedServiceAccount;
  /** source_config.access_mode "public": no API keys asked of callers. */
  public?: boolean;
  /** The idle policy's state (sleep.ts): asleep, no replicas; waking, at least one; recorded in annotations. */
  sleep?: SleepState;
  /** The operator asks the pods for their activity (an activator is configured): the token Secret is mounted. */
  activityToken?: boolean;
};

export type Database = { kind: 'internal' } | { kind: 'external'; from: 'secret' | 'secret_reference'; name: string };

/**
 * External Postgres wins whenever the user gave one (a secret reference or a secret value named DATABASE_URI or
 * an alias); otherwise the deployment gets its own Postgres StatefulSet. An internal database never shadows a
 * user's.
 */
export function databaseFor(envNames: string[], secretReferences: SecretReference[] = []): Database {
  const ref = secretReferences.find((r) => DATABASE_ENV.includes(r.name));
  if (ref) return { kind: 'external', from: 'secret_reference', name: ref.name };
  const fromSecret = envNames.find((n) => DATABASE_ENV.includes(n));
  if (fromSecret) return { kind: 'external', from: 'secret', name: fromSecret };
  return { kind: 'internal' };
}

export function serverName(target: Target): string {
  return target.name;
}

export function envSecretName(revision: string): string {
  return `${revision}-env`;
}

/** The deployment's activity token: only the operator (which made it) and this deployment's pods read it. */
export function activitySecretName(target: Target): string {
  return `${serverName(target)}-activity`;
}

/** The token is an input (random, made once by the runtime) so the builder stays pure. */
export function makeActivitySecret(target: Target, token: string): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: childMeta(target, activitySecretName(target), 'server'),
    type: 'Opaque',
    stringData: { [ACTIVITY_TOKEN_KEY]: token },
  };
}

/** The revision's environment as an immutable Secret (a new revision gets a new one, so rollbacks stay exact). */
export function makeSecret(target: Target, revision: string, env: Record<string, string>): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: childMeta(target, envSecretName(revision), 'server', { [LABEL_REVISION]: revision }),
    type: 'Opaque',
    immutable: true,
    stringData: { ...env },
  };
}

// Canonical quantity forms (what the API server stores), so a converged object compares equal to its builder's.
function cpu(cores: number): string {
  const milli = Math.max(1, Math.round(cores * 1000));
  return milli % 1000 === 0 ? String(milli / 1000) : `${milli}m`;
}

function memory(mb: number): string {
  return mb % 1024 === 0 ? `${mb / 1024}Gi` : `${mb}Mi`;
}

function memoryLimitMb(spec: ResourceSpec | null | undefined, config: KubernetesRuntimeConfig): number | undefined {
  return spec?.memoryLimitMb ?? config.defaults.memoryLimitMb;
}

/**
 * The agent's /tmp: memory (a tmpfs, charged to the container's memory limit as on one machine) no larger than that
 * limit; without a memory limit, node disk.
 */
function tmpVolume(spec: ResourceSpec | null | undefined, config: KubernetesRuntimeConfig): V1Volume {
  const limit = memoryLimitMb(spec, config);
  return { name: 'tmp', emptyDir: limit ? { medium: 'Memory', sizeLimit: memory(limit) } : {} };
}

function resources(spec: ResourceSpec | null | undefined, config: KubernetesRuntimeConfig) {
  const cpuLimit = spec?.cpuLimit ?? config.defaults.cpuLimit;
  const memoryLimit = memoryLimitMb(spec, config);
  return {
    requests: {
      cpu: cpu(spec?.cpu ?? config.defaults.cpu),
      memory: memory(spec?.memoryMb ?? config.defaults.memoryMb),
    },
    ...(cpuLimit || memoryLimit
      ? {
          limits: {
            ...(cpuLimit ? { cpu: cpu(cpuLimit) } : {}),
            ...(memoryLimit ? { memory: memory(memoryLimit) } : {}),
          },
        }
      : {}),
  };
}

export function serverEnv(target: Target, server: ServerInput): V1EnvVar[] {
  const refs = server.secretReferences ?? [];
  const taken = new Set(refs.map((r) => r.name));
  const env: V1EnvVar[] = [
    { name: 'HOST', value: '0.0.0.0' },
    { name: 'PORT', value: String(SERVER_PORT) },
    // The root filesystem is read-only: what tools write under HOME (caches, config) goes to the tmpfs.
    { name: 'HOME', value: AGENT_TMP },
  ].filter((e) => !taken.has(e.name) && !server.envNames.includes(e.name));
  for (const r of refs)
    env.push({ name: r.name, valueFrom: { secretKeyRef: { name: r.secretName, key: r.secretKey } } });
  if (databaseFor(server.envNames, refs).kind === 'internal') {
    env.push({
      name: 'DATABASE_URI',
      valueFrom: { secretKeyRef: { name: postgresSecretName(target), key: POSTGRES_URI_KEY } },
    });
  }
  // Always ours: `env` wins over the revision's envFrom, so a secret of the same name cannot point it elsewhere.
  if (server.activityToken)
    env.push({ name: 'AGENTPLANE_ACTIVITY_TOKEN_FILE', value: `${ACTIVITY_DIR}/${ACTIVITY_TOKEN_KEY}` });
  return env;
}

/** Tenant labels and annotations minus agentplane's own keys (tenant, deployment, automount-token...). */
function userKeys(map: Record<string, string> | undefined): Record<string, string> {
  return Object.fromEntries(Object.entries(map ?? {}).filter(([k]) => !k.startsWith('agentplane.dev/')));
}

export function makeDeployment(target: Target, server: ServerInput, config: KubernetesRuntimeConfig): V1Deployment {
  const spec = server.resourceSpec ?? {};
  if (spec.minScale !== undefined && spec.maxScale !== undefined && spec.minScale > spec.maxScale) {
    throw new ValidationError(`resource_spec.min_scale (${spec.minScale}) is above max_scale (${spec.maxScale})`);
  }
  const outOfBounds = boundsViolation(spec, config.limits);
  if (outOfBounds) throw new ValidationError(outOfBounds);
  const account = server.serviceAccount;
  if (spec.serviceAccountName && account?.name !== spec.serviceAccountName) {
    throw new ValidationError(
      `resource_spec.service_account_name "${spec.serviceAccountName}" was not verified for this tenant`,
    );
  }
  // Our labels win over user labels: the operator, the Service and the NetworkPolicies select by them.
  const labels = { ...userKeys(spec.labels), ...childLabels(target, 'server') };
  const annotations = userKeys(spec.annotations);
  const podLabels = { ...labels, [LABEL_REVISION]: server.revision };
  const probe = { httpGet: { path: '/ok', port: 'http' }, periodSeconds: 10, timeoutSeconds: 5 };
  const sleep = server.sleep ?? { kind: 'awake' };
  // Awake, a min_scale 0 deployment the idle policy covers runs one replica (without it, min_scale 0 means none).
  const awake = Math.max(server.sleep ? 1 : 0, spec.minScale ?? 1);
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: {
      ...childMeta(target, serverName(target), 'server'),
      labels,
      annotations: {
        ...annotations,
        [ANNOTATION_REVISION]: server.revision,
        ...(server.url ? { [ANNOTATION_URL]: server.url } : {}),
        ...sleepAnnotations(sleep),
      },
    },
    spec: {
      // With an autoscaler the replica count is its to set (writing ours back would fight it), except while the
      // deployment sleeps (the autoscaler leaves a Deployment at 0 alone) or wakes (it takes over from one).
      ...(autoscaled(spec) && sleep.kind === 'awake' ? {} : { replicas: replicasIn(sleep, awake) }),
      selector: { matchLabels: selectorLabels(target, 'server') },
      progressDeadlineSeconds: config.progressDeadlineSeconds,
      revisionHistoryLimit: 5,
      // Zero downtime: a new pod must be ready before an old one goes.
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
      template: {
        metadata: {
          labels: podLabels,
          annotations: { ...annotations, [ANNOTATION_REVISION]: server.revision },
        },
        spec: {
          // No API token in agent pods unless an admin's ServiceAccount for this tenant asks for one.
          ...(account ? { serviceAccountName: account.name } : {}),
          automountServiceAccountToken: account?.automountToken ?? false,
          // No *_SERVICE_HOST/_PORT variables: they would list every Service of the namespace (other deployments,
          // databases) to the agent's code.
          enableServiceLinks: false,
          // Pod Security `restricted`: the images run as `node` (uid 1000), a name the kubelet cannot check against
          // runAsNonRoot, so the uid is given.
          securityContext: {
            runAsNonRoot: true,
            runAsUser: AGENT_UID,
            runAsGroup: AGENT_UID,
            seccompProfile: { type: 'RuntimeDefault' },
          },
          ...pullSecrets([...config.imagePullSecrets, ...(spec.imagePullSecrets ?? [])]),
          ...(spec.nodeSelector ? { nodeSelector: { ...spec.nodeSelector } } : {}),
          terminationGracePeriodSeconds: 30,
          ...(databaseFor(server.envNames, server.secretReferences).kind === 'internal'
            ? { initContainers: [waitForPostgres(target, config)] }
            : {}),
          containers: [
            {
              name: SERVER_CONTAINER,
              image: server.image,
              // The image's ENTRYPOINT is the agentplane CLI (source builds and the base image).
              ...(server.public ? {} : { args: ['agent-server', '--auth-keys-file', KEYS_FILE] }),
              ports: [{ name: 'http', containerPort: SERVER_PORT, protocol: 'TCP' }],
              ...(server.envNames.length ? { envFrom: [{ secretRef: { name: envSecretName(server.revision) } }] } : {}),
              env: serverEnv(target, server),
              readinessProbe: { ...probe, initialDelaySeconds: 2, failureThreshold: 3 },
              livenessProbe: { ...probe, initialDelaySeconds: 10, failureThreshold: 6 },
              resources: resources(spec, config),
              securityContext: { ...RESTRICTED_CONTAINER, readOnlyRootFilesystem: true },
              volumeMounts: [
                { name: 'tmp', mountPath: AGENT_TMP },
                ...(server.public ? [] : [{ name: 'api-keys', mountPath: KEYS_DIR, readOnly: true }]),
                ...(server.activityToken ? [{ name: 'activity', mountPath: ACTIVITY_DIR, readOnly: true }] : []),
              ],
            },
          ],
          // optional: a pod starts before the control plane has written the tenant's keys; the agent server then
          // finds no keys file and must accept no key.
          volumes: [
            tmpVolume(spec, config),
            ...(server.public
              ? []
              : [{ name: 'api-keys', secret: { secretName: tenantKeysSecretName(target.tenantId), optional: true } }]),
            // Written before the Deployment (deploy.ts). A volume, not a variable: a replaced token reaches the
            // running pods, and it is not in the environment every child process of the agent inherits.
            ...(server.activityToken ? [{ name: 'activity', secret: { secretName: activitySecretName(target) } }] : []),
          ],
        },
      },
    },
  };
}

/** Pod imagePullSecrets from names, without duplicates (empty: the field is left out). */
export function pullSecrets(names: string[]): { imagePullSecrets?: { name: string }[] } {
  const unique = [...new Set(names)];
  return unique.length ? { imagePullSecrets: unique.map((name) => ({ name })) } : {};
}

/** min_scale < max_scale: the HorizontalPodAutoscaler owns the replica count between the two. */
export function autoscaled(spec: ResourceSpec | null | undefined): boolean {
  return spec?.maxScale !== undefined && spec.maxScale > Math.max(1, spec.minScale ?? 1);
}

/** Scales the agent server on CPU between min_scale and max_scale (undefined when there is nothing to scale). */
export function makeAutoscaler(
  target: Target,
  spec: ResourceSpec | null | undefined,
): V2HorizontalPodAutoscaler | undefined {
  if (!spec || !autoscaled(spec)) return undefined;
  return {
    apiVersion: 'autoscaling/v2',
    kind: 'HorizontalPodAutoscaler',
    metadata: childMeta(target, serverName(target), 'server'),
    spec: {
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: serverName(target) },
      minReplicas: Math.max(1, spec.minScale ?? 1),
      maxReplicas: spec.maxScale!,
      metrics: [
        { type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 80 } } },
      ],
    },
  };
}
