// `agentplane operator` flags: the NetworkPolicies of agent, build and Postgres pods.
import { runtimeOptions } from './runtime.ts';
import { bool, json, list } from '../../lib/option-readers.ts';
import { labelMap, listOrNone } from './read.ts';
import { DEFAULT_DNS_PEERS, PRIVATE_RANGES } from '../runtimes/kubernetes/config.ts';

export const networkingOptions = runtimeOptions({
  'network-policy': {
    type: 'string',
    description: 'true: a default-deny NetworkPolicy for every agent deployment and its Postgres',
    default: 'true',
    env: ['AGENTPLANE_NETWORK_POLICY'],
    path: 'runtime.networkPolicy.enabled',
    read: bool,
  },
  'ingress-namespace-selector': {
    type: 'string',
    description: 'Labels (k=v,...) of the namespaces whose pods may call agents (the ingress controller)',
    default: 'kubernetes.io/metadata.name=ingress-nginx',
    env: ['AGENTPLANE_INGRESS_NAMESPACE_SELECTOR'],
    path: 'runtime.networkPolicy.ingressNamespaceSelector',
    read: labelMap,
  },
  'build-egress-except': {
    type: 'string',
    description: 'Comma-separated CIDRs build pods may not reach (none: no exception)',
    default: '169.254.0.0/16',
    env: ['AGENTPLANE_BUILD_EGRESS_EXCEPT_CIDRS'],
    path: 'runtime.networkPolicy.buildEgressExceptCidrs',
    read: listOrNone,
  },
  'agent-egress-except': {
    type: 'string',
    description: 'Comma-separated CIDRs agents may not reach (none: no exception)',
    default: PRIVATE_RANGES.join(','),
    env: ['AGENTPLANE_AGENT_EGRESS_EXCEPT_CIDRS'],
    path: 'runtime.networkPolicy.agentEgressExceptCidrs',
    read: listOrNone,
  },
  'dns-peers': {
    type: 'string',
    description:
      'JSON list of NetworkPolicy peers agent and build pods may query DNS at (on --dns-ports only; OpenShift: the openshift-dns namespace)',
    default: JSON.stringify(DEFAULT_DNS_PEERS),
    env: ['AGENTPLANE_DNS_PEERS'],
    path: 'runtime.networkPolicy.dnsPeers',
    read: json,
  },
  'dns-ports': {
    type: 'string',
    description: 'Comma-separated ports (UDP and TCP) of the DNS rule (OpenShift: 53,5353)',
    default: '53',
    env: ['AGENTPLANE_DNS_PORTS'],
    path: 'runtime.networkPolicy.dnsPorts',
    read: (v) => (v === undefined ? undefined : list(v).map(Number)),
  },
  'agent-ingress-from': {
    type: 'string',
    description:
      'JSON list of NetworkPolicy peers that may also call agents on their port (IP-target load balancers, metrics scrapers)',
    default: '[]',
    env: ['AGENTPLANE_AGENT_INGRESS_FROM'],
    path: 'runtime.networkPolicy.agentIngressFrom',
    read: json,
  },
});
