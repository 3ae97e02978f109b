// The rights each identity of the chart needs beyond the verbs of its own requests, checked with the double's RBAC
// authorizer over the chart rendered by the real helm:
// - status updates the control plane makes (a listener-built revision is QUEUED for the listener; listener reports);
// - `<owner>/finalizers` update for every blockOwnerDeletion owner reference an identity sets, which a cluster running
//   the OwnerReferencesPermissionEnforcement admission plugin (on by default on most distributions) requires.
import { describe, expect, it } from 'vitest';
import { renderChart } from '../support/helm/index.ts';
import { authorize, serviceAccountUser, type RequestAttributes } from '../support/kube-apiserver/rbac.ts';

type Json = Record<string, any>;
const NS = 'agents';

function rbacOf(values: Json) {
  const docs = renderChart({ namespace: NS, values }) as Json[];
  const of = (kind: string, namespace?: string) =>
    docs.filter((d) => d.kind === kind && (namespace === undefined || (d.metadata.namespace ?? NS) === namespace));
  return {
    roles: (ns: string) => of('Role', ns),
    clusterRoles: () => of('ClusterRole'),
    roleBindings: (ns: string) => of('RoleBinding', ns),
    clusterRoleBindings: () => of('ClusterRoleBinding'),
  };
}

function allowed(values: Json, account: string, a: Omit<RequestAttributes, 'verb'> & { verb?: string }): boolean {
  return authorize(rbacOf(values), serviceAccountUser(NS, account), { verb: 'update', namespace: NS, ...a });
}

const LISTENER: Json = {
  listener: {
    enabled: true,
    controlPlaneUrl: 'https://agents.example.com',
    tenant: 'team-a',
    listenerId: '0b7c3a4e-5f6d-4e8f-9a0b-1c2d3e4f5a6b',
    apiKey: { existingSecret: 'listener-key' },
  },
};

describe('chart RBAC: status and owner-reference rights', () => {
  it('the control plane may update the status of deployments and revisions (listener-built revisions)', () => {
    for (const resource of ['agentdeployments', 'agentrevisions']) {
      expect(
        allowed({}, 'agentplane-control-plane', { group: 'agentplane.dev', resource, subresource: 'status' }),
        resource,
      ).toBe(true);
    }
  });

  it('every identity setting blockOwnerDeletion may update the owner kind’s finalizers', () => {
    // The control plane: revisions owned by deployments, Secrets owned by deployments and revisions.
    for (const resource of ['agentdeployments', 'agentrevisions']) {
      expect(
        allowed({}, 'agentplane-control-plane', { group: 'agentplane.dev', resource, subresource: 'finalizers' }),
        `control plane ${resource}/finalizers`,
      ).toBe(true);
      expect(
        allowed(LISTENER, 'agentplane-listener', { group: 'agentplane.dev', resource, subresource: 'finalizers' }),
        `listener ${resource}/finalizers`,
      ).toBe(true);
    }
    // The operator: revisions and children owned by deployments, the build-credential Secret owned by its Job.
    expect(
      allowed({}, 'agentplane-operator', {
        group: 'agentplane.dev',
        resource: 'agentdeployments',
        subresource: 'finalizers',
      }),
    ).toBe(true);
    expect(allowed({}, 'agentplane-operator', { group: 'batch', resource: 'jobs', subresource: 'finalizers' })).toBe(
      true,
    );
    // And not more than that: the control plane never writes Jobs.
    expect(
      allowed({}, 'agentplane-control-plane', { group: 'batch', resource: 'jobs', subresource: 'finalizers' }),
    ).toBe(false);
  });

  it('a long release name still gives valid names (Services: DNS-1035 labels of at most 63 characters)', () => {
    for (const release of ['a'.repeat(50), `agentplane-${'b'.repeat(42)}`]) {
      const docs = renderChart({ release, namespace: NS, values: LISTENER }) as Json[];
      const services = docs.filter((d) => d.kind === 'Service');
      expect(services.length).toBeGreaterThan(0);
      for (const s of services) {
        expect(s.metadata.name.length, s.metadata.name).toBeLessThanOrEqual(63);
        expect(s.metadata.name).toMatch(/^[a-z]([-a-z0-9]*[a-z0-9])?$/);
      }
    }
  });
});
