// `agentplane operator` flags: how agents are reached: Ingress or Gateway API HTTPRoute, their hosts and the cluster DNS suffix.
import { runtimeOptions } from './runtime.ts';
import { bool, json, list } from '../../lib/option-readers.ts';

export const routingOptions = runtimeOptions({
  'ingress-class': {
    type: 'string',
    description: 'IngressClass of agent Ingresses',
    env: ['AGENTPLANE_INGRESS_CLASS'],
    path: 'runtime.ingress.className',
  },
  'base-domain': {
    type: 'string',
    description: 'Serve deployments without custom_url at <name>.<base-domain>',
    env: ['AGENTPLANE_BASE_DOMAIN'],
    path: 'runtime.ingress.baseDomain',
  },
  'ingress-tls-secret': {
    type: 'string',
    description: 'TLS Secret for agent Ingresses',
    env: ['AGENTPLANE_INGRESS_TLS_SECRET'],
    path: 'runtime.ingress.tlsSecretName',
  },
  'ingress-tls-per-ingress': {
    type: 'string',
    description:
      'true: each agent Ingress names its own TLS Secret, <ingress name>-tls (for cert-manager to issue, see --ingress-annotations); excludes --ingress-tls-secret',
    default: 'false',
    env: ['AGENTPLANE_INGRESS_TLS_PER_INGRESS'],
    path: 'runtime.ingress.tlsSecretPerIngress',
    read: bool,
  },
  'ingress-annotations': {
    type: 'string',
    description:
      'JSON map of annotations every agent Ingress gets (e.g. {"cert-manager.io/cluster-issuer":"letsencrypt"})',
    env: ['AGENTPLANE_INGRESS_ANNOTATIONS'],
    path: 'runtime.ingress.annotations',
    read: json,
  },
  'gateway-parent-refs': {
    type: 'string',
    description:
      'JSON list of Gateways ([{"name":"agents","namespace":"gateways","sectionName":"https"}]): serve deployments through a Gateway API HTTPRoute attached to them instead of an Ingress',
    env: ['AGENTPLANE_GATEWAY_PARENT_REFS'],
    path: 'runtime.gateway.parentRefs',
    read: json,
  },
  'gateway-annotations': {
    type: 'string',
    description: 'JSON map of annotations every agent HTTPRoute gets (with --gateway-parent-refs)',
    env: ['AGENTPLANE_GATEWAY_ANNOTATIONS'],
    path: 'runtime.gateway.annotations',
    read: json,
  },
  'gateway-https': {
    type: 'string',
    description:
      'true: the Gateway terminates TLS for agent hosts, so deployment URLs are https:// (with --gateway-parent-refs)',
    default: 'true',
    env: ['AGENTPLANE_GATEWAY_HTTPS'],
    path: 'runtime.gateway.https',
    read: bool,
  },
  'allowed-custom-domains': {
    type: 'string',
    description: 'Comma-separated domains custom_url hosts must be subdomains of; empty: custom_url refused',
    env: ['AGENTPLANE_ALLOWED_CUSTOM_DOMAINS'],
    path: 'runtime.ingress.allowedCustomDomains',
    read: (v) => list(v).map((d) => d.replace(/^\*?\.+/, '').toLowerCase()),
  },
  'cluster-domain': {
    type: 'string',
    description:
      'DNS suffix after <svc>.<ns>.svc in the URLs the operator writes (e.g. cluster.local); empty: <svc>.<ns>.svc',
    default: '',
    env: ['AGENTPLANE_CLUSTER_DOMAIN'],
    path: 'runtime.clusterDomain',
    read: (v) => v ?? '',
  },
});
