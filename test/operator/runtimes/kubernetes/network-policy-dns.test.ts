// What the agent and build NetworkPolicies let through on real clouds, asked the way a cluster admin would: the chart
// is rendered by the real helm with the values a cloud needs, the operator's configuration is parsed from the env the
// chart gives it, and the policies it builds are evaluated for concrete connections (test/support/network-policy.ts).
// GKE resolves through NodeLocal DNSCache (169.254.20.10) or its metadata server (169.254.169.254:53, Cloud DNS for
// GKE), both link-local and on the host network; OpenShift's DNS pods live in openshift-dns and listen on 5353.
import { describe, expect, it } from 'vitest';
import { parseOperatorConfig } from '../../../../src/operator/config.ts';
import {
  makeAgentNetworkPolicy,
  makeBuildNetworkPolicy,
} from '../../../../src/operator/runtimes/kubernetes/network-policy.ts';
import { renderChart } from '../../../support/helm/index.ts';
import { egressAllowed, ingressAllowed, type Pod } from '../../../support/network-policy.ts';
import { validateK8s } from '../../../support/kubernetes/k8s-schema.ts';
import { deploymentTarget } from '../../../support/kubernetes/target.ts';

type Json = Record<string, any>;

const id = '3c1d7e2a-9b8f-4a6e-8d5c-1f2e3a4b5c6d';
const target = deploymentTarget(id, 'agents', 'tenant-a', 'uid-a');
const podOf = (component: string): Pod => ({
  namespace: 'agents',
  labels: { 'app.kubernetes.io/instance': target.name, 'app.kubernetes.io/component': component },
});
const agent = podOf('server');
const build = podOf('build');
const coreDns: Pod = { namespace: 'kube-system', labels: { 'k8s-app': 'kube-dns' } };
const openshiftDns: Pod = {
  namespace: 'openshift-dns',
  labels: { 'dns.operator.openshift.io/daemonset-dns': 'default' },
};

/** The policies the operator makes when installed by the chart with `values`. */
function policiesFor(values: Json = {}) {
  const docs = renderChart({ values });
  const op = docs.find((d) => d.kind === 'Deployment' && d.metadata.name === 'agentplane-operator')!;
  const env = Object.fromEntries(
    (op.spec.template.spec.containers[0].env as Json[]).filter((e) => 'value' in e).map((e) => [e.name, e.value]),
  );
  const config = parseOperatorConfig(['--base-image', 'agentplane:test'], env)!;
  const policies = [makeAgentNetworkPolicy(target, config.runtime), makeBuildNetworkPolicy(target, config.runtime)];
  for (const p of policies) validateK8s(p);
  return JSON.parse(JSON.stringify(policies).replaceAll('"_from"', '"from"')) as Json[];
}

const udp = (port: number) => ({ port, protocol: 'UDP' as const });
const tcp = (port: number) => ({ port, protocol: 'TCP' as const });

