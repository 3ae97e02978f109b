// The KubeConfig every agentplane process talks to a Kubernetes API server through (operator, control plane,
// listener, activator, uninstall). @kubernetes/client-node 2.x gives every request of its generated API clients a
// dispatcher (an undici Agent) of its own (KubeConfig.applySecurityAuthentication), so each call opened a new TCP
// connection and made a full TLS handshake, parsing the cluster's CA again: the operator's reconciles paid a
// handshake per object they read or wrote, and the API server a connection per call. loadKubeConfig's clients keep
// one dispatcher per TLS identity instead: connections are kept alive and reused, as client-go's transport does.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { KubeConfig, type RequestContext } from '@kubernetes/client-node';

type Dispatcher = NonNullable<ReturnType<RequestContext['getDispatcher']>>;

/** The kubeconfig `file`, or the default one (KUBECONFIG, ~/.kube/config, in-cluster), its API clients pooled. */
export function loadKubeConfig(file?: string): KubeConfig {
  const kc = new KubeConfig();
  if (file) kc.loadFromFile(file);
  else kc.loadFromDefault();
  return reuseConnections(kc);
}

/** A file's bytes or inline (base64) data, as the client library reads them, or '' when neither is set. */
function material(file: string | undefined, data: string | undefined): string {
  if (data) return data;
  if (!file) return '';
  try {
    return readFileSync(file).toString('base64');
  } catch {
    // The library reads the same file for the request and reports it; this identity only has to differ.
    return `unreadable:${file}`;
  }
}

/**
 * What the connections of the current context are made with: the server, the proxy and every TLS input (CA, client
 * certificate and key, as files are now). A rotated certificate or CA is another identity, so its requests get new
 * connections. Undefined when that cannot be known from the kubeconfig: an exec plugin (`exec`, or an auth provider
 * that runs one) may hand the library a client certificate of its own per request, so those requests keep the
 * library's own dispatchers. Token providers (in-cluster's token file, OIDC, the cloud ones) set a header only.
 */
function tlsIdentity(kc: KubeConfig): string | undefined {
  const cluster = kc.getCurrentCluster();
  const user = kc.getCurrentUser();
  const provider = user?.authProvider as { name?: string; config?: Record<string, unknown> } | undefined;
  if (!cluster || user?.exec || provider?.name === 'exec' || provider?.config?.exec) return undefined;
  const parts = [
    cluster.server,
    cluster.proxyUrl ?? '',
    String(cluster.skipTLSVerify ?? false),
    cluster.tlsServerName ?? '',
    material(cluster.caFile, cluster.caData),
    material(user?.certFile, user?.certData),
    material(user?.keyFile, user?.keyData),
  ];
  return createHash('sha256').update(parts.join('\0')).digest('hex');
}

/**
 * `kc` (it delegates to it: same contexts, credentials and authentication per request) whose API clients reuse
 * their connections. Each request still goes through the library's own authentication (headers such as a bearer
 * token read from its file are fresh per request); only the dispatcher it made is swapped for the one kept for the
 * same TLS identity, before it ever connected. When the identity changes, the dispatcher of the old one is closed
 * (its requests in flight finish first) and the new one kept.
 */
export function reuseConnections(kc: KubeConfig): KubeConfig {
  let kept: { identity: string; dispatcher: Dispatcher } | undefined;
  const pooled = Object.create(kc) as KubeConfig;
  pooled.applySecurityAuthentication = async (context: RequestContext) => {
    await kc.applySecurityAuthentication(context);
    const fresh = context.getDispatcher();
    if (!fresh) return;
    const identity = tlsIdentity(kc);
    if (identity === undefined) return;
    // A library that keeps its dispatchers itself hands the same one again: nothing to swap or close.
    if (kept?.dispatcher === fresh) return;
    if (kept?.identity === identity) {
      context.setDispatcher(kept.dispatcher);
      // Never used: it holds no connection, closing it only marks it closed.
      void fresh.close().catch(() => {});
      return;
    }
    const previous = kept;
    kept = { identity, dispatcher: fresh };
    void previous?.dispatcher.close().catch(() => {});
  };
  return pooled;
}
