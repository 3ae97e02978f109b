// `agentplane operator` flags, each declared once here with the env var the Helm chart sets: config.ts parses them,
// `agentplane operator --help` and docs/kubernetes.md's flag table (npm run gen:docs) are made from them.
import type { CommandSpec } from '../lib/cli-args.ts';
import { githubAppOptions } from '../git/github-config.ts';
import { DEFAULT_DNS_PEERS, PRIVATE_RANGES } from './runtimes/kubernetes/config.ts';

export const operatorCommand: CommandSpec = {
  name: 'operator',
  summary: 'Reconcile AgentDeployment/AgentRevision custom resources into build Jobs and agent-server Deployments',
  usage: 'agentplane operator [--namespace NS] [--kubeconfig FILE] [--registry REPO] [--push-secret NAME] [options]',
  options: {
    namespace: {
      type: 'string',
      description: 'Namespace of the AgentDeployments and of everything built for them',
      default: 'default',
      env: ['AGENTPLANE_NAMESPACE', 'POD_NAMESPACE'],
    },
    kubeconfig: {
      type: 'string',
      description: 'Kubeconfig file; without it: in-cluster config, else the default kubeconfig',
      env: ['KUBECONFIG'],
    },
    registry: {
      type: 'string',
      description:
        'Repository prefix source builds push to (e.g. registry.example.com/agents); empty: only external_docker',
      env: ['AGENTPLANE_REGISTRY'],
    },
    'build-namespace': {
      type: 'string',
      description:
        'Namespace of the build Jobs and of the Secrets they mount (push, pull, git credentials); empty: --namespace. Build pods need a privileged namespace: give them one of their own',
      env: ['AGENTPLANE_BUILD_NAMESPACE'],
    },
    'push-secret': {
      type: 'string',
      description: 'dockerconfigjson Secret BuildKit pushes with',
      env: ['AGENTPLANE_PUSH_SECRET'],
    },
    'build-pull-secret': {
      type: 'string',
      description:
        'dockerconfigjson Secret the BuildKit step pulls base images with (pull-only: RUN steps can read it)',
      env: ['AGENTPLANE_BUILD_PULL_SECRET'],
    },
    'git-credentials-prefix': {
      type: 'string',
      description:
        "Prefix of the per-tenant git credentials Secrets (<prefix><tenant>, labelled or annotated agentplane.dev/tenant=<tenant>; username+password and/or ssh-privatekey+known_hosts): a build clones only with its own tenant's",
      env: ['AGENTPLANE_GIT_CREDENTIALS_PREFIX'],
    },
    'build-image': {
      type: 'string',
      description: 'BuildKit rootless image',
      default: 'moby/buildkit:v0.16.0-rootless',
      env: ['AGENTPLANE_BUILD_IMAGE'],
    },
    'push-image': {
      type: 'string',
      description: 'Image of the push step (skopeo)',
      default: 'quay.io/skopeo/stable:v1.16.1',
      env: ['AGENTPLANE_PUSH_IMAGE'],
    },
    'build-cpu-request': {
      type: 'string',
      description: 'CPU request of each build container',
      default: '500m',
      env: ['AGENTPLANE_BUILD_CPU_REQUEST'],
    },
    'build-memory-request': {
      type: 'string',
      description: 'Memory request of each build container',
      default: '1Gi',
      env: ['AGENTPLANE_BUILD_MEMORY_REQUEST'],
    },
    'build-cpu-limit': {
      type: 'string',
      description: 'CPU limit of each build container',
      default: '2',
      env: ['AGENTPLANE_BUILD_CPU_LIMIT'],
    },
    'build-memory-limit': {
      type: 'string',
      description: 'Memory limit of each build container',
      default: '4Gi',
      env: ['AGENTPLANE_BUILD_MEMORY_LIMIT'],
    },
    'build-workspace-size': {
      type: 'string',
      description: 'sizeLimit of the build checkout and image emptyDirs',
      default: '4Gi',
      env: ['AGENTPLANE_BUILD_WORKSPACE_SIZE'],
    },
    'build-cache-size': {
      type: 'string',
      description: 'sizeLimit of the BuildKit state emptyDir',
      default: '10Gi',
      env: ['AGENTPLANE_BUILD_CACHE_SIZE'],
    },
    'base-image': {
      type: 'string',
      description: 'Image generated agent Dockerfiles build FROM (the agentplane image)',
      default: 'ghcr.io/agentplane/agentplane:0.1.0',
      env: ['AGENTPLANE_BASE_IMAGE'],
    },
    'git-image': {
      type: 'string',
      description: 'Image with git for the clone step (default: the base image)',
      env: ['AGENTPLANE_GIT_IMAGE'],
    },
    'build-timeout': {
      type: 'string',
      description: 'Seconds a build may take',
      default: '1800',
      env: ['AGENTPLANE_BUILD_TIMEOUT'],
    },
    'build-job-ttl': {
      type: 'string',
      description: 'Seconds a finished build Job (its pod and build credential) is kept before Kubernetes deletes it',
      default: '3600',
      env: ['AGENTPLANE_BUILD_JOB_TTL'],
    },
    'ingress-class': {
      type: 'string',
      description: 'IngressClass of agent Ingresses',
      env: ['AGENTPLANE_INGRESS_CLASS'],
    },
    'base-domain': {
      type: 'string',
      description: 'Serve deployments without custom_url at <name>.<base-domain>',
      env: ['AGENTPLANE_BASE_DOMAIN'],
    },
    'ingress-tls-secret': {
      type: 'string',
      description: 'TLS Secret for agent Ingresses',
      env: ['AGENTPLANE_INGRESS_TLS_SECRET'],
    },
    'ingress-tls-per-ingress': {
      type: 'string',
      description:
        'true: each agent Ingress names its own TLS Secret, <ingress name>-tls (for cert-manager to issue, see --ingress-annotations); excludes --ingress-tls-secret',
      default: 'false',
      env: ['AGENTPLANE_INGRESS_TLS_PER_INGRESS'],
    },
    'ingress-annotations': {
      type: 'string',
      description:
        'JSON map of annotations every agent Ingress gets (e.g. {"cert-manager.io/cluster-issuer":"letsencrypt"})',
      env: ['AGENTPLANE_INGRESS_ANNOTATIONS'],
    },
    'gateway-parent-refs': {
      type: 'string',
      description:
        'JSON list of Gateways ([{"name":"agents","namespace":"gateways","sectionName":"https"}]): serve deployments through a Gateway API HTTPRoute attached to them instead of an Ingress',
      env: ['AGENTPLANE_GATEWAY_PARENT_REFS'],
    },
    'gateway-annotations': {
      type: 'string',
      description: 'JSON map of annotations every agent HTTPRoute gets (with --gateway-parent-refs)',
      env: ['AGENTPLANE_GATEWAY_ANNOTATIONS'],
    },
    'gateway-https': {
      type: 'string',
      description:
        'true: the Gateway terminates TLS for agent hosts, so deployment URLs are https:// (with --gateway-parent-refs)',
      default: 'true',
      env: ['AGENTPLANE_GATEWAY_HTTPS'],
    },
    'allowed-custom-domains': {
      type: 'string',
      description: 'Comma-separated domains custom_url hosts must be subdomains of; empty: custom_url refused',
      env: ['AGENTPLANE_ALLOWED_CUSTOM_DOMAINS'],
    },
    'max-scale': {
      type: 'string',
      description: 'Largest min_scale/max_scale a deployment may ask for',
      default: '10',
      env: ['AGENTPLANE_MAX_SCALE'],
    },
    'max-cpu': {
      type: 'string',
      description: 'Largest cpu/cpu_limit (cores) a deployment may ask for',
      default: '4',
      env: ['AGENTPLANE_MAX_CPU'],
    },
    'max-memory-mb': {
      type: 'string',
      description: 'Largest memory_mb/memory_limit_mb a deployment may ask for',
      default: '8192',
      env: ['AGENTPLANE_MAX_MEMORY_MB'],
    },
    'network-policy': {
      type: 'string',
      description: 'true: a default-deny NetworkPolicy for every agent deployment and its Postgres',
      default: 'true',
      env: ['AGENTPLANE_NETWORK_POLICY'],
    },
    'ingress-namespace-selector': {
      type: 'string',
      description: 'Labels (k=v,...) of the namespaces whose pods may call agents (the ingress controller)',
      default: 'kubernetes.io/metadata.name=ingress-nginx',
      env: ['AGENTPLANE_INGRESS_NAMESPACE_SELECTOR'],
    },
    'build-egress-except': {
      type: 'string',
      description: 'Comma-separated CIDRs build pods may not reach (none: no exception)',
      default: '169.254.0.0/16',
      env: ['AGENTPLANE_BUILD_EGRESS_EXCEPT_CIDRS'],
    },
    'agent-egress-except': {
      type: 'string',
      description: 'Comma-separated CIDRs agents may not reach (none: no exception)',
      default: PRIVATE_RANGES.join(','),
      env: ['AGENTPLANE_AGENT_EGRESS_EXCEPT_CIDRS'],
    },
    'dns-peers': {
      type: 'string',
      description:
        'JSON list of NetworkPolicy peers agent and build pods may query DNS at (on --dns-ports only; OpenShift: the openshift-dns namespace)',
      default: JSON.stringify(DEFAULT_DNS_PEERS),
      env: ['AGENTPLANE_DNS_PEERS'],
    },
    'dns-ports': {
      type: 'string',
      description: 'Comma-separated ports (UDP and TCP) of the DNS rule (OpenShift: 53,5353)',
      default: '53',
      env: ['AGENTPLANE_DNS_PORTS'],
    },
    'agent-ingress-from': {
      type: 'string',
      description:
        'JSON list of NetworkPolicy peers that may also call agents on their port (IP-target load balancers, metrics scrapers)',
      default: '[]',
      env: ['AGENTPLANE_AGENT_INGRESS_FROM'],
    },
    'default-cpu': {
      type: 'string',
      description: 'CPU request (cores) when resource_spec has none',
      default: '0.5',
      env: ['AGENTPLANE_DEFAULT_CPU'],
    },
    'default-memory-mb': {
      type: 'string',
      description: 'Memory request (MiB) when resource_spec has none',
      default: '512',
      env: ['AGENTPLANE_DEFAULT_MEMORY_MB'],
    },
    'crash-loop-restarts': {
      type: 'string',
      description:
        'Restarts of a crash-looping agent pod before its revision is DEPLOY_FAILED (the progress deadline applies too)',
      default: '5',
      env: ['AGENTPLANE_CRASH_LOOP_RESTARTS'],
    },
    'cluster-domain': {
      type: 'string',
      description:
        'DNS suffix after <svc>.<ns>.svc in the URLs the operator writes (e.g. cluster.local); empty: <svc>.<ns>.svc',
      default: '',
      env: ['AGENTPLANE_CLUSTER_DOMAIN'],
    },
    'activator-service': {
      type: 'string',
      description:
        'NAMESPACE/NAME of the activator Service (agentplane activator): idle deployments (resource_spec.idle_timeout_minutes, min_scale 0) scale to 0 and their Service sends traffic to it; empty: nothing sleeps',
      env: ['AGENTPLANE_ACTIVATOR_SERVICE'],
    },
    'idle-check-interval': {
      type: 'string',
      description: 'Seconds between looks at awake deployments (idle?) and sleeping ones (due work?)',
      default: '30',
      env: ['AGENTPLANE_IDLE_CHECK_INTERVAL'],
    },
    'agent-activity-url': {
      type: 'string',
      description:
        "Where an agent pod is asked for its activity ({ip} and {port}: the pod's); another address sends every such question there",
      default: 'http://{ip}:{port}',
      env: ['AGENTPLANE_AGENT_ACTIVITY_URL'],
    },
    'image-pull-secrets': {
      type: 'string',
      description:
        'Comma-separated dockerconfigjson Secrets agent and build pods pull images with (the registry builds push to)',
      env: ['AGENTPLANE_IMAGE_PULL_SECRETS'],
    },
    'progress-deadline': {
      type: 'string',
      description: 'Seconds a rollout may stall before DEPLOY_FAILED',
      default: '600',
      env: ['AGENTPLANE_PROGRESS_DEADLINE'],
    },
    'namespace-per-tenant': {
      type: 'string',
      description: "true: run each tenant's agents in a namespace of its own, created by the operator",
      default: 'false',
      env: ['AGENTPLANE_NAMESPACE_PER_TENANT'],
    },
    'tenant-namespace-prefix': {
      type: 'string',
      description: 'Prefix of tenant namespaces (<prefix><tenant>)',
      default: 'agentplane-t-',
      env: ['AGENTPLANE_TENANT_NAMESPACE_PREFIX'],
    },
    'tenant-keys-writer': {
      type: 'string',
      description:
        'namespace/serviceaccount of the control plane, bound in each tenant namespace to --tenant-keys-role',
      env: ['AGENTPLANE_TENANT_KEYS_WRITER'],
    },
    'tenant-keys-role': {
      type: 'string',
      description: 'ClusterRole (Secrets only) the control plane gets in tenant namespaces',
      env: ['AGENTPLANE_TENANT_KEYS_ROLE'],
    },
    'tenant-operator-account': {
      type: 'string',
      description:
        "namespace/serviceaccount of the operator itself, bound in each tenant namespace to --tenant-operator-role (the operator's rights there)",
      env: ['AGENTPLANE_TENANT_OPERATOR_ACCOUNT'],
    },
    'tenant-operator-role': {
      type: 'string',
      description: 'ClusterRole of what the operator does in a tenant namespace, bound there only',
      env: ['AGENTPLANE_TENANT_OPERATOR_ROLE'],
    },
    'tenant-pod-security': {
      type: 'string',
      description:
        'Pod Security level (restricted, baseline, privileged, or none: no label) new tenant namespaces enforce, warn and audit at',
      default: 'restricted',
      env: ['AGENTPLANE_TENANT_POD_SECURITY'],
    },
    'tenant-resource-quota': {
      type: 'string',
      description: 'JSON map, the hard limits of the ResourceQuota agentplane-tenant in each tenant namespace',
      env: ['AGENTPLANE_TENANT_RESOURCE_QUOTA'],
    },
    'tenant-limit-range': {
      type: 'string',
      description:
        'JSON {default, defaultRequest, max, min} of the Container LimitRange agentplane-tenant in each tenant namespace',
      env: ['AGENTPLANE_TENANT_LIMIT_RANGE'],
    },
    'postgres-mode': {
      type: 'string',
      description:
        'auto: own Postgres StatefulSet for deployments without DATABASE_URI; external: require DATABASE_URI',
      default: 'auto',
      env: ['AGENTPLANE_POSTGRES_MODE'],
    },
    'postgres-image': {
      type: 'string',
      description: 'Image of per-deployment Postgres',
      default: 'postgres:16-alpine',
      env: ['AGENTPLANE_POSTGRES_IMAGE'],
    },
    'postgres-storage': {
      type: 'string',
      description: 'PVC size of per-deployment Postgres',
      default: '1Gi',
      env: ['AGENTPLANE_POSTGRES_STORAGE'],
    },
    'postgres-storage-class': {
      type: 'string',
      description: 'StorageClass of per-deployment Postgres',
      env: ['AGENTPLANE_POSTGRES_STORAGE_CLASS'],
    },
    'leader-elect': {
      type: 'string',
      description: 'true: act only while holding the Lease (needed with more than one replica)',
      default: 'false',
      env: ['AGENTPLANE_LEADER_ELECT'],
    },
    'lease-name': {
      type: 'string',
      description: 'Lease used for leader election',
      default: 'agentplane-operator',
      env: ['AGENTPLANE_LEASE_NAME'],
    },
    'lease-namespace': {
      type: 'string',
      description: 'Namespace of the Lease (default: the pod namespace, else --namespace)',
      env: ['POD_NAMESPACE'],
    },
    'lease-duration': {
      type: 'string',
      description: 'Seconds a silent leader keeps the Lease',
      default: '15',
      env: ['AGENTPLANE_LEASE_DURATION'],
    },
    identity: { type: 'string', description: 'Name of this replica in the Lease', env: ['POD_NAME'] },
    'health-port': {
      type: 'string',
      description: 'Port of /healthz and /readyz (0: any free port; off: none)',
      default: '8081',
      env: ['AGENTPLANE_HEALTH_PORT'],
    },
    'control-plane-url': {
      type: 'string',
      description:
        "The control plane's URL as agents reach it: with --deployment-token-key, agents get it and a token for their workspace's auth service",
      env: ['AGENTPLANE_CONTROL_PLANE_URL'],
    },
    'deployment-token-key': {
      type: 'string',
      description:
        "Base64 of 32 bytes, the same as the control plane's: signs the deployment tokens agents call the auth service with. Prefer the env var",
      env: ['AGENTPLANE_DEPLOYMENT_TOKEN_KEY'],
    },
    'source-fetch-url': {
      type: 'string',
      description:
        "The control plane's URL as build pods reach it (e.g. http://agentplane-control-plane.agentplane.svc): builds of " +
        'uploaded source tarballs (langgraph deploy) download them from there, with --source-uploads-key',
      env: ['AGENTPLANE_SOURCE_FETCH_URL'],
    },
    'source-fetch-peer': {
      type: 'string',
      description:
        'JSON NetworkPolicy peer of the control plane pods (e.g. {"namespaceSelector":{...},"podSelector":{...}}): ' +
        'build pods may connect to it (their egress otherwise skips private ranges)',
      env: ['AGENTPLANE_SOURCE_FETCH_PEER'],
    },
    'source-uploads-key': {
      type: 'string',
      description:
        "Base64 of 32 bytes, the same as the control plane's: signs the fetch token each tarball build gets (one " +
        'revision, its tarball, until the build times out). Prefer the env var',
      env: ['AGENTPLANE_SOURCE_UPLOADS_KEY'],
    },
    'listener-control-plane-url': {
      type: 'string',
      description:
        'Data-plane-only install: the control plane a listener connects to; builds of integration_id deployments ask it for a clone token (with the four --listener-* settings)',
      env: ['AGENTPLANE_LISTENER_CONTROL_PLANE_URL'],
    },
    'listener-tenant': {
      type: 'string',
      description: 'Data-plane-only install: workspace (tenant) id of the listener',
      env: ['AGENTPLANE_LISTENER_TENANT'],
    },
    'listener-id': {
      type: 'string',
      description: 'Data-plane-only install: id of the listener record',
      env: ['AGENTPLANE_LISTENER_ID'],
    },
    'listener-api-key': {
      type: 'string',
      description: "Data-plane-only install: the listener's key. Prefer the env var",
      env: ['AGENTPLANE_LISTENER_API_KEY'],
    },
    'log-level': {
      type: 'string',
      description: 'fatal, error, warn, info, debug, trace or silent',
      default: 'info',
      env: ['LOG_LEVEL'],
    },
    ...githubAppOptions,
  },
};
