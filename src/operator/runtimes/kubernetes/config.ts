// Settings of the Kubernetes runtime, parsed once by the operator command (flags/env, filled from Helm values).
import { z } from 'zod';

/** An annotation (or label) key: an optional DNS-subdomain prefix and a name of at most 63 characters. */
const QUALIFIED_NAME =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

/** Annotations an operator-written child carries: keys must be qualified names, as the API server requires. */
const annotationMap = z.record(z.string(), z.string()).superRefine((map, ctx) => {
  for (const key of Object.keys(map))
    if (!QUALIFIED_NAME.test(key))
      ctx.addIssue({ code: 'custom', message: `annotation key "${key}" is not a qualified name ([prefix/]name)` });
});

/** A DNS subdomain (object names, Gateway listener names) and a DNS label (namespaces), as Gateway API checks them. */
const DNS_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^(?=.{1,63}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** RFC 1918 private ranges and link-local (cloud metadata at 169.254.169.254). */
export const PRIVATE_RANGES = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16'] as const;

const quantity = z
  .string()
  .regex(/^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$/, 'must be a Kubernetes quantity (e.g. 500m, 2Gi)');
const cidr = z
  .string()
  .regex(/^[0-9]{1,3}(\.[0-9]{1,3}){3}\/[0-9]{1,2}$|^[0-9a-fA-F:]+\/[0-9]{1,3}$/, 'must be a CIDR');

const labelSelector = z
  .object({
    matchLabels: z.record(z.string(), z.string()).optional(),
    matchExpressions: z
      .array(
        z
          .object({
            key: z.string().min(1),
            operator: z.enum(['In', 'NotIn', 'Exists', 'DoesNotExist']),
            values: z.array(z.string()).optional(),
          })
          .strict(),
      )
      .optional(),
  })
  .strict();

/**
 * A NetworkPolicy peer as Kubernetes spells it: an ipBlock alone, or a namespaceSelector and/or podSelector.
 * Checked here so a bad value stops the operator at start with the flag's name, not every apply with a 422.
 */
export const networkPolicyPeerSchema = z
  .object({
    namespaceSelector: labelSelector.optional(),
    podSelector: labelSelector.optional(),
    ipBlock: z
      .object({ cidr, except: z.array(cidr).optional() })
      .strict()
      .optional(),
  })
  .strict()
  .refine((p) => (p.ipBlock ? !p.namespaceSelector && !p.podSelector : !!(p.namespaceSelector || p.podSelector)), {
    message: 'each peer is an ipBlock alone, or a namespaceSelector and/or a podSelector',
  });
export type NetworkPolicyPeer = z.infer<typeof networkPolicyPeerSchema>;

/**
 * Where pods resolve names, on the DNS ports only: the cluster DNS in kube-system (EKS, AKS, kind, GKE kube-dns),
 * NodeLocal DNSCache's link-local address (GKE, and any cluster running it) and GKE's metadata server, which
 * answers DNS for Cloud DNS for GKE (Autopilot's default). Its HTTP metadata API stays blocked: only port 53 is
 * opened to it.
 */
export const DEFAULT_DNS_PEERS: NetworkPolicyPeer[] = [
  { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } } },
  { ipBlock: { cidr: '169.254.20.10/32' } },
  { ipBlock: { cidr: '169.254.169.254/32' } },
];

