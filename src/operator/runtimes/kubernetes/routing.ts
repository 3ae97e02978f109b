// How a deployment's agent server is reached: its Service, and when a host is known an Ingress or (with a Gateway
// configured) an HTTPRoute, the host rules they obey, and the URL the status reports. Pure, like server.ts.
import type { V1Ingress, V1Service } from '@kubernetes/client-node';
import { ValidationError } from '../../../lib/errors.ts';
import { serviceHost, type KubernetesRuntimeConfig } from './config.ts';
import { childMeta, selectorLabels, type Target } from './labels.ts';
import type { HttpRoute } from './http-route.ts';
import { serverName } from './server.ts';

/** The agent Service's port (named `http`). */
const SERVICE_PORT = 80;

export function makeService(target: Target): V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: childMeta(target, serverName(target), 'server'),
    spec: {
      type: 'ClusterIP',
      selector: selectorLabels(target, 'server'),
      ports: [{ name: 'http', port: SERVICE_PORT, targetPort: 'http', protocol: 'TCP' }],
    },
  };
}

const GENERATED_NAME = /^ag-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A custom host is allowed when it is a subdomain of an allowed suffix and not a generated deployment name. */
export function customHostViolation(host: string, allowed: string[]): string | undefined {
  if (!allowed.length)
    return `custom_url "${host}" is not allowed: this cluster serves deployments only at their generated host`;
  const suffix = allowed.map((d) => d.replace(/^\.+/, '').toLowerCase()).find((d) => host.endsWith(`.${d}`));
  if (!suffix) return `custom_url "${host}" is outside the allowed domains (${allowed.join(', ')})`;
  if (GENERATED_NAME.test(host.split('.')[0]!)) return `custom_url "${host}" uses a name reserved for generated hosts`;
  return undefined;
}

/**
 * Host an Ingress serves: custom_url's host (only under an allowed domain), else `<name>.<base domain>`, else none
 * (cluster-internal only).
 */
export function ingressHost(
  target: Target,
  customUrl: string | null | undefined,
  config: KubernetesRuntimeConfig,
): string | undefined {
  if (customUrl) {
    let host: string;
    try {
      host = new URL(customUrl.includes('://') ? customUrl : `https://${customUrl}`).hostname;
    } catch {
      throw new ValidationError(`custom_url "${customUrl}" is not a URL`);
    }
    if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(host)) {
      throw new ValidationError(`custom_url "${customUrl}" has no valid host name`);
    }
    const refused = customHostViolation(host, config.ingress.allowedCustomDomains);
    if (refused) throw new ValidationError(refused);
    return host;
  }
  return config.ingress.baseDomain ? `${target.name}.${config.ingress.baseDomain}` : undefined;
}

/** The TLS Secret an agent Ingress names: the shared one, or its own (issued by cert-manager), or none. */
function ingressTlsSecret(target: Target, config: KubernetesRuntimeConfig): string | undefined {
  return config.ingress.tlsSecretPerIngress ? `${serverName(target)}-tls` : config.ingress.tlsSecretName;
}

export function makeIngress(target: Target, host: string, config: KubernetesRuntimeConfig): V1Ingress {
  const meta = childMeta(target, serverName(target), 'server');
  const annotations = config.ingress.annotations ?? {};
  const tlsSecret = ingressTlsSecret(target, config);
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: Object.keys(annotations).length ? { ...meta, annotations: { ...annotations } } : meta,
    spec: {
      ...(config.ingress.className ? { ingressClassName: config.ingress.className } : {}),
      ...(tlsSecret ? { tls: [{ hosts: [host], secretName: tlsSecret }] } : {}),
      rules: [
        {
          host,
          http: {
            paths: [
              {
                path: '/',
                pathType: 'Prefix',
                backend: { service: { name: serverName(target), port: { name: 'http' } } },
              },
            ],
          },
        },
      ],
    },
  };
}

/**
 * The HTTPRoute that serves `host` through the configured Gateways: what makeIngress's rule says, in Gateway API
 * terms (the same host, every path under /, the agent Service). TLS is the Gateway listener's, not the route's.
 */
export function makeHttpRoute(target: Target, host: string, config: KubernetesRuntimeConfig): HttpRoute {
  const gateway = config.gateway;
  if (!gateway) throw new Error('makeHttpRoute: no Gateway configured');
  const meta = childMeta(target, serverName(target), 'server');
  const annotations = gateway.annotations ?? {};
  return {
    apiVersion: 'gateway.networking.k8s.io/v1',
    kind: 'HTTPRoute',
    metadata: Object.keys(annotations).length ? { ...meta, annotations: { ...annotations } } : meta,
    spec: {
      // Group and kind spelled out: the server defaults them, and an applied field equal to the default is no diff.
      parentRefs: gateway.parentRefs.map((p) => ({
        group: 'gateway.networking.k8s.io',
        kind: 'Gateway',
        name: p.name,
        ...(p.namespace ? { namespace: p.namespace } : {}),
        ...(p.sectionName ? { sectionName: p.sectionName } : {}),
      })),
      hostnames: [host],
      rules: [
        {
          matches: [{ path: { type: 'PathPrefix', value: '/' } }],
          // Gateway API names backend ports by number only; makeService's `http` port is 80.
          backendRefs: [{ name: serverName(target), port: SERVICE_PORT }],
        },
      ],
    },
  };
}

/** The deployment's stable URL: the Ingress (or HTTPRoute) host when there is one, else the Service's cluster DNS name. */
export function deploymentUrl(target: Target, host: string | undefined, config: KubernetesRuntimeConfig): string {
  const tls = config.gateway ? config.gateway.https : Boolean(ingressTlsSecret(target, config));
  if (host) return `${tls ? 'https' : 'http'}://${host}`;
  return `http://${serviceHost(serverName(target), target.namespace, config)}`;
}
