// Which sleeping deployment a request through the activator is for, from its Host: the Ingress host the sleeping
// Service carries, or the Service's own cluster DNS names; anything else is nobody's (404), never a guess.
import { describe, expect, it } from 'vitest';
import { serviceForHost } from '../../../src/operator/activator/activator.ts';

const svc = (name: string, namespace: string, host?: string) => ({
  metadata: { name, namespace, ...(host ? { annotations: { 'agentplane.dev/host': host } } : {}) },
});
const services = [svc('ag-a', 'agents', 'a.agents.example.com'), svc('ag-b', 'agents'), svc('ag-b', 'other')];

describe('serviceForHost', () => {
  it.each([
    ['the Ingress host', 'a.agents.example.com', 'agents/ag-a'],
    ['the Ingress host with a port, in capitals', 'A.Agents.Example.com:443', 'agents/ag-a'],
    ['the short Service name', 'ag-b', 'agents/ag-b'],
    ['<svc>.<ns>', 'ag-b.other', 'other/ag-b'],
    ['<svc>.<ns>.svc', 'ag-b.other.svc', 'other/ag-b'],
    ['<svc>.<ns>.svc.<domain>:80', 'ag-b.agents.svc.cluster.local:80', 'agents/ag-b'],
    ['a namespace it is not in', 'ag-a.other.svc', undefined],
    ['not a Service name under svc', 'ag-b.agents.example.com', undefined],
    ['an unknown host', 'evil.example.com', undefined],
    ['no Host', undefined, undefined],
  ] as const)('%s', (_name, host, expected) => {
    const found = serviceForHost(services as never, host);
    expect(found ? `${found.metadata.namespace}/${found.metadata.name}` : undefined).toBe(expected);
  });
});
