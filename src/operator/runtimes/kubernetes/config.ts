// Settings of the Kubernetes runtime, parsed once by the operator command (flags/env, filled from Helm values).
import { z } from 'zod';

export const kubernetesRuntimeConfigSchema = z.object({
  /** Repository prefix agent images are pushed to, e.g. `registry.example.com/agents`; empty: no source builds. */
  registry: z.string().default(''),
  /** Secret of type kubernetes.io/dockerconfigjson in the agent namespace, used by BuildKit to push. */
  pushSecretName: z.string().min(1).optional(),
  /** BuildKit rootless image (runs buildctl-daemonless.sh). */
  buildImage: z.string().min(1).default('moby/buildkit:v0.16.0-rootless'),
  /** Image with sh and git for the clone init container (the agentplane image has both). */
  gitImage: z.string().min(1),
  /** Image the generated agent Dockerfiles build FROM (the agentplane image). */
  baseImage: z.string().min(1),
  /** A build Job fails after this many seconds. */
  buildTimeoutSeconds: z.number().int().positive().default(1800),
  /** Seconds a rollout may make no progress before it counts as failed. */
  progressDeadlineSeconds: z.number().int().positive().default(600),
  ingress: z
    .object({
      className: z.string().min(1).optional(),
      /** Deployments without a custom_url are served at `<deployment name>.<baseDomain>`. */
      baseDomain: z.string().min(1).optional(),
      tlsSecretName: z.string().min(1).optional(),
    })
    .default({}),
  postgres: z
    .object({
      /**
       * auto: a deployment without a DATABASE_URI gets its own Postgres StatefulSet; external: it fails instead
       * (clusters where every agent must use a managed database).
       */
      mode: z.enum(['auto', 'external']).default('auto'),
      image: z.string().min(1).default('postgres:16-alpine'),
      storageSize: z.string().min(1).default('1Gi'),
      storageClassName: z.string().min(1).optional(),
    })
    .default({ mode: 'auto', image: 'postgres:16-alpine', storageSize: '1Gi' }),
  /** Resources for agent servers whose resource_spec leaves them out. */
  defaults: z
    .object({
      cpu: z.number().positive().default(0.5),
      memoryMb: z.number().int().positive().default(512),
      cpuLimit: z.number().positive().optional(),
      memoryLimitMb: z.number().int().positive().optional(),
    })
    .default({ cpu: 0.5, memoryMb: 512 }),
});
export type KubernetesRuntimeConfig = z.infer<typeof kubernetesRuntimeConfigSchema>;
export type KubernetesRuntimeConfigInput = z.input<typeof kubernetesRuntimeConfigSchema>;
