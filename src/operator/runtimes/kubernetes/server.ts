// The agent server of a deployment: one Deployment per AgentDeployment whose pod template names the revision it
// runs (a new revision is a rolling update), its environment Secret, a Service and, when a host is known, an
// Ingress. Pure: the same input always gives the same objects, so applying them again changes nothing.
import type { V1Deployment, V1EnvVar, V1Ingress, V1Secret, V1Service, V2HorizontalPodAutoscaler } from '@kubernetes/client-node';
import type { ResourceSpec, SecretReference } from '../../../resources/agent-deployment.ts';
import { ValidationError } from '../../../lib/errors.ts';
import type { KubernetesRuntimeConfig } from './config.ts';
import { ANNOTATION_REVISION, childLabels, childMeta, LABEL_REVISION, selectorLabels, type Target } from './labels.ts';
import { postgresSecretName, POSTGRES_URI_KEY } from './postgres.ts';

export const SERVER_PORT = 8000;
export const ANNOTATION_URL = 'agentplane.dev/url';
export const SERVER_CONTAINER = 'agent-server';
const DATABASE_ENV = ['DATABASE_URI', 'POSTGRES_URI', 'DATABASE_URL'];

export type ServerInput = {
  revision: string;
  image: string;
  resourceSpec?: ResourceSpec | null;
  /** Names of the environment variables in the revision's Secret (values never enter the Deployment). */
  envNames: string[];
  secretReferences?: SecretReference[];
  /** The deployment's stable URL, kept as an annotation so a restarted operator reports it before acting. */
  url?: string;
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

function resources(spec: ResourceSpec | null | undefined, config: KubernetesRuntimeConfig) {
  const cpuLimit = spec?.cpuLimit ?? config.defaults.cpuLimit;
  const memoryLimit = spec?.memoryLimitMb ?? config.defaults.memoryLimitMb;
  return {
    requests: { cpu: cpu(spec?.cpu ?? config.defaults.cpu), memory: memory(spec?.memoryMb ?? config.defaults.memoryMb) },
    ...(cpuLimit || memoryLimit
      ? { limits: { ...(cpuLimit ? { cpu: cpu(cpuLimit) } : {}), ...(memoryLimit ? { memory: memory(memoryLimit) } : {}) } }
      : {}),
  };
}

export function serverEnv(target: Target, server: ServerInput): V1EnvVar[] {
  const refs = server.secretReferences ?? [];
  const taken = new Set(refs.map((r) => r.name));
  const env: V1EnvVar[] = [
    { name: 'HOST', value: '0.0.0.0' },
    { name: 'PORT', value: String(SERVER_PORT) },
  ].filter((e) => !taken.has(e.name) && !server.envNames.includes(e.name));
  for (const r of refs) env.push({ name: r.name, valueFrom: { secretKeyRef: { name: r.secretName, key: r.secretKey } } });
  if (databaseFor(server.envNames, refs).kind === 'internal') {
    env.push({ name: 'DATABASE_URI', valueFrom: { secretKeyRef: { name: postgresSecretName(target), key: POSTGRES_URI_KEY } } });
  }
  return env;
}

export function makeDeployment(target: Target, server: ServerInput, config: KubernetesRuntimeConfig): V1Deployment {
  const spec = server.resourceSpec ?? {};
  if (spec.minScale !== undefined && spec.maxScale !== undefined && spec.minScale > spec.maxScale) {
    throw new ValidationError(`resource_spec.min_scale (${spec.minScale}) is above max_scale (${spec.maxScale})`);
  }
  // Our labels win over user labels: the operator and the Service select by them.
  const labels = { ...(spec.labels ?? {}), ...childLabels(target, 'server') };
  const podLabels = { ...labels, [LABEL_REVISION]: server.revision };
  const probe = { httpGet: { path: '/ok', port: 'http' }, periodSeconds: 10, timeoutSeconds: 5 };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: {
      ...childMeta(target, serverName(target), 'server'),
      labels,
      annotations: {
        ...(spec.annotations ?? {}),
        [ANNOTATION_REVISION]: server.revision,
        ...(server.url ? { [ANNOTATION_URL]: server.url } : {}),
      },
    },
    spec: {
      // With an autoscaler the replica count is its to set; writing ours back would fight it.
      ...(autoscaled(spec) ? {} : { replicas: spec.minScale ?? 1 }),
      selector: { matchLabels: selectorLabels(target, 'server') },
      progressDeadlineSeconds: config.progressDeadlineSeconds,
      revisionHistoryLimit: 5,
      // Zero downtime: a new pod must be ready before an old one goes.
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
      template: {
        metadata: {
          labels: podLabels,
          annotations: { ...(spec.annotations ?? {}), [ANNOTATION_REVISION]: server.revision },
        },
        spec: {
          ...(spec.serviceAccountName ? { serviceAccountName: spec.serviceAccountName } : {}),
          ...(spec.imagePullSecrets?.length ? { imagePullSecrets: spec.imagePullSecrets.map((name) => ({ name })) } : {}),
          ...(spec.nodeSelector ? { nodeSelector: { ...spec.nodeSelector } } : {}),
          terminationGracePeriodSeconds: 30,
          containers: [
            {
              name: SERVER_CONTAINER,
              image: server.image,
              ports: [{ name: 'http', containerPort: SERVER_PORT, protocol: 'TCP' }],
              ...(server.envNames.length ? { envFrom: [{ secretRef: { name: envSecretName(server.revision) } }] } : {}),
              env: serverEnv(target, server),
              readinessProbe: { ...probe, initialDelaySeconds: 2, failureThreshold: 3 },
              livenessProbe: { ...probe, initialDelaySeconds: 10, failureThreshold: 6 },
              resources: resources(spec, config),
              securityContext: { allowPrivilegeEscalation: false },
            },
          ],
        },
      },
    },
  };
}

