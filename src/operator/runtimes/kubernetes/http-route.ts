// The Gateway API HTTPRoute (gateway.networking.k8s.io/v1) as the operator writes and reads it: a CRD kind the
// Kubernetes client has no type for, so only the fields used here are declared. Built by makeHttpRoute (server.ts).
import type { V1ObjectMeta } from '@kubernetes/client-node';

/** A Gateway API HTTPRoute (gateway.networking.k8s.io/v1): only the fields the operator writes or reads back. */
export type HttpRoute = {
  apiVersion: 'gateway.networking.k8s.io/v1';
  kind: 'HTTPRoute';
  metadata: V1ObjectMeta;
  spec: {
    parentRefs: { group?: string; kind?: string; name: string; namespace?: string; sectionName?: string }[];
    hostnames: string[];
    rules: {
      matches: { path: { type: 'PathPrefix'; value: string } }[];
      backendRefs: { name: string; port: number }[];
    }[];
  };
  status?: {
    parents?: {
      parentRef: { name: string; namespace?: string; sectionName?: string };
      controllerName?: string;
      conditions?: { type: string; status: string; reason?: string; message?: string }[];
    }[];
  };
};

/**
 * Why a parent Gateway refuses the route (Accepted or ResolvedRefs False), from the route's status as the Gateway
 * controllers wrote it; undefined while none has (yet) or every parent took it.
 */
export function httpRouteRefusal(route: Pick<HttpRoute, 'status'> | undefined): string | undefined {
  for (const parent of route?.status?.parents ?? []) {
    const refused = parent.conditions?.find(
      (c) => (c.type === 'Accepted' || c.type === 'ResolvedRefs') && c.status === 'False',
    );
    if (refused) {
      const where = `${parent.parentRef.namespace ? `${parent.parentRef.namespace}/` : ''}${parent.parentRef.name}`;
      return `Gateway ${where} refuses the HTTPRoute (${refused.type}=False, ${refused.reason ?? 'no reason'}): ${
        refused.message ?? ''
      }`.trim();
    }
  }
  return undefined;
}
