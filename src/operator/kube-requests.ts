// The operator's Kubernetes API requests, counted by verb, resource and status code: every API client made from the
// KubeConfig observeRequests returns sends through the client library's own HTTP library, wrapped. Watches (long-lived
// streams opened by informers outside the generated clients) are not requests here; their lists are.
import {
  createConfiguration,
  IsomorphicFetchHttpLibrary,
  Observable,
  ServerConfiguration,
  setHeaderMiddleware,
  type HttpLibrary,
  type KubeConfig,
  type RequestContext,
  type ResponseContext,
} from '@kubernetes/client-node';

export type ApiRequestObserver = (verb: string, resource: string, code: string) => void;

const WRITE_VERBS: Record<string, string> = { POST: 'create', PUT: 'update', PATCH: 'patch' };

/**
 * The RBAC verb and resource (`plural` or `plural/subresource`) of an API request URL, as an audit log names them:
 * `GET .../namespaces/agents/secrets` is list secrets, `PUT .../agentrevisions/x/status` update
 * agentrevisions/status. Paths outside /api and /apis (discovery, /version) are resource `other`.
 */
export function requestKind(method: string, url: string): { verb: string; resource: string } {
  const u = new URL(url, 'http://kube');
  const seg = u.pathname.split('/').filter(Boolean);
  let rest = seg[0] === 'api' ? seg.slice(2) : seg[0] === 'apis' ? seg.slice(3) : undefined;
  if (!rest?.length) return { verb: method.toLowerCase(), resource: 'other' };
  if (rest[0] === 'namespaces' && rest.length >= 3) rest = rest.slice(2);
  const [plural, name, sub] = rest;
  const resource = sub ? `${plural}/${sub}` : plural!;
  const m = method.toUpperCase();
  const verb =
    m === 'GET'
      ? name
        ? 'get'
        : u.searchParams.get('watch') === 'true'
          ? 'watch'
          : 'list'
      : m === 'DELETE'
        ? name
          ? 'delete'
          : 'deletecollection'
        : (WRITE_VERBS[m] ?? m.toLowerCase());
  return { verb, resource };
}

function counting(inner: HttpLibrary, observe: ApiRequestObserver): HttpLibrary {
  return {
    send(request: RequestContext): Observable<ResponseContext> {
      const { verb, resource } = requestKind(request.getHttpMethod(), request.getUrl());
      const sent = inner
        .send(request)
        .toPromise()
        .then(
          (response) => (observe(verb, resource, String(response.httpStatusCode)), response),
          (err: unknown) => {
            observe(verb, resource, 'error');
            throw err;
          },
        );
      return new Observable(sent);
    },
  };
}

/**
 * A KubeConfig like `kc` (same clusters, users, credentials: it delegates to `kc`) whose API clients report each
 * request to `observe`. It builds clients as KubeConfig.makeApiClient does, with a counting HTTP library.
 */
export function observeRequests(kc: KubeConfig, observe: ApiRequestObserver): KubeConfig {
  const httpApi = counting(new IsomorphicFetchHttpLibrary(), observe);
  const observed = Object.create(kc) as KubeConfig;
  observed.makeApiClient = (apiClientType) => {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('No active cluster!');
    return new apiClientType(
      createConfiguration({
        baseServer: new ServerConfiguration(cluster.server, {}),
        authMethods: { default: kc },
        middleware: [setHeaderMiddleware('User-Agent', 'agentplane-operator')],
        httpApi,
      }),
    );
  };
  return observed;
}
