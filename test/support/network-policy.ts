// What a set of NetworkPolicies lets through, by the semantics of networking.k8s.io/v1 (the API reference's
// NetworkPolicySpec): a pod selected by no policy of a direction is open in that direction; a selected pod is open
// only to what some rule of some selecting policy allows (rules add up); a rule without `to`/`from` matches every
// peer, one without `ports` every port. Tests ask it the questions an operator of the cluster would (can this pod
// resolve names at 169.254.20.10? reach the metadata API?), instead of comparing policy JSON. IPv4 only.
type Json = Record<string, any>;

export type Pod = { namespace: string; namespaceLabels?: Record<string, string>; labels: Record<string, string> };
/** A pod, or an address outside the pod network (host-network resolvers, load balancers, the internet). */
export type Endpoint = { pod: Pod; ip?: string } | { ip: string };
export type Connection = { port: number; protocol?: 'TCP' | 'UDP' };

function ipv4(ip: string): number {
  const parts = ip.split('.').map(Number);
  if (parts.length !== 4 || parts.some((p) => !Number.isInteger(p) || p < 0 || p > 255)) throw new Error(ip);
  return ((parts[0]! << 24) | (parts[1]! << 16) | (parts[2]! << 8) | parts[3]!) >>> 0;
}

function inCidr(ip: string, cidr: string): boolean {
  const [base, bits] = cidr.split('/');
  const n = Number(bits);
  const mask = n === 0 ? 0 : (0xffffffff << (32 - n)) >>> 0;
  return (ipv4(ip) & mask) >>> 0 === (ipv4(base!) & mask) >>> 0;
}

export function selects(selector: Json | undefined, labels: Record<string, string>): boolean {
  if (!selector) return true;
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of (selector.matchExpressions ?? []) as Json[]) {
    const has = e.key in labels;
    const value = labels[e.key];
    const ok =
      e.operator === 'In'
        ? has && e.values.includes(value)
        : e.operator === 'NotIn'
          ? !has || !e.values.includes(value)
          : e.operator === 'Exists'
            ? has
            : !has;
    if (!ok) return false;
  }
  return true;
}

const nsLabels = (p: Pod) => ({ 'kubernetes.io/metadata.name': p.namespace, ...p.namespaceLabels });

function peerMatches(peer: Json, policyNamespace: string, other: Endpoint): boolean {
  if (peer.ipBlock) {
    const ip = other.ip;
    if (!ip) return false;
    return inCidr(ip, peer.ipBlock.cidr) && !(peer.ipBlock.except ?? []).some((c: string) => inCidr(ip, c));
  }
  if (!('pod' in other)) return false;
  const pod = other.pod;
  const nsOk = peer.namespaceSelector
    ? selects(peer.namespaceSelector, nsLabels(pod))
    : pod.namespace === policyNamespace;
  return nsOk && selects(peer.podSelector, pod.labels);
}

function portMatches(ports: Json[] | undefined, c: Connection): boolean {
  if (!ports?.length) return true;
  return ports.some(
    (p) =>
      (p.protocol ?? 'TCP') === (c.protocol ?? 'TCP') &&
      (p.port === undefined || (p.endPort ? c.port >= p.port && c.port <= p.endPort : p.port === c.port)),
  );
}

/** client-node spells an ingress rule's `from` as `_from`; the wire (and YAML) spell it `from`. */
const fromOf = (rule: Json): Json[] | undefined => rule.from ?? rule._from;

function allowed(policies: Json[], pod: Pod, direction: 'Ingress' | 'Egress', other: Endpoint, c: Connection): boolean {
  const selecting = policies.filter(
    (p) =>
      p.metadata.namespace === pod.namespace &&
      selects(p.spec.podSelector, pod.labels) &&
      (p.spec.policyTypes ?? ['Ingress']).includes(direction),
  );
  if (!selecting.length) return true;
  return selecting.some((p) =>
    ((direction === 'Egress' ? p.spec.egress : p.spec.ingress) ?? []).some((rule: Json) => {
      const peers = direction === 'Egress' ? rule.to : fromOf(rule);
      const peerOk = !peers?.length || peers.some((peer: Json) => peerMatches(peer, p.metadata.namespace, other));
      return peerOk && portMatches(rule.ports, c);
    }),
  );
}

/** May `pod` open this connection to `to`? (Only the sender's egress policies are judged.) */
export function egressAllowed(policies: Json[], pod: Pod, to: Endpoint, c: Connection): boolean {
  return allowed(policies, pod, 'Egress', to, c);
}

/** May `from` open this connection to `pod`? (Only the receiver's ingress policies are judged.) */
export function ingressAllowed(policies: Json[], pod: Pod, from: Endpoint, c: Connection): boolean {
  return allowed(policies, pod, 'Ingress', from, c);
}