/** min_scale < max_scale: the HorizontalPodAutoscaler owns the replica count between the two. */
export function autoscaled(spec: ResourceSpec | null | undefined): boolean {
  return spec?.maxScale !== undefined && spec.maxScale > Math.max(1, spec.minScale ?? 1);
}

/** Scales the agent server on CPU between min_scale and max_scale (undefined when there is nothing to scale). */
export function makeAutoscaler(target: Target, spec: ResourceSpec | null | undefined): V2HorizontalPodAutoscaler | undefined {
  if (!spec || !autoscaled(spec)) return undefined;
  return {
    apiVersion: 'autoscaling/v2',
    kind: 'HorizontalPodAutoscaler',
    metadata: childMeta(target, serverName(target), 'server'),
    spec: {
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: serverName(target) },
      minReplicas: Math.max(1, spec.minScale ?? 1),
      maxReplicas: spec.maxScale!,
      metrics: [{ type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 80 } } }],
    },
  };
}

export function makeService(target: Target): V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: childMeta(target, serverName(target), 'server'),
    spec: {
      type: 'ClusterIP',
      selector: selectorLabels(target, 'server'),
      ports: [{ name: 'http', port: 80, targetPort: 'http', protocol: 'TCP' }],
    },
  };
}

/** Host an Ingress serves: custom_url's host, else `<name>.<base domain>`, else none (cluster-internal only). */
export function ingressHost(target: Target, customUrl: string | null | undefined, config: KubernetesRuntimeConfig): string | undefined {
  if (customUrl) {
    let host: string;
    try {
      host = new URL(customUrl.includes('://') ? customUrl : `https://${customUrl}`).hostname;
    } catch {
      throw new ValidationError(`custom_url "${customUrl}" is not a URL`);
    }
    if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(host)) {
      throw new ValidationError(`custom_url "${customUrl}" has no valid host name`);
    }
    return host;
  }
  return config.ingress.baseDomain ? `${target.name}.${config.ingress.baseDomain}` : undefined;
}

export function makeIngress(target: Target, host: string, config: KubernetesRuntimeConfig): V1Ingress {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: childMeta(target, serverName(target), 'server'),
    spec: {
      ...(config.ingress.className ? { ingressClassName: config.ingress.className } : {}),
      ...(config.ingress.tlsSecretName ? { tls: [{ hosts: [host], secretName: config.ingress.tlsSecretName }] } : {}),
      rules: [
        {
          host,
          http: {
            paths: [
              { path: '/', pathType: 'Prefix', backend: { service: { name: serverName(target), port: { name: 'http' } } } },
            ],
          },
        },
      ],
    },
  };
}

/** The deployment's stable URL: the Ingress host when there is one, else the Service's cluster DNS name. */
export function deploymentUrl(target: Target, host: string | undefined, config: KubernetesRuntimeConfig): string {
  if (host) return `${config.ingress.tlsSecretName ? 'https' : 'http'}://${host}`;
  return `http://${serverName(target)}.${target.namespace}.svc.cluster.local`;
}