describe('DNS from agent and build pods', () => {
  const defaults = policiesFor();

  it('reaches NodeLocal DNSCache and GKE metadata-server DNS on port 53 (UDP and TCP), for agents and builds', () => {
    for (const pod of [agent, build]) {
      for (const ip of ['169.254.20.10', '169.254.169.254']) {
        expect(
          egressAllowed(defaults, pod, { ip }, udp(53)),
          `${pod.labels['app.kubernetes.io/component']} ${ip}`,
        ).toBe(true);
        expect(egressAllowed(defaults, pod, { ip }, tcp(53))).toBe(true);
      }
      expect(egressAllowed(defaults, pod, { pod: coreDns, ip: '10.96.0.10' }, udp(53))).toBe(true);
    }
  });

  it('still keeps agents and builds off the cloud metadata API and other link-local ports', () => {
    for (const pod of [agent, build]) {
      for (const c of [tcp(80), tcp(443), tcp(8080), udp(123)]) {
        expect(egressAllowed(defaults, pod, { ip: '169.254.169.254' }, c)).toBe(false);
        expect(egressAllowed(defaults, pod, { ip: '169.254.20.10' }, c)).toBe(false);
      }
    }
    // A resolver peer is no way into kube-system on other ports (builds may reach private ranges anyway).
    expect(egressAllowed(defaults, agent, { pod: coreDns, ip: '10.244.0.5' }, tcp(10250))).toBe(false);
    // Agents keep their private-range block (API server, control plane), DNS or not.
    expect(egressAllowed(defaults, agent, { ip: '10.96.0.1' }, tcp(443))).toBe(false);
    expect(egressAllowed(defaults, agent, { ip: '93.184.215.14' }, tcp(443))).toBe(true);
  });

  it("reaches OpenShift's DNS pods (openshift-dns, port 5353 behind the Service) with the documented values", () => {
    expect(egressAllowed(defaults, agent, { pod: openshiftDns, ip: '10.128.0.4' }, udp(5353))).toBe(false);
    const openshift = policiesFor({
      'networkPolicy.dnsPeers': [
        { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'openshift-dns' } } },
      ],
      'networkPolicy.dnsPorts': [53, 5353],
    });
    for (const pod of [agent, build]) {
      expect(egressAllowed(openshift, pod, { pod: openshiftDns, ip: '10.128.0.4' }, udp(5353))).toBe(true);
      expect(egressAllowed(openshift, pod, { pod: openshiftDns, ip: '10.128.0.4' }, tcp(53))).toBe(true);
    }
    // Replacing the peers drops the defaults: kube-system is no resolver there.
    expect(egressAllowed(openshift, agent, { pod: coreDns, ip: '10.128.0.9' }, udp(53))).toBe(false);
  });

  it('refuses a peer Kubernetes would refuse, in the chart and in the operator, naming the value', () => {
    expect(() =>
      renderChart({
        values: {
          'networkPolicy.dnsPeers': [{ ipBlock: { cidr: '169.254.20.10/32' }, namespaceSelector: { matchLabels: {} } }],
        },
      }),
    ).toThrow(/dnsPeers/);
    expect(() => renderChart({ values: { 'networkPolicy.dnsPeers': [{ ipBlock: { cidr: 'node-local' } }] } })).toThrow(
      /dnsPeers/,
    );
    expect(() =>
      parseOperatorConfig(['--base-image', 'x', '--dns-peers', '[{"ipBlock":{"cidr":"169.254.20.10"}}]'], {}),
    ).toThrow('invalid --dns-peers: must be a CIDR');
    expect(() => parseOperatorConfig(['--base-image', 'x'], { AGENTPLANE_DNS_PEERS: '[{ipBlock' })).toThrow(
      /^invalid --dns-peers \(AGENTPLANE_DNS_PEERS\): not JSON/,
    );
    expect(() => parseOperatorConfig(['--base-image', 'x', '--agent-ingress-from', '[{}]'], {})).toThrow(
      'invalid --agent-ingress-from: each peer is an ipBlock alone, or a namespaceSelector and/or a podSelector',
    );
    expect(() => parseOperatorConfig(['--base-image', 'x', '--dns-ports', '53,dns'], {})).toThrow(/--dns-ports/);
  });
});

describe('calls into agents', () => {
  const albSubnet = { ip: '10.0.3.7' };
  const prometheus: Pod = { namespace: 'monitoring', labels: { 'app.kubernetes.io/name': 'prometheus' } };
  const nginx: Pod = { namespace: 'ingress-nginx', labels: { 'app.kubernetes.io/name': 'ingress-nginx' } };

  it('come from the ingress controller only, by default', () => {
    const defaults = policiesFor();
    expect(ingressAllowed(defaults, agent, { pod: nginx }, tcp(8000))).toBe(true);
    expect(ingressAllowed(defaults, agent, albSubnet, tcp(8000))).toBe(false);
    expect(ingressAllowed(defaults, agent, { pod: prometheus }, tcp(8000))).toBe(false);
  });

  it('also come from IP-target load balancers and metrics scrapers named in agentIngressFrom, on the server port', () => {
    const opened = policiesFor({
      'networkPolicy.agentIngressFrom': [
        { ipBlock: { cidr: '10.0.0.0/16' } },
        { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } },
      ],
    });
    expect(ingressAllowed(opened, agent, albSubnet, tcp(8000))).toBe(true);
    expect(ingressAllowed(opened, agent, { pod: prometheus }, tcp(8000))).toBe(true);
    expect(ingressAllowed(opened, agent, { pod: nginx }, tcp(8000))).toBe(true);
    expect(ingressAllowed(opened, agent, albSubnet, tcp(22))).toBe(false);
    expect(ingressAllowed(opened, agent, { ip: '10.1.0.1' }, tcp(8000))).toBe(false);
    // Build pods take no connection, whatever agents accept.
    expect(ingressAllowed(opened, build, albSubnet, tcp(8000))).toBe(false);
  });
});
