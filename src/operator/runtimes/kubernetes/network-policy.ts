// Default-deny NetworkPolicies per agent deployment (and its builds, which run the repository's code). Agent pods take traffic only from the ingress controller's
// namespace and from each other, and reach only their own Postgres, cluster DNS and the internet outside private
// ranges (so not the control plane, the operator, the API server's service IP or another tenant's Postgres). The
// deployment's Postgres takes connections only from its agent pods and opens none.
import type { V1NetworkPolicy } from '@kubernetes/client-node';
import type { KubernetesRuntimeConfig } from './config.ts';
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
          _from: [{ namespaceSelector: { matchLabels: { ...np.ingressNamespaceSelector } } }, agents],
          ports: [{ protocol: 'TCP', port: SERVER_PORT }],
        },
      ],
      egress: [
        {
          to: [{ podSelector: { matchLabels: selectorLabels(target, 'database') } }],
          ports: [{ protocol: 'TCP', port: POSTGRES_PORT }],
        },
        {
          to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } } }],
          ports: [
            { protocol: 'UDP', port: 53 },
            { protocol: 'TCP', port: 53 },
          ],
        },
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

/** Build pods take no connection and reach DNS and anything outside `buildEgressExceptCidrs`. */
export function makeBuildNetworkPolicy(target: Target, config: KubernetesRuntimeConfig): V1NetworkPolicy {
  const except = config.networkPolicy.buildEgressExceptCidrs;
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: childMeta(target, `${serverName(target)}-build`, 'build'),
    spec: {
      podSelector: { matchLabels: selectorLabels(target, 'build') },
      policyTypes: ['Ingress', 'Egress'],
      egress: [
        {
          to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } } }],
          ports: [
            { protocol: 'UDP', port: 53 },
            { protocol: 'TCP', port: 53 },
          ],
        },
        { to: [{ ipBlock: { cidr: '0.0.0.0/0', ...(except.length ? { except: [...except] } : {}) } }] },
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