export const kubernetesRuntimeConfigSchema = z.object({
  /**
   * When set, every agent gets AGENTPLANE_CONTROL_PLANE_URL, AGENTPLANE_DEPLOYMENT_TOKEN and AGENTPLANE_TENANT_ID
   * (lib/deployment-token.ts): a credential for its own workspace's auth service only.
   */
  agentAuth: z
    .object({
      controlPlaneUrl: z.string().url(),
      tokenKey: z.custom<Buffer>(
        (v) => Buffer.isBuffer(v) && v.length === 32,
        'must be the base64 of exactly 32 bytes',
      ),
    })
    .optional(),
  /**
   * Builds of uploaded source tarballs (internal_source) download them from the control plane at `url`, with a fetch
   * token (lib/source-fetch-token.ts) signed by `tokenKey`; `peer` (the control plane's pods) is opened to build
   * pods' egress. Unset: such revisions fail with the reason.
   */
  sourceFetch: z
    .object({
      url: z
        .string()
        .url()
        .refine((u) => /^https?:$/.test(new URL(u).protocol), 'must be an http(s) URL'),
      tokenKey: z.custom<Buffer>((v) => Buffer.isBuffer(v) && v.length === 32, 'must be 32 bytes'),
      peer: networkPolicyPeerSchema.optional(),
    })
    .optional(),
  /** Repository prefix agent images are pushed to, e.g. `registry.example.com/agents`; empty: no source builds. */
  registry: z.string().default(''),
  /**
   * Namespace of the build Jobs (and of the push, pull and git credentials Secrets they mount); unset: the
   * AgentDeployments' namespace. Build pods need an unconfined seccomp profile (rootless BuildKit), which Pod
   * Security admits only in a `privileged` namespace: a namespace of their own keeps agents out of it.
   */
  buildNamespace: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a namespace name')
    .max(63)
    .optional(),
  /** Secret of type kubernetes.io/dockerconfigjson in the agent namespace, used by BuildKit to push. */
  pushSecretName: z.string().min(1).optional(),
  /**
   * Secret of type kubernetes.io/dockerconfigjson the BuildKit step may use to pull base images. Unlike the push
   * secret it is visible to the Dockerfile's RUN steps, so it must only grant reads.
   */
  buildPullSecretName: z.string().min(1).optional(),
  /**
   * Prefix of the per-tenant git credentials Secrets in the build namespace: a build of tenant T clones with the
   * Secret `<prefix><T>` (named like a tenant namespace) when it says it belongs to T and its
   * `agentplane.dev/git-repositories` (if set) covers the repository; with `username` + `password` (an HTTPS token,
   * given to git through GIT_ASKPASS) and/or `ssh-privatekey` + `known_hosts`. Unset: every clone is anonymous.
   */
  gitCredentialsSecretPrefix: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9.]*)?$/, 'must start a Kubernetes name')
    .max(40)
    .optional(),
  /** BuildKit rootless image (runs buildctl-daemonless.sh). */
  buildImage: z.string().min(1).default('moby/buildkit:v0.16.0-rootless'),
  /** Image of the push step (skopeo: copies the OCI layout BuildKit wrote to the registry). */
  pushImage: z.string().min(1).default('quay.io/skopeo/stable:v1.16.1'),
  /** Requests and limits of every build container (Kubernetes quantities). */
  buildResources: z
    .object({
      requests: z.object({ cpu: quantity, memory: quantity }),
      limits: z.object({ cpu: quantity, memory: quantity }),
    })
    .default({ requests: { cpu: '500m', memory: '1Gi' }, limits: { cpu: '2', memory: '4Gi' } }),
  /** sizeLimit of the build pod's emptyDirs: the checkout plus the OCI image, and BuildKit's state. */
  buildWorkspaceSize: quantity.default('4Gi'),
  buildCacheSize: quantity.default('10Gi'),
  /** Image with sh and git for the clone init container (the agentplane image has both). */
  gitImage: z.string().min(1),
  /** Image the generated agent Dockerfiles build FROM (the agentplane image). */
  baseImage: z.string().min(1),
  /** A build Job fails after this many seconds. */
  buildTimeoutSeconds: z.number().int().positive().default(1800),
  /**
   * Seconds a finished build Job (with its pod and build credential Secret) is kept before Kubernetes deletes it
   * (ttlSecondsAfterFinished): the built image is recorded on the revision, so nothing needs the Job afterwards.
   */
  buildJobTtlSeconds: z.number().int().nonnegative().default(3600),
  /** Seconds a rollout may make no progress before it counts as failed. */
  progressDeadlineSeconds: z.number().int().positive().default(600),
  /**
   * Restarts after which a crash-looping agent pod fails its revision before the progress deadline: the first few
   * are expected while a new Postgres provisions its volume and runs initdb.
   */
  crashLoopRestarts: z.number().int().positive().default(5),
  /**
   * Cluster DNS suffix after `<service>.<namespace>.svc` (e.g. `cluster.local`); empty: the short form, which every
   * cluster's resolver search path completes.
   */
  clusterDomain: z
    .string()
    .regex(/^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, 'must be a DNS name')
    .default(''),
  /** dockerconfigjson Secrets (in the pods' namespace) agent and build pods pull their images with. */
  imagePullSecrets: z.array(z.string().min(1)).default([]),
  ingress: z
    .object({
      className: z.string().min(1).optional(),
      /** Deployments without a custom_url are served at `<deployment name>.<baseDomain>`. */
      baseDomain: z.string().min(1).optional(),
      tlsSecretName: z.string().min(1).optional(),
      /**
       * Each Ingress names a TLS Secret of its own, `<ingress name>-tls`, in its own namespace, for cert-manager's
       * ingress-shim (via `annotations`) to issue: with a namespace per tenant, one shared Secret cannot be there.
       */
      tlsSecretPerIngress: z.boolean().default(false),
      /** Annotations of every agent Ingress (cert-manager.io/cluster-issuer, ingress controller settings). */
      annotations: annotationMap.default({}),
      /**
       * Domain suffixes a custom_url host may end with (`bots.example.com` allows `x.bots.example.com`, not the
       * suffix itself). Empty: custom_url is refused and deployments are served at `<name>.<baseDomain>` only.
       */
      allowedCustomDomains: z
        .array(
          z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, 'must be a DNS name'),
        )
        .default([]),
    })
    .refine((i) => !(i.tlsSecretPerIngress && i.tlsSecretName), {
      message: 'a shared TLS Secret and one Secret per Ingress exclude each other: set one',
      path: ['tlsSecretPerIngress'],
    })
    .default({ allowedCustomDomains: [], annotations: {}, tlsSecretPerIngress: false }),
  /**
   * Gateway API: each served deployment gets an HTTPRoute (gateway.networking.k8s.io/v1) attached to these parent
   * Gateways instead of an Ingress, with the same host and path. Absent: Ingresses, as before.
   */
  gateway: z
    .object({
      parentRefs: z
        .array(
          z
            .object({
              name: z.string().regex(DNS_SUBDOMAIN, 'must be a Kubernetes object name'),
              /** Absent: the route's own namespace (with a namespace per tenant the Gateway is elsewhere: set it). */
              namespace: z.string().regex(DNS_LABEL, 'must be a namespace name').optional(),
              /** The Gateway listener to attach to (e.g. the HTTPS one); absent: every listener that allows it. */
              sectionName: z.string().regex(DNS_SUBDOMAIN, 'must be a listener name').optional(),
            })
            .strict(),
        )
        .min(1, 'at least one parent Gateway is required'),
      /** Annotations of every agent HTTPRoute. */
      annotations: annotationMap.default({}),
      /** The Gateway listeners terminate TLS for agent hosts: deployment URLs are https://<host>. */
      https: z.boolean().default(true),
    })
    .optional(),
  /** Upper bounds on resource_spec (the control plane refuses the same values with 422). */
  limits: z
    .object({
      maxScale: z.number().int().positive().default(10),
      maxCpu: z.number().positive().default(4),
      maxMemoryMb: z.number().int().positive().default(8192),
    })
    .default({ maxScale: 10, maxCpu: 4, maxMemoryMb: 8192 }),
  networkPolicy: z
    .object({
      /** Give every agent deployment (and its Postgres) a default-deny NetworkPolicy. */
      enabled: z.boolean().default(true),
      /** Namespaces (by label) whose pods may call agent servers: the ingress controller's. */
      ingressNamespaceSelector: z
        .record(z.string(), z.string())
        .default({ 'kubernetes.io/metadata.name': 'ingress-nginx' }),
      /** Agents may reach the internet except these ranges (the cluster, private networks, cloud metadata). */
      agentEgressExceptCidrs: z.array(cidr).default([...PRIVATE_RANGES]),
      /**
       * Build pods (which run the repository's RUN steps) may reach anything but these: by default only cloud
       * metadata, since registries and git servers are often on private addresses.
       */
      buildEgressExceptCidrs: z.array(cidr).default(['169.254.0.0/16']),
      /** Where agent and build pods may send DNS queries (only to `dnsPorts`), whatever the except lists say. */
      dnsPeers: z.array(networkPolicyPeerSchema).default(DEFAULT_DNS_PEERS),
      /** Ports of the DNS rule: 53, plus 5353 on OpenShift (its DNS pods listen there behind the Service). */
      dnsPorts: z.array(z.number().int().min(1).max(65535)).min(1).default([53]),
      /**
       * More sources that may call agent servers on their port, beside the ingress namespace: IP-target load
       * balancers (AWS ALB target-type ip, GKE NEGs and their health checks) by ipBlock, metrics scrapers by
       * namespace.
       */
      agentIngressFrom: z.array(networkPolicyPeerSchema).default([]),
    })
    .default({
      enabled: true,
      ingressNamespaceSelector: { 'kubernetes.io/metadata.name': 'ingress-nginx' },
      agentEgressExceptCidrs: [...PRIVATE_RANGES],
      buildEgressExceptCidrs: ['169.254.0.0/16'],
      dnsPeers: DEFAULT_DNS_PEERS,
      dnsPorts: [53],
      agentIngressFrom: [],
    }),
  /**
   * Run each tenant's agents in a namespace of its own (`<prefix><tenant>`, created by the operator) instead of the
   * namespace of the AgentDeployments.
   */
  tenantNamespaces: z
    .object({
      enabled: z.boolean().default(false),
      prefix: z
        .string()
        .regex(/^[a-z0-9]([-a-z0-9]*)?$/, 'must start a Kubernetes name')
        .max(40)
        .default('agentplane-t-'),
      /**
       * The control plane's ServiceAccount, bound in each tenant namespace to `keysRole` so it can keep the
       * tenant's keys Secret there.
       */
      keysWriter: z.object({ namespace: z.string().min(1), name: z.string().min(1) }).optional(),
      /** ClusterRole (Secrets only) the keys writer is bound to. */
      keysRole: z.string().min(1).optional(),
      /**
       * The operator's own ServiceAccount and the ClusterRole of what it does in a tenant namespace: bound there by
       * a RoleBinding it makes right after the namespace, so its rights stay in the namespaces it manages.
       */
      operatorAccount: z.object({ namespace: z.string().min(1), name: z.string().min(1) }).optional(),
      operatorRole: z.string().min(1).optional(),
      /** Pod Security level a new tenant namespace enforces (and warns and audits at); none: no label. */
      podSecurity: z.enum(['restricted', 'baseline', 'privileged', 'none']).default('restricted'),
      /** `spec.hard` of the ResourceQuota `agentplane-tenant` in each tenant namespace; empty: none. */
      resourceQuota: z.record(z.string().min(1), quantity).default({}),
      /** The Container limits of the LimitRange `agentplane-tenant` in each tenant namespace; all empty: none. */
      limitRange: z
        .object({
          default: z.record(z.string().min(1), quantity).optional(),
          defaultRequest: z.record(z.string().min(1), quantity).optional(),
          max: z.record(z.string().min(1), quantity).optional(),
          min: z.record(z.string().min(1), quantity).optional(),
        })
        .strict()
        .default({}),
    })
    .default({ enabled: false, prefix: 'agentplane-t-', podSecurity: 'restricted', resourceQuota: {}, limitRange: {} }),
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
  /** Idle deployments sleep (docs/kubernetes.md#idle-deployments-sleep): only with an activator to send traffic to. */
  idle: z
    .object({
      /** The activator's Service; unset: no deployment sleeps. */
      activator: z.object({ namespace: z.string().min(1), name: z.string().min(1) }).optional(),
      /** How often (seconds) awake deployments are looked at, and sleeping ones checked for due work. */
      checkSeconds: z.number().int().positive().default(30),
      /**
       * Where the operator asks an agent pod for its activity (GET /ok?activity=1): `{ip}` and `{port}` are the
       * pod's. Another value points every pod at one address (a port-forward, or a test's agent server).
       */
      podUrl: z.string().min(1).default('http://{ip}:{port}'),
    })
    .default({ checkSeconds: 30, podUrl: 'http://{ip}:{port}' }),
});
export type KubernetesRuntimeConfig = z.infer<typeof kubernetesRuntimeConfigSchema>;
export type KubernetesRuntimeConfigInput = z.input<typeof kubernetesRuntimeConfigSchema>;

/** DNS name of a Service: `<service>.<namespace>.svc`, plus the cluster domain when one is configured. */
export function serviceHost(
  service: string,
  namespace: string,
  config: Pick<KubernetesRuntimeConfig, 'clusterDomain'>,
): string {
  return `${service}.${namespace}.svc${config.clusterDomain ? `.${config.clusterDomain}` : ''}`;
}
