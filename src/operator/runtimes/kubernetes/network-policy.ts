// Default-deny NetworkPolicies per agent deployment (and its builds, which run the repository's code). Agent pods
// take traffic only from the ingress controller's namespace, the configured extra sources (load balancers that
// target pod IPs, metrics scrapers) and each other, and reach only their own Postgres, DNS and the internet outside
// private ranges (so not the control plane, the operator, the API server's service IP or another tenant's Postgres).
// The deployment's Postgres takes connections only from its agent pods and opens none.
//
// DNS is its own rule, on the DNS ports only, to the configured resolver peers: NodeLocal DNSCache and GKE's
// metadata-server DNS listen on link-local addresses the egress except lists block (169.254.0.0/16 holds the cloud
// metadata API), and NetworkPolicy rules add up, so port 53 there opens without opening metadata HTTP.
import type { V1NetworkPolicy, V1NetworkPolicyEgressRule, V1NetworkPolicyPeer } from '@kubernetes/client-node';
import type { KubernetesRuntimeConfig, NetworkPolicyPeer } from './config.ts';
import { childMeta, selectorLabels, type Target } from './labels.ts';
import { postgresName } from './postgres.ts';
import { SERVER_PORT, serverName } from './server.ts';

const POSTGRES_PORT = 5432;
// `_from`: client-node's name for the rule's `from` (a reserved word in its generator); its serializer sends `from`.

export function agentPolicyName(target: Target): string {
  return `${serverName(target)}-agent`;
}

export function postgresPolicyName(target: Target): string {
  return postgresName(target);
}

/** Copies, so two policies never share (and a later edit never changes) one selector object. */
function peers(list: readonly NetworkPolicyPeer[]): V1NetworkPolicyPeer[] {
  return list.map((p) => structuredClone(p) as V1NetworkPolicyPeer);
}

function dnsRule(np: KubernetesRuntimeConfig['networkPolicy']): V1NetworkPolicyEgressRule {
  return {
    to: peers(np.dnsPeers),
    ports: np.dnsPorts.flatMap((port) => [
      { protocol: 'UDP', port },
      { protocol: 'TCP', port },
    ]),
  };
}

export function makeAgentNetworkPolicy(target: Target, config: KubernetesRuntimeConfig): V1NetworkPolicy {
  const np = config.networkPolicy;
  const agents = { podSelector: { matchLabels: selectorLabels(target, 'server') } };
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: childMeta(target, agentPolicyName(target), 'server'),
    spec: {
      podSelector: { matchLabels: selectorLabels(target, 'server') },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [
        {
          _from: [
            { namespaceSelector: { matchLabels: { ...np.ingressNamespaceSelector } } },
            agents,
            ...peers(np.agentIngressFrom),
          ],
          ports: [{ protocol: 'TCP', port: SERVER_PORT }],
        },
      ],
      egress: [
        {
          to: [{ podSelector: { matchLabels: selectorLabels(target, 'database') } }],
          ports: [{ protocol: 'TCP', port: POSTGRES_PORT }],
        },
        dnsRule(np),
        {
          to: [
            {
              ipBlock: {
                cidr: '0.0.0.0/0',
                ...(np.agentEgressExceptCidrs.length ? { except: [...np.agentEgressExceptCidrs] } : {}),
              },
            },
          ],
        },
      ],
    },
  };
}

/**
 * Build pods take no connection and reach DNS, anything outside `buildEgressExceptCidrs` and the control plane's pods
 * (when tarball builds fetch from them).
 */
export function makeBuildNetworkPolicy(target: Target, config: KubernetesRuntimeConfig): V1NetworkPolicy {
  const np = config.networkPolicy;
  const except = np.buildEgressExceptCidrs;
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: childMeta(target, `${serverName(target)}-build`, 'build'),
    spec: {
      podSelector: { matchLabels: selectorLabels(target, 'build') },
      policyTypes: ['Ingress', 'Egress'],
      egress: [
        dnsRule(np),
        { to: [{ ipBlock: { cidr: '0.0.0.0/0', ...(except.length ? { except: [...except] } : {}) } }] },
        // Builds of uploaded tarballs download them from the control plane, on a private address.
        ...(config.sourceFetch?.peer ? [{ to: peers([config.sourceFetch.peer]) }] : []),
      ],
    },
  };
}

export function makePostgresNetworkPolicy(target: Target): V1NetworkPolicy {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: childMeta(target, postgresPolicyName(target), 'database'),
    spec: {
      podSelector: { matchLabels: selectorLabels(target, 'database') },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [
        {
          _from: [{ podSelector: { matchLabels: selectorLabels(target, 'server') } }],
          ports: [{ protocol: 'TCP', port: POSTGRES_PORT }],
        },
      ],
      // Egress listed with no rules: Postgres opens no connection. (No `egress: []`: the server drops empty
      // lists, and the stored object would then never look converged.)
    },
  };
}
