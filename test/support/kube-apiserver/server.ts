// A Kubernetes API server test double: real HTTP, the real REST paths and verbs, Status errors, resourceVersions,
// watch streams, generation, finalizers, namespace lifecycle (creates need an existing, non-terminating namespace;
// deleting one empties it first) and asynchronous owner-reference garbage collection with the three propagation
// policies. It exists because these machines
// cannot run a cluster; everything sent to it is admitted through the kind's validator (CRD schema for custom
// kinds), like the real server. Driven by the real @kubernetes/client-node through a generated kubeconfig.
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { parse as parseYaml, stringify } from 'yaml';
import {
  authorize,
  forbiddenMessage,
  serviceAccountUser,
  verbOf,
  type RequestAttributes,
  type UserInfo,
} from './rbac.ts';
import { servingCert, type ServingCert } from './tls.ts';
import { KindRegistry, registerCoreKinds, registerCrds, type Cause, type KindSpec } from './registry.ts';
import type { Admission } from './admit.ts';
import { ownerReferenceRefusal } from './owner-refs.ts';
import { evaluate as podSecurity } from './psa.ts';
import { serverSideApply, updateManagedFields } from './ssa.ts';

type Json = Record<string, any>;
export type HungRequest = { method: string; path: string; body: unknown };
type Stored = { spec: KindSpec; obj: Json };
/** What a write request carries to admission: who sends it, its field validation, the warnings it collects. */
type RequestContext = {
  user?: UserInfo;
  fieldValidation: string;
  warnings: string[];
  /** Who a non-apply write is recorded as in managedFields: fieldManager, else the User-Agent's product. */
  manager?: string;
  /** The write is a server-side apply: its field ownership comes from ssa.ts serverSideApply. */
  applied?: boolean;
};
type Change = { rv: number; spec: KindSpec; namespace: string; type: 'ADDED' | 'MODIFIED' | 'DELETED'; obj: Json };
type Watcher = {
  spec: KindSpec;
  namespace?: string;
  match: (labels: Json | undefined, obj: Json) => boolean;
  send: (c: Change) => void;
};

export type KubeApiServerOptions = {
  /** Folder of CRD yaml files to serve (e.g. crds/). */
  crdDir?: string;
  /** Changes kept for watch resumption; older resourceVersions answer 410 Expired. */
  historyLimit?: number;
  /** BOOKMARK interval on watches that allow bookmarks (default: a minute, the real server's cadence). */
  bookmarkMs?: number;
  /** Bearer token of the administrator (allowed everything, like system:masters). */
  token?: string;
  /**
   * Enforce RBAC for every identity but the administrator, from the Roles, ClusterRoles and bindings this server
   * stores; off: every authenticated request is allowed.
   */
  rbac?: boolean;
  /** Serve HTTPS with a self-signed certificate (kubectl sends tokens only over TLS); kubeconfigs carry its CA. */
  tls?: boolean;
  /**
   * Namespaces that exist from the start besides the ones every cluster has (default, kube-system, kube-public,
   * kube-node-lease): a namespaced object can only be created in an existing namespace.
   */
  namespaces?: string[];
  /** Delay before the garbage collector and namespace controller look at a change (default 50 ms). */
  gcDelayMs?: number;
  /**
   * The OwnerReferencesPermissionEnforcement admission plugin (on in most production clusters): setting
   * blockOwnerDeletion needs `update` on the owner's finalizers subresource. Only matters with `rbac`.
   */
  ownerReferencesPermissionEnforcement?: boolean;
  /**
   * How long a watch without timeoutSeconds stays open before the server ends it normally (the real server picks
   * between its --min-request-timeout of 30 minutes and twice that); tests make it short.
   */
  watchTimeoutMs?: number;
};

type Policy = 'Orphan' | 'Background' | 'Foreground';
const POLICIES: Policy[] = ['Foreground', 'Background', 'Orphan'];
const APPLY_PATCH = 'application/apply-patch+yaml';
const FINALIZER_ORPHAN = 'orphan';
const FINALIZER_FOREGROUND = 'foregroundDeletion';
/** Namespaces the NamespaceLifecycle admission never lets anyone delete. */
const IMMORTAL_NAMESPACES = ['default', 'kube-system', 'kube-public'];

export class KubeApiServer {
  readonly registry = new KindRegistry();
  private readonly objects = new Map<string, Stored>();
  private readonly changes: Change[] = [];
  private readonly watchers = new Set<Watcher>();
  private rv = 0;
  private compactedRv = 0;
  private server: Server | undefined;
  url = '';
  readonly token: string;
  /** Every request seen, "METHOD path", for tests that check what a client did. */
  readonly requests: string[] = [];
  /** The bodies of the writes (POST, PUT, PATCH) as received, for tests that check what a client sent. */
  readonly writes: { method: string; path: string; body: unknown }[] = [];
  /** Connections clients opened (TCP; each a TLS handshake when serving TLS), for tests of connection reuse. */
  connections = 0;
  /** The same requests with their query strings. */
  readonly requestUrls: string[] = [];
  /** Container logs served at GET .../pods/<name>/log?container=<c>, keyed "namespace/pod/container". */
  readonly podLogs = new Map<string, string>();
  private readonly hangs = new Set<(req: HungRequest) => boolean>();
  private readonly contexts = new WeakMap<ServerResponse, RequestContext>();
  /** Bearer tokens of the identities other than the administrator. */
  private readonly identities = new Map<string, UserInfo>();
  /** Every write admission refused (400, 403 or 422), as its message: what a test looks at when a write fails. */
  readonly refused: string[] = [];
  /** Every request RBAC refused, as its 403 message (tests assert this stays empty). */
  readonly denied: string[] = [];
  /** What each identity was allowed to do, "verb group/resource[/subresource]" by user name (grants in use). */
  readonly used = new Map<string, Set<string>>();

  /** A token for a ServiceAccount (like a projected token): requests with it are that account's. */
  serviceAccountToken(namespace: string, name: string): string {
    const token = `sa-${namespace}-${name}-${randomUUID()}`;
    this.identities.set(token, serviceAccountUser(namespace, name));
    return token;
  }

  /** Stores an object as the administrator would, bypassing HTTP (RBAC objects from a rendered chart). */
  seed(obj: Json, defaultNamespace: string): void {
    const [group, version] = obj.apiVersion.includes('/') ? obj.apiVersion.split('/') : ['', obj.apiVersion];
    const spec = this.registry.all().find((k) => k.group === group && k.version === version && k.kind === obj.kind);
    if (!spec) throw new Error(`kube-apiserver double: no kind ${obj.apiVersion}/${obj.kind}`);
    const namespace = spec.namespaced ? (obj.metadata.namespace ?? defaultNamespace) : '';
    const admitted = spec.admit(
      structuredClone({ ...obj, metadata: { ...obj.metadata, ...(spec.namespaced ? { namespace } : {}) } }),
    );
    if (!('object' in admitted))
      throw new Error(`seeding ${obj.kind} ${obj.metadata.name}: ${JSON.stringify(admitted)}`);
    const rv = ++this.rv;
    const o = admitted.object;
    o.metadata = {
      ...o.metadata,
      uid: randomUUID(),
      resourceVersion: String(rv),
      creationTimestamp: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    };
    const key = this.key(spec.group, spec.plural, namespace, o.metadata.name);
    const existed = this.objects.has(key);
    this.objects.set(key, { spec, obj: o });
    this.record(rv, spec, namespace, existed ? 'MODIFIED' : 'ADDED', o);
  }

  /** Removes seeded objects of a kind (an uninstalled chart's RBAC). */
  unseed(group: string, plural: string, match: (obj: Json) => boolean): void {
    for (const s of [...this.objects.values()])
      if (s.spec.group === group && s.spec.plural === plural && match(s.obj)) this.remove(s.spec, s.obj);
  }

  private stored(group: string, plural: string, namespace?: string): Json[] {
    return [...this.objects.values()]
      .filter(
        (s) =>
          s.spec.group === group &&
          s.spec.plural === plural &&
          (namespace === undefined || s.obj.metadata.namespace === namespace),
      )
      .map((s) => s.obj);
  }

  private allowed(user: UserInfo, a: RequestAttributes): boolean {
    const rbac = 'rbac.authorization.k8s.io';
    return authorize(
      {
        roles: (ns) => this.stored(rbac, 'roles', ns),
        clusterRoles: () => this.stored(rbac, 'clusterroles'),
        roleBindings: (ns) => this.stored(rbac, 'rolebindings', ns),
        clusterRoleBindings: () => this.stored(rbac, 'clusterrolebindings'),
      },
      user,
      a,
    );
  }

  /**
   * Requests matching `match` are read and then never answered (a hung API server or network), until the returned
   * function is called; requests already held stay unanswered.
   */
  hang(match: (req: HungRequest) => boolean): () => void {
    this.hangs.add(match);
    return () => this.hangs.delete(match);
  }

  constructor(private readonly opts: KubeApiServerOptions = {}) {
    registerCoreKinds(this.registry);
    if (opts.crdDir) registerCrds(this.registry, opts.crdDir);
    this.token = opts.token ?? 'test-token';
    for (const name of new Set([
      'default',
      'kube-system',
      'kube-public',
      'kube-node-lease',
      ...(opts.namespaces ?? []),
    ])) {
      this.seed({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } }, '');
    }
  }

  private gcTimer: NodeJS.Timeout | undefined;
  private readonly gcHolds = new Set<object>();

  /**
   * Stops the garbage collector and the namespace controller until the returned function is called: dependents
   * of a deleted owner and the contents of a terminating namespace linger, as they do on a busy cluster.
   */
  holdGarbageCollection(): () => void {
    const hold = {};
    this.gcHolds.add(hold);
    return () => {
      this.gcHolds.delete(hold);
      this.scheduleGc();
    };
  }

  private cert: ServingCert | undefined;

  async start(): Promise<string> {
    const handler = (req: IncomingMessage, res: ServerResponse) => {
      this.handle(req, res).catch((err: unknown) => {
        if (!res.headersSent) this.status(res, 500, 'InternalError', String(err));
      });
    };
    if (this.opts.tls) this.cert = servingCert();
    this.server = this.cert
      ? createTlsServer({ key: this.cert.key, cert: this.cert.cert }, handler)
      : createServer(handler);
    this.server.on('connection', () => this.connections++);
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    this.url = `${this.cert ? 'https' : 'http'}://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.url;
  }

  async stop(): Promise<void> {
    clearTimeout(this.gcTimer);
    this.gcHolds.add({});
    for (const w of this.watchers) w.send = () => {};
    this.server?.closeAllConnections();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }

  /** Connections open now. */
  openConnections(): Promise<number> {
    return new Promise((resolve, reject) =>
      this.server ? this.server.getConnections((err, n) => (err ? reject(err) : resolve(n))) : resolve(0),
    );
  }

  /** Writes a kubeconfig pointing at this server; returns its path. */
  writeKubeconfig(path: string, namespace = 'default', token = this.token): string {
    const cfg = {
      apiVersion: 'v1',
      kind: 'Config',
      // client-node refuses plain http unless TLS verification is off; over TLS the server's own certificate is the CA.
      clusters: [
        {
          name: 'double',
          cluster: this.cert
            ? { server: this.url, 'certificate-authority-data': Buffer.from(this.cert.cert).toString('base64') }
            : { server: this.url, 'insecure-skip-tls-verify': true },
        },
      ],
      users: [{ name: 'tester', user: { token } }],
      contexts: [{ name: 'double', context: { cluster: 'double', user: 'tester', namespace } }],
      'current-context': 'double',
    };
    writeFileSync(path, stringify(cfg));
    return path;
  }

  /** Direct read for assertions (bypasses HTTP). */
  peek(group: string, plural: string, namespace: string, name: string): Json | undefined {
    const s = this.objects.get(this.key(group, plural, namespace, name));
    return s && structuredClone(s.obj);
  }

  // ---- HTTP ----

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    this.requests.push(`${req.method} ${url.pathname}`);
    this.requestUrls.push(`${req.method} ${url.pathname}${url.search}`);
    const bearer = (req.headers.authorization ?? '').replace(/^Bearer /, '');
    const user = bearer === this.token ? undefined : this.identities.get(bearer);
    if (bearer !== this.token && !user) return this.status(res, 401, 'Unauthorized', 'Unauthorized');
    if (this.discovery(url.pathname, res)) return;
    const route = this.route(url.pathname);
    if (!route) return this.status(res, 404, 'NotFound', 'the server could not find the requested resource');
    const { spec, name, sub } = route;
    // Cluster-scoped kinds (Namespace) live under the empty namespace.
    const namespace = spec.namespaced ? route.namespace : '';
    const q = url.searchParams;
    const method = req.method ?? 'GET';
    // DELETE may carry DeleteOptions (preconditions) as its body, like on the real server.
    const body = ['POST', 'PUT', 'PATCH', 'DELETE'].includes(method)
      ? await readJson(req, req.headers['content-type'] ?? '')
      : undefined;
    if (body === null) return this.status(res, 400, 'BadRequest', 'the request body is not valid JSON');
    if (method !== 'DELETE' && body !== undefined) this.writes.push({ method, path: url.pathname, body });
    if (user && this.opts.rbac) {
      // A list or watch narrowed to one name by field selector is authorized as a request for that name, so
      // resourceNames rules can grant it (what `kubectl get secret x --watch` relies on).
      const byName =
        !name && method === 'GET'
          ? /(?:^|,)metadata\.name==?([^,]+)(?:,|$)/.exec(q.get('fieldSelector') ?? '')?.[1]
          : undefined;
      const attrs: RequestAttributes = {
        verb: verbOf(method, Boolean(name), q.get('watch') === 'true' || q.get('watch') === '1'),
        group: spec.group,
        resource: spec.plural,
        subresource: sub,
        namespace: namespace || undefined,
        name: name ?? byName,
      };
      if (!this.allowed(user, attrs)) return this.forbid(res, user, attrs, spec);
      const uses = this.used.get(user.name) ?? new Set<string>();
      uses.add(`${attrs.verb} ${attrs.group}/${attrs.resource}${sub ? `/${sub}` : ''}`);
      this.used.set(user.name, uses);
      // Binding a role needs `bind` on it (the escalation check; holding all of its permissions is not modelled).
      if (
        spec.plural.endsWith('bindings') &&
        spec.group === 'rbac.authorization.k8s.io' &&
        (method === 'POST' || method === 'PUT' || method === 'PATCH')
      ) {
        const ref = (body as Json | undefined)?.roleRef ?? {};
        const bind: RequestAttributes = {
          verb: 'bind',
          group: 'rbac.authorization.k8s.io',
          resource: ref.kind === 'ClusterRole' ? 'clusterroles' : 'roles',
          name: ref.name,
          namespace: ref.kind === 'ClusterRole' ? undefined : namespace || undefined,
        };
        if (!this.allowed(user, bind)) return this.forbid(res, user, bind, spec);
      }
    }
    this.contexts.set(res, {
      user,
      fieldValidation: q.get('fieldValidation') ?? 'Warn',
      warnings: [],
      manager: q.get('fieldManager') ?? (req.headers['user-agent'] ?? '').split('/')[0],
    });
    for (const match of this.hangs) if (match({ method, path: url.pathname, body })) return;
    if (sub === 'log' && spec.plural === 'pods' && method === 'GET')
      return this.podLog(res, namespace!, name!, q.get('container') ?? '', q);
    if (sub && sub !== 'status')
      return this.status(res, 404, 'NotFound', 'the server could not find the requested resource');
    if (sub === 'status' && !spec.statusSubresource)
      return this.status(res, 404, 'NotFound', 'the server could not find the requested resource');

    if (method === 'GET' && !name) {
      const scope = spec.namespaced ? namespace : undefined;
      if (q.get('watch') === 'true' || q.get('watch') === '1') return this.watch(req, res, spec, scope, q);
      return this.list(res, spec, scope, q.get('labelSelector') ?? '', q.get('fieldSelector') ?? '');
    }
    if (method === 'GET') return this.get(res, spec, namespace!, name!);
    if (method === 'POST' && !name && namespace !== undefined) return this.create(res, spec, namespace, body as Json);
    if (method === 'PUT' && name) return this.replace(res, spec, namespace!, name, body as Json, sub === 'status');
    if (method === 'PATCH' && name && (req.headers['content-type'] ?? '').startsWith(APPLY_PATCH))
      return this.applyPatch(res, spec, namespace!, name, body, q, sub === 'status');
    if (method === 'PATCH' && name)
      return this.patch(res, spec, namespace!, name, body, req.headers['content-type'] ?? '', sub === 'status');
    if (method === 'DELETE' && name) return this.delete(res, spec, namespace!, name, body as Json | undefined, q);
    return this.status(res, 405, 'MethodNotAllowed', `the server does not allow this method on the requested resource`);
  }

  private route(path: string): { spec: KindSpec; namespace?: string; name?: string; sub?: string } | undefined {
    const parts = path.split('/').filter(Boolean);
    let group: string;
    let version: string;
    let rest: string[];
    if (parts[0] === 'api') {
      group = '';
      version = parts[1] ?? '';
      rest = parts.slice(2);
    } else if (parts[0] === 'apis') {
      group = parts[1] ?? '';
      version = parts[2] ?? '';
      rest = parts.slice(3);
    } else return undefined;
    let namespace: string | undefined;
    if (rest[0] === 'namespaces' && rest.length >= 3) {
      namespace = decodeURIComponent(rest[1]!);
      rest = rest.slice(2);
    }
    const spec = this.registry.lookup(group, version, rest[0] ?? '');
    if (!spec) return undefined;
    return { spec, namespace, name: rest[1] && decodeURIComponent(rest[1]), sub: rest[2] };
  }

  private key(group: string, plural: string, namespace: string, name: string): string {
    return `${group}/${plural}/${namespace}/${name}`;
  }

  private apiVersion(spec: KindSpec): string {
    return spec.group ? `${spec.group}/${spec.version}` : spec.version;
  }

  private list(
    res: ServerResponse,
    spec: KindSpec,
    namespace: string | undefined,
    selector: string,
    fields = '',
  ): void {
    const labels = selectorMatcher(selector);
    const byField = fieldMatcher(fields);
    const match = (l: Json | undefined, obj?: Json) => labels(l) && (!obj || byField(obj));
    const items = [...this.objects.values()]
      .filter((s) => s.spec === spec && (namespace === undefined || s.obj.metadata.namespace === namespace))
      .filter((s) => match(s.obj.metadata.labels, s.obj))
      .map((s) => s.obj)
      .sort((a, b) =>
        `${a.metadata.namespace}/${a.metadata.name}` < `${b.metadata.namespace}/${b.metadata.name}` ? -1 : 1,
      );
    this.json(res, 200, {
      apiVersion: this.apiVersion(spec),
      kind: `${spec.kind}List`,
      metadata: { resourceVersion: String(this.rv) },
      items,
    });
  }

  private get(res: ServerResponse, spec: KindSpec, namespace: string, name: string): void {
    const s = this.objects.get(this.key(spec.group, spec.plural, namespace, name));
    if (!s) return this.notFound(res, spec, name);
    this.json(res, 200, s.obj);
  }

  private create(res: ServerResponse, spec: KindSpec, namespace: string, body: Json): void {
    if (!body || typeof body !== 'object') return this.status(res, 400, 'BadRequest', 'body must be an object');
    const name = body.metadata?.name;
    if (body.metadata?.namespace && body.metadata.namespace !== namespace) {
      return this.status(
        res,
        400,
        'BadRequest',
        'the namespace of the provided object does not match the namespace sent on the request',
      );
    }
    // Like the real decoder: missing apiVersion/kind default from the URL; a different one is refused.
    body.apiVersion ??= this.apiVersion(spec);
    body.kind ??= spec.kind;
    if (body.kind !== spec.kind || body.apiVersion !== this.apiVersion(spec)) {
      return this.status(
        res,
        400,
        'BadRequest',
        `the API version in the data (${body.apiVersion}) does not match the expected API version (${this.apiVersion(spec)})`,
      );
    }
    // NamespaceLifecycle admission: runs before validation and storage, like on the real server.
    if (spec.namespaced) {
      const ns = this.objects.get(this.key('', 'namespaces', '', namespace));
      if (!ns)
        return this.status(res, 404, 'NotFound', `namespaces "${namespace}" not found`, {
          name: namespace,
          kind: 'namespaces',
        });
      if (ns.obj.metadata.deletionTimestamp) {
        const what = `${spec.plural}${spec.group ? '.' + spec.group : ''}`;
        return this.status(
          res,
          403,
          'Forbidden',
          `${what} "${name ?? ''}" is forbidden: unable to create new content in namespace ${namespace} because it is being terminated`,
          {
            name,
            group: spec.group,
            kind: spec.plural,
            causes: [
              {
                reason: 'NamespaceTerminating',
                message: `namespace ${namespace} is being terminated`,
                field: 'metadata.namespace',
              },
            ],
          },
        );
      }
    }
    const key = this.key(spec.group, spec.plural, namespace, name ?? '');
    if (name && this.objects.has(key)) {
      return this.status(
        res,
        409,
        'AlreadyExists',
        `${spec.plural}${spec.group ? '.' + spec.group : ''} "${name}" already exists`,
        { name, group: spec.group, kind: spec.plural },
      );
    }
    const candidate: Json = structuredClone(body);
    if (spec.statusSubresource) delete candidate.status;
    const {
      resourceVersion: _r,
      uid: _u,
      creationTimestamp: _c,
      deletionTimestamp: _d,
      generation: _g,
      ...meta
    } = candidate.metadata ?? {};
    // The uid exists before admission: defaulting may use it (a Job's generated selector).
    candidate.metadata = { ...(spec.namespaced ? { ...meta, namespace } : meta), uid: randomUUID() };
    const admitted = spec.admit(candidate);
    const obj = this.admitted(res, spec, namespace, name, admitted, undefined);
    if (!obj) return;
    const ctx = this.contexts.get(res);
    if (ctx && !ctx.applied) {
      delete obj.metadata.managedFields;
      const managedFields = updateManagedFields(undefined, obj, ctx.manager ?? '', this.apiVersion(spec), now());
      if (managedFields.length) obj.metadata.managedFields = managedFields;
    }
    const rv = ++this.rv;
    obj.metadata = {
      ...obj.metadata,
      resourceVersion: String(rv),
      creationTimestamp: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
      ...(spec.tracksGeneration ? { generation: 1 } : {}),
    };
    this.objects.set(key, { spec, obj });
    this.record(rv, spec, namespace, 'ADDED', obj);
    this.json(res, 201, obj);
  }

  private replace(
    res: ServerResponse,
    spec: KindSpec,
    namespace: string,
    name: string,
    body: Json,
    status: boolean,
  ): void {
    const key = this.key(spec.group, spec.plural, namespace, name);
    const cur = this.objects.get(key);
    if (!cur) return this.notFound(res, spec, name);
    if (!body || typeof body !== 'object' || body.metadata?.name !== name) {
      return this.status(res, 400, 'BadRequest', 'the name of the object does not match the name on the URL');
    }
    body.apiVersion ??= this.apiVersion(spec);
    body.kind ??= spec.kind;
    const rvIn = body.metadata?.resourceVersion;
    if (!rvIn && spec.requireResourceVersionOnUpdate) {
      return this.invalid(res, spec, name, [
        {
          field: 'metadata.resourceVersion',
          message: 'Invalid value: 0x0: must be specified for an update',
          reason: 'FieldValueInvalid',
        },
      ]);
    }
    if (rvIn && rvIn !== cur.obj.metadata.resourceVersion) return this.conflict(res, spec, name);
    if (body.metadata?.uid && body.metadata.uid !== cur.obj.metadata.uid)
      return this.conflict(res, spec, name, 'Precondition failed: UID in precondition does not match');
    const old = cur.obj;
    let next: Json;
    if (status) {
      next = { ...structuredClone(old), status: structuredClone(body.status) };
    } else {
      next = structuredClone(body);
      if (spec.statusSubresource) next.status = structuredClone(old.status);
      const m = next.metadata;
      const fin = old.metadata.deletionTimestamp
        ? (m.finalizers ?? []).filter((f: string) => old.metadata.finalizers?.includes(f))
        : m.finalizers;
      next.metadata = {
        ...m,
        namespace: spec.namespaced ? namespace : undefined,
        uid: old.metadata.uid,
        creationTimestamp: old.metadata.creationTimestamp,
        deletionTimestamp: old.metadata.deletionTimestamp,
        generation: old.metadata.generation,
        finalizers: fin,
      };
    }
    for (const k of Object.keys(next.metadata)) if (next.metadata[k] === undefined) delete next.metadata[k];
    if (next.metadata.finalizers?.length === 0) delete next.metadata.finalizers;
    // `managedFields: [{}]` is the documented reset of field ownership; absent keeps what the object had.
    const mf = next.metadata.managedFields;
    const reset = Array.isArray(mf) && mf.length === 1 && !Object.keys(mf[0] ?? {}).length;
    if (reset) delete next.metadata.managedFields;
    else if (mf === undefined && old.metadata.managedFields && !status)
      next.metadata.managedFields = old.metadata.managedFields;
    if (next.status === undefined) delete next.status;
    const admitted = this.admitted(res, spec, namespace, name, spec.admit(next, old), old);
    if (!admitted) return;
    next = admitted;
    const ctx = this.contexts.get(res);
    // A reset (`managedFields: [{}]`) leaves no entry, not even the resetting writer's.
    if (ctx && !ctx.applied && !reset) {
      const managedFields = updateManagedFields(
        old,
        next,
        ctx.manager ?? '',
        this.apiVersion(spec),
        now(),
        status ? 'status' : undefined,
      );
      if (managedFields.length) next.metadata.managedFields = managedFields;
      else delete next.metadata.managedFields;
    }
    if (spec.tracksGeneration && !status && JSON.stringify(canonNoMeta(next)) !== JSON.stringify(canonNoMeta(old))) {
      next.metadata.generation = (old.metadata.generation ?? 1) + 1;
    }
    if (
      JSON.stringify(canon(next)) ===
      JSON.stringify(canon({ ...old, metadata: { ...old.metadata, resourceVersion: next.metadata.resourceVersion } }))
    ) {
      return this.json(res, 200, old); // no-op writes keep the resourceVersion, as on the real server
    }
    if (next.metadata.deletionTimestamp && this.finalized(spec, next)) {
      this.remove(cur.spec, old);
      return this.json(res, 200, next);
    }
    const rv = ++this.rv;
    next.metadata.resourceVersion = String(rv);
    this.objects.set(key, { spec, obj: next });
    this.record(rv, spec, namespace, 'MODIFIED', next);
    this.json(res, 200, next);
  }

  /**
   * The rest of admission after the kind's own (decoding, defaults, validation): unknown fields per the request's
   * fieldValidation, Pod Security, owner-reference permissions. Answers the request and returns undefined when the
   * write is refused; else the object to store.
   */
  private admitted(
    res: ServerResponse,
    spec: KindSpec,
    namespace: string,
    name: string | undefined,
    admitted: Admission,
    old: Json | undefined,
  ): Json | undefined {
    if ('badRequest' in admitted) {
      this.refused.push(admitted.badRequest);
      return void this.status(res, 400, 'BadRequest', admitted.badRequest);
    }
    if ('causes' in admitted) return void this.invalid(res, spec, name, admitted.causes);
    const ctx = this.contexts.get(res) ?? { fieldValidation: 'Warn', warnings: [] };
    const unknown = admitted.unknown ?? [];
    if (unknown.length && ctx.fieldValidation === 'Strict')
      return void this.status(
        res,
        400,
        'BadRequest',
        `strict decoding error: ${unknown.map((f) => `unknown field "${f}"`).join(', ')}`,
      );
    if (ctx.fieldValidation !== 'Ignore') ctx.warnings.push(...unknown.map((f) => `unknown field "${f}"`));
    const obj = admitted.object;
    const what = `${spec.plural}${spec.group ? '.' + spec.group : ''}`;
    // Pod Security: pods are judged when created or when their spec changes; workloads only draw warnings.
    if (spec.namespaced && (!old || JSON.stringify(old.spec) !== JSON.stringify(obj.spec))) {
      const labels = this.objects.get(this.key('', 'namespaces', '', namespace))?.obj.metadata.labels;
      const psa = podSecurity(
        spec.group === '' || spec.group === 'apps' || spec.group === 'batch' ? spec.kind : '',
        obj,
        labels,
      );
      ctx.warnings.push(...psa.warnings);
      if (psa.forbidden) this.refused.push(psa.forbidden);
      if (psa.forbidden)
        return void this.status(res, 403, 'Forbidden', `${what} "${name ?? ''}" is forbidden: ${psa.forbidden}`, {
          name,
          group: spec.group,
          kind: spec.plural,
        });
    }
    if (this.opts.ownerReferencesPermissionEnforcement && ctx.user && this.opts.rbac) {
      const user = ctx.user;
      const refusal = ownerReferenceRefusal(spec, namespace, obj, old, this.registry.all(), (a) =>
        this.allowed(user, a),
      );
      if (refusal) {
        this.denied.push(refusal);
        return void this.status(res, 403, 'Forbidden', `${what} "${name ?? ''}" is forbidden: ${refusal}`, {
          name,
          group: spec.group,
          kind: spec.plural,
        });
      }
    }
    return obj;
  }

  private patch(
    res: ServerResponse,
    spec: KindSpec,
    namespace: string,
    name: string,
    body: unknown,
    contentType: string,
    status: boolean,
  ): void {
    const cur = this.objects.get(this.key(spec.group, spec.plural, namespace, name));
    if (!cur) return this.notFound(res, spec, name);
    let next: Json;
    if (contentType.startsWith('application/json-patch+json')) {
      try {
        next = applyJsonPatch(structuredClone(cur.obj), body as JsonPatchOp[]);
      } catch (err) {
        return this.status(res, 422, 'Invalid', String((err as Error).message));
      }
    } else if (
      contentType.startsWith('application/merge-patch+json') ||
      contentType.startsWith('application/strategic-merge-patch+json')
    ) {
      next = mergePatch(structuredClone(cur.obj), body) as Json;
    } else {
      return this.status(
        res,
        415,
        'UnsupportedMediaType',
        `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`,
      );
    }
    // A patch is a replace against the current version unless it names another one.
    next.metadata = {
      ...next.metadata,
      resourceVersion: next.metadata?.resourceVersion ?? cur.obj.metadata.resourceVersion,
    };
    this.replace(res, spec, namespace, name, next, status);
  }

  /**
   * A server-side apply (ssa.ts): needs a fieldManager; creates the object when it is absent (which RBAC also
   * authorizes as `create`, like the real server); conflicts are a 409 naming each field and its manager.
   */
  private applyPatch(
    res: ServerResponse,
    spec: KindSpec,
    namespace: string,
    name: string,
    body: unknown,
    q: URLSearchParams,
    status: boolean,
  ): void {
    const manager = q.get('fieldManager') ?? '';
    if (!manager) {
      const cause = {
        field: 'fieldManager',
        message: 'Required value: is required for apply patch',
        reason: 'FieldValueRequired',
      };
      return this.status(
        res,
        422,
        'Invalid',
        `PatchOptions.meta.k8s.io "" is invalid: fieldManager: ${cause.message}`,
        {
          group: 'meta.k8s.io',
          kind: 'PatchOptions',
          causes: [cause],
        },
      );
    }
    const applied = body as Json;
    if (!applied || typeof applied !== 'object' || Array.isArray(applied))
      return this.status(res, 400, 'BadRequest', 'the apply patch must be an object');
    if (applied.apiVersion !== this.apiVersion(spec) || applied.kind !== spec.kind)
      return this.status(
        res,
        400,
        'BadRequest',
        `the API version in the data (${applied.apiVersion}) does not match the expected API version (${this.apiVersion(spec)})`,
      );
    if (applied.metadata?.name !== undefined && applied.metadata.name !== name)
      return this.status(res, 400, 'BadRequest', 'the name of the object does not match the name on the URL');
    if (applied.metadata?.managedFields !== undefined)
      return this.status(res, 400, 'BadRequest', 'metadata.managedFields must be nil');
    const cur = this.objects.get(this.key(spec.group, spec.plural, namespace, name));
    const ctx = this.contexts.get(res);
    if (ctx) ctx.applied = true;
    if (!cur && ctx?.user && this.opts.rbac) {
      const attrs: RequestAttributes = {
        verb: 'create',
        group: spec.group,
        resource: spec.plural,
        namespace: namespace || undefined,
      };
      if (!this.allowed(ctx.user, attrs)) return this.forbid(res, ctx.user, attrs, spec);
    }
    const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const { status: _s, ...config } = spec.statusSubresource && !status ? applied : { ...applied };
    const outcome = serverSideApply(
      cur && structuredClone(cur.obj),
      { ...config, metadata: { ...config.metadata, name } },
      manager,
      q.get('force') === 'true',
      this.apiVersion(spec),
      now,
    );
    if ('conflicts' in outcome) {
      const n = outcome.conflicts.length;
      const message = `Apply failed with ${n} conflict${n === 1 ? '' : 's'}: ${outcome.conflicts
        .map((c) => `conflict with "${c.manager}": ${c.field}`)
        .join('\n')}`;
      return this.status(res, 409, 'Conflict', message, {
        name,
        group: spec.group,
        kind: spec.plural,
        causes: outcome.conflicts.map((c) => ({
          reason: 'FieldManagerConflict',
          message: `conflict with "${c.manager}"`,
          field: c.field,
        })),
      });
    }
    const next = outcome.object;
    if (!cur) return this.create(res, spec, namespace, next);
    next.metadata.resourceVersion = cur.obj.metadata.resourceVersion;
    this.replace(res, spec, namespace, name, next, status);
  }

  private delete(
    res: ServerResponse,
    spec: KindSpec,
    namespace: string,
    name: string,
    opts: Json | undefined,
    q: URLSearchParams,
  ): void {
    const key = this.key(spec.group, spec.plural, namespace, name);
    const cur = this.objects.get(key);
    if (!cur) return this.notFound(res, spec, name);
    // DeleteOptions come as the body or as query parameters (what client-node sends).
    const policyIn = opts?.propagationPolicy ?? q.get('propagationPolicy') ?? undefined;
    const orphanIn =
      opts?.orphanDependents ?? (q.has('orphanDependents') ? q.get('orphanDependents') === 'true' : undefined);
    if (policyIn !== undefined && orphanIn !== undefined) {
      return this.deleteOptionsInvalid(
        res,
        'propagationPolicy',
        'orphanDependents and deletionPropagation cannot be both set',
      );
    }
    if (policyIn !== undefined && !POLICIES.includes(policyIn)) {
      return this.deleteOptionsInvalid(
        res,
        'propagationPolicy',
        `Unsupported value: "${policyIn}": supported values: ${POLICIES.map((p) => `"${p}"`).join(', ')}`,
      );
    }
    const pre = opts?.preconditions as Json | undefined;
    if (pre?.uid && pre.uid !== cur.obj.metadata.uid) {
      return this.conflict(
        res,
        spec,
        name,
        `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${cur.obj.metadata.uid}`,
      );
    }
    if (pre?.resourceVersion && pre.resourceVersion !== cur.obj.metadata.resourceVersion)
      return this.conflict(res, spec, name);
    if (spec.plural === 'namespaces' && !spec.group && IMMORTAL_NAMESPACES.includes(name)) {
      return this.status(
        res,
        403,
        'Forbidden',
        `namespaces "${name}" is forbidden: this namespace may not be deleted`,
        { name, kind: 'namespaces' },
      );
    }
    const explicit: Policy | undefined =
      policyIn ?? (orphanIn === undefined ? undefined : orphanIn ? 'Orphan' : 'Background');
    const gone = this.markDeleted(cur, explicit);
    if (gone) {
      return this.json(res, 200, {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Success',
        details: { name, group: spec.group, kind: spec.plural, uid: cur.obj.metadata.uid },
      });
    }
    this.json(res, 200, this.objects.get(key)!.obj);
  }

  /** No finalizer holds the object (a namespace also waits for the `kubernetes` finalizer in its spec). */
  private finalized(spec: KindSpec, obj: Json): boolean {
    if (obj.metadata.finalizers?.length) return false;
    return !(spec.plural === 'namespaces' && !spec.group && obj.spec?.finalizers?.length);
  }

  /**
   * Deletes an object the way the registry does: the propagation policy (asked for, else the one its finalizers
   * already say, else the kind's default) becomes the orphan / foregroundDeletion finalizer; an object no finalizer
   * holds goes at once, any other gets a deletionTimestamp and waits for its finalizers. True when it is gone.
   */
  private markDeleted(s: Stored, explicit: Policy | undefined): boolean {
    const m = s.obj.metadata;
    const has = (f: string) => Boolean(m.finalizers?.includes(f));
    if (m.deletionTimestamp && explicit === undefined) return false;
    const policy: Policy =
      explicit ??
      (has(FINALIZER_ORPHAN)
        ? 'Orphan'
        : has(FINALIZER_FOREGROUND)
          ? 'Foreground'
          : (s.spec.defaultPropagation ?? 'Background'));
    const finalizers = (m.finalizers ?? []).filter((f: string) => f !== FINALIZER_ORPHAN && f !== FINALIZER_FOREGROUND);
    if (policy === 'Orphan') finalizers.push(FINALIZER_ORPHAN);
    if (policy === 'Foreground') finalizers.push(FINALIZER_FOREGROUND);
    const next = structuredClone(s.obj);
    next.metadata.finalizers = finalizers;
    if (!finalizers.length) delete next.metadata.finalizers;
    if (this.finalized(s.spec, next)) {
      this.remove(s.spec, s.obj);
      return true;
    }
    if (JSON.stringify(next.metadata.finalizers) === JSON.stringify(m.finalizers) && m.deletionTimestamp) return false;
    next.metadata.deletionTimestamp ??= new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    next.metadata.deletionGracePeriodSeconds ??= 0;
    if (s.spec.plural === 'namespaces' && !s.spec.group) next.status = { ...(next.status ?? {}), phase: 'Terminating' };
    this.write(s.spec, next);
    return false;
  }

  /** Stores a changed version of an object (a controller's write, no admission) and tells the watchers. */
  private write(spec: KindSpec, obj: Json): void {
    if (obj.metadata.deletionTimestamp && this.finalized(spec, obj)) {
      this.remove(spec, obj);
      return;
    }
    const rv = ++this.rv;
    obj.metadata.resourceVersion = String(rv);
    this.objects.set(this.key(spec.group, spec.plural, obj.metadata.namespace ?? '', obj.metadata.name), { spec, obj });
    this.record(rv, spec, obj.metadata.namespace ?? '', 'MODIFIED', obj);
  }

  /** Removes an object; its dependents are the garbage collector's, later. */
  private remove(spec: KindSpec, obj: Json): void {
    const ns = obj.metadata.namespace ?? '';
    this.objects.delete(this.key(spec.group, spec.plural, ns, obj.metadata.name));
    const rv = ++this.rv;
    this.record(rv, spec, ns, 'DELETED', { ...obj, metadata: { ...obj.metadata, resourceVersion: String(rv) } });
  }

  /**
   * Resolves once the garbage collector and namespace controller have nothing left to do (no pass pending): what
   * the owners deleted so far take with them is gone by then. For tests that check nothing was left behind.
   */
  async gcIdle(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.gcTimer || this.gcHolds.size) {
      if (Date.now() > deadline) throw new Error('kube-apiserver double: garbage collection still busy');
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  private scheduleGc(): void {
    if (this.gcTimer || this.gcHolds.size || !this.server) return;
    this.gcTimer = setTimeout(() => {
      this.gcTimer = undefined;
      if (!this.gcHolds.size) this.collectGarbage();
    }, this.opts.gcDelayMs ?? 50);
  }

  /**
   * One pass of the garbage collector and the namespace controller over everything stored; each write schedules
   * the next pass, so a chain of owners is collected one level per pass, never within the request that deleted
   * its head. The rules are the documented ones:
   * - an object whose owners are all gone (or waiting for their dependents in a foreground deletion) is deleted,
   *   in the foreground when such an owner waits and it has dependents itself, else in the background; references
   *   to such owners are dropped from an object that still has another owner. An owner only counts when its uid
   *   is found with the same kind and name in the dependent's namespace (or cluster-scoped): a reference across
   *   namespaces is a missing owner.
   * - orphan finalizer: the owner's references are removed from its dependents, then the finalizer.
   * - foregroundDeletion finalizer: removed once no dependent blocking owner deletion is left.
   * - a terminating namespace has its contents deleted (background), and its `kubernetes` finalizer removed once
   *   nothing is left in it.
   */
  private collectGarbage(): void {
    const byUid = new Map<string, Stored>();
    for (const s of this.objects.values()) byUid.set(s.obj.metadata.uid, s);
    const dependentsOf = (uid: string) =>
      [...this.objects.values()].filter((d) => d.obj.metadata.ownerReferences?.some((o: Json) => o.uid === uid));
    const latest = (s: Stored) =>
      this.objects.get(this.key(s.spec.group, s.spec.plural, s.obj.metadata.namespace ?? '', s.obj.metadata.name));
    const withoutFinalizer = (s: Stored, f: string) => {
      const next = structuredClone(s.obj);
      next.metadata.finalizers = (next.metadata.finalizers ?? []).filter((x: string) => x !== f);
      if (!next.metadata.finalizers.length) delete next.metadata.finalizers;
      this.write(s.spec, next);
    };
    for (const snapshot of [...this.objects.values()]) {
      const s = latest(snapshot);
      if (!s || s.obj.metadata.uid !== snapshot.obj.metadata.uid) continue;
      const m = s.obj.metadata;
      if (m.deletionTimestamp && m.finalizers?.includes(FINALIZER_ORPHAN)) {
        for (const d of dependentsOf(m.uid)) {
          const next = structuredClone(d.obj);
          next.metadata.ownerReferences = next.metadata.ownerReferences.filter((o: Json) => o.uid !== m.uid);
          if (!next.metadata.ownerReferences.length) delete next.metadata.ownerReferences;
          this.write(d.spec, next);
        }
        withoutFinalizer(s, FINALIZER_ORPHAN);
        continue;
      }
      if (m.deletionTimestamp && m.finalizers?.includes(FINALIZER_FOREGROUND)) {
        const blocking = dependentsOf(m.uid).some((d) =>
          d.obj.metadata.ownerReferences.some((o: Json) => o.uid === m.uid && o.blockOwnerDeletion),
        );
        if (!blocking) {
          withoutFinalizer(s, FINALIZER_FOREGROUND);
          continue;
        }
      }
      if (s.spec.plural === 'namespaces' && !s.spec.group && m.deletionTimestamp) {
        const contents = [...this.objects.values()].filter(
          (c) => c.spec.namespaced && c.obj.metadata.namespace === m.name,
        );
        for (const c of contents) if (!c.obj.metadata.deletionTimestamp) this.markDeleted(c, 'Background');
        if (!contents.length && s.obj.spec?.finalizers?.includes('kubernetes')) {
          const next = structuredClone(s.obj);
          next.spec.finalizers = next.spec.finalizers.filter((f: string) => f !== 'kubernetes');
          this.write(s.spec, next);
        }
        continue;
      }
      const refs: Json[] = m.ownerReferences ?? [];
      if (!refs.length) continue;
      const solid: Json[] = [];
      const waiting: Json[] = [];
      const absent: Json[] = [];
      for (const ref of refs) {
        const owner = byUid.get(ref.uid);
        const here =
          owner &&
          this.objects.get(
            this.key(owner.spec.group, owner.spec.plural, owner.obj.metadata.namespace ?? '', owner.obj.metadata.name),
          );
        const found =
          here &&
          here.obj.metadata.uid === ref.uid &&
          here.spec.kind === ref.kind &&
          here.obj.metadata.name === ref.name &&
          (!here.spec.namespaced || (s.spec.namespaced && here.obj.metadata.namespace === m.namespace));
        if (!found) absent.push(ref);
        else if (here.obj.metadata.deletionTimestamp && here.obj.metadata.finalizers?.includes(FINALIZER_FOREGROUND))
          waiting.push(ref);
        else solid.push(ref);
      }
      if (!solid.length) {
        if (m.deletionTimestamp) continue;
        this.markDeleted(
          s,
          waiting.length && dependentsOf(m.uid).length
            ? 'Foreground'
            : m.finalizers?.includes(FINALIZER_ORPHAN)
              ? 'Orphan'
              : 'Background',
        );
      } else if (absent.length || waiting.length) {
        const next = structuredClone(s.obj);
        next.metadata.ownerReferences = solid;
        this.write(s.spec, next);
      }
    }
  }

  private deleteOptionsInvalid(res: ServerResponse, field: string, message: string): void {
    this.status(res, 422, 'Invalid', `DeleteOptions.meta.k8s.io "" is invalid: ${field}: ${message}`, {
      group: 'meta.k8s.io',
      kind: 'DeleteOptions',
      causes: [{ field, message, reason: 'FieldValueInvalid' }],
    });
  }

  private watch(
    req: IncomingMessage,
    res: ServerResponse,
    spec: KindSpec,
    namespace: string | undefined,
    q: URLSearchParams,
  ): void {
    const labels = selectorMatcher(q.get('labelSelector') ?? '');
    const byField = fieldMatcher(q.get('fieldSelector') ?? '');
    const match = (l: Json | undefined, obj: Json) => labels(l) && byField(obj);
    const rvParam = q.get('resourceVersion') ?? '';
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    res.flushHeaders(); // the real server answers headers at once; clients wait for them before streaming
    const write = (type: string, object: Json) => res.write(JSON.stringify({ type, object }) + '\n');
    const inScope = (c: { spec: KindSpec; namespace: string }) =>
      c.spec === spec && (namespace === undefined || c.namespace === namespace);
    if (rvParam === '' || rvParam === '0') {
      for (const s of this.objects.values()) {
        if (inScope({ spec: s.spec, namespace: s.obj.metadata.namespace }) && match(s.obj.metadata.labels, s.obj))
          write('ADDED', s.obj);
      }
    } else {
      const from = Number(rvParam);
      if (!Number.isInteger(from) || from < this.compactedRv) {
        write('ERROR', {
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Failure',
          message: `too old resource version: ${rvParam} (${this.compactedRv})`,
          reason: 'Expired',
          code: 410,
        });
        res.end();
        return;
      }
      for (const c of this.changes)
        if (c.rv > from && inScope(c) && match(c.obj.metadata.labels, c.obj)) write(c.type, c.obj);
    }
    const watcher: Watcher = {
      spec,
      namespace,
      match,
      send: (c) => {
        if (inScope(c) && match(c.obj.metadata.labels, c.obj)) write(c.type, c.obj);
      },
    };
    this.watchers.add(watcher);
    const allowBookmarks = q.get('allowWatchBookmarks') === 'true';
    const bookmark = () =>
      write('BOOKMARK', {
        kind: spec.kind,
        apiVersion: this.apiVersion(spec),
        metadata: { resourceVersion: String(this.rv) },
      });
    const bookmarks = allowBookmarks ? setInterval(bookmark, this.opts.bookmarkMs ?? 60_000) : undefined;
    // The server ends every watch normally at its timeout (timeoutSeconds, else its own), with a last bookmark
    // just before when the client allows them, so it can resume from there without relisting.
    const timeout = Number(q.get('timeoutSeconds') ?? 0);
    const defaultMs = this.opts.watchTimeoutMs ?? 1_800_000 * (1 + Math.random());
    const timer = setTimeout(
      () => {
        if (allowBookmarks) bookmark();
        res.end();
      },
      timeout > 0 ? timeout * 1000 : defaultMs,
    );
    const done = () => {
      this.watchers.delete(watcher);
      clearInterval(bookmarks);
      clearTimeout(timer);
    };
    req.on('close', done);
    res.on('close', done);
  }

  private record(rv: number, spec: KindSpec, namespace: string, type: Change['type'], obj: Json): void {
    const c: Change = { rv, spec, namespace, type, obj: structuredClone(obj) };
    this.changes.push(c);
    const limit = this.opts.historyLimit ?? 10_000;
    while (this.changes.length > limit) this.compactedRv = this.changes.shift()!.rv;
    for (const w of this.watchers) w.send(c);
    this.scheduleGc();
  }

  private podLog(res: ServerResponse, namespace: string, name: string, container: string, q: URLSearchParams): void {
    const spec = this.registry.lookup('', 'v1', 'pods')!;
    if (!this.objects.has(this.key('', 'pods', namespace, name))) return this.notFound(res, spec, name);
    const text = this.podLogs.get(`${namespace}/${name}/${container}`);
    if (text === undefined)
      return this.status(res, 400, 'BadRequest', `container "${container}" in pod "${name}" is waiting to start`);
    // tailLines picks the last lines, then limitBytes cuts what is sent, as the kubelet does.
    let out = text;
    const tail = Number(q.get('tailLines') ?? NaN);
    if (Number.isInteger(tail) && tail >= 0)
      out =
        out
          .split('\n')
          .filter((l, i, all) => l !== '' || i < all.length - 1)
          .slice(-tail)
          .join('\n') + (tail > 0 ? '\n' : '');
    const limit = Number(q.get('limitBytes') ?? NaN);
    const body = Number.isInteger(limit) && limit > 0 ? Buffer.from(out).subarray(0, limit) : Buffer.from(out);
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(body);
  }

  private forbid(res: ServerResponse, user: UserInfo, a: RequestAttributes, spec: KindSpec): void {
    const message = forbiddenMessage(user, a);
    this.denied.push(message);
    this.status(res, 403, 'Forbidden', message, { name: a.name, group: a.group, kind: spec.plural });
  }

  /** API discovery (what kubectl reads before it acts): group lists and each version's resources. */
  private discovery(path: string, res: ServerResponse): boolean {
    const kinds = this.registry.all();
    const resources = (group: string, version: string) => ({
      kind: 'APIResourceList',
      apiVersion: 'v1',
      groupVersion: group ? `${group}/${version}` : version,
      resources: kinds
        .filter((k) => k.group === group && k.version === version)
        .flatMap((k) => [
          {
            name: k.plural,
            singularName: k.kind.toLowerCase(),
            namespaced: k.namespaced,
            kind: k.kind,
            verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'],
          },
          ...(k.statusSubresource
            ? [
                {
                  name: `${k.plural}/status`,
                  singularName: '',
                  namespaced: k.namespaced,
                  kind: k.kind,
                  verbs: ['get', 'patch', 'update'],
                },
              ]
            : []),
        ]),
    });
    if (path === '/api') {
      this.json(res, 200, {
        kind: 'APIVersions',
        versions: ['v1'],
        serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: '127.0.0.1' }],
      });
      return true;
    }
    if (path === '/api/v1') {
      this.json(res, 200, resources('', 'v1'));
      return true;
    }
    if (path === '/apis') {
      const groups = new Map<string, string[]>();
      for (const k of kinds.filter((k) => k.group))
        groups.set(k.group, [...new Set([...(groups.get(k.group) ?? []), k.version])]);
      this.json(res, 200, {
        kind: 'APIGroupList',
        apiVersion: 'v1',
        groups: [...groups].map(([name, versions]) => ({
          name,
          versions: versions.map((v) => ({ groupVersion: `${name}/${v}`, version: v })),
          preferredVersion: { groupVersion: `${name}/${versions[0]}`, version: versions[0] },
        })),
      });
      return true;
    }
    const m = /^\/apis\/([^/]+)\/([^/]+)\/?$/.exec(path);
    if (m && kinds.some((k) => k.group === m[1] && k.version === m[2])) {
      this.json(res, 200, resources(m[1]!, m[2]!));
      return true;
    }
    // OpenAPI v3 per group-version, as much as kubectl reads before an apply: each collection path accepts the
    // fieldValidation parameter, so kubectl leaves validation to the server (which admits every object).
    const gvs = [...new Set(kinds.map((k) => (k.group ? `apis/${k.group}/${k.version}` : `api/${k.version}`)))];
    if (path === '/openapi/v3') {
      this.json(res, 200, {
        paths: Object.fromEntries(
          gvs.map((gv) => [gv, { serverRelativeURL: `/openapi/v3/${gv}?hash=${this.registry.all().length}` }]),
        ),
      });
      return true;
    }
    const v3 = /^\/openapi\/v3\/(.+)$/.exec(path);
    if (v3 && gvs.includes(v3[1]!)) {
      const fieldValidation = { name: 'fieldValidation', in: 'query', schema: { type: 'string', uniqueItems: true } };
      const paths: Json = {};
      const schemas: Json = {};
      for (const k of kinds.filter((k) => (k.group ? `apis/${k.group}/${k.version}` : `api/${k.version}`) === v3[1])) {
        const base = `/${v3[1]}${k.namespaced ? '/namespaces/{namespace}' : ''}/${k.plural}`;
        const gvk = [{ group: k.group, version: k.version, kind: k.kind }];
        const op = (action: string) => ({
          parameters: [fieldValidation],
          'x-kubernetes-action': action,
          'x-kubernetes-group-version-kind': gvk[0],
        });
        paths[base] = { post: op('post') };
        paths[`${base}/{name}`] = { put: op('put'), patch: op('patch') };
        schemas[`${k.group || 'core'}.${k.version}.${k.kind}`] = {
          type: 'object',
          'x-kubernetes-group-version-kind': gvk,
        };
      }
      this.json(res, 200, {
        openapi: '3.0.0',
        info: { title: 'Kubernetes', version: 'v1.31.0' },
        paths,
        components: { schemas },
      });
      return true;
    }
    if (path === '/version') {
      this.json(res, 200, {
        major: '1',
        minor: '31',
        gitVersion: 'v1.31.0-agentplane-double',
        platform: 'linux/amd64',
      });
      return true;
    }
    return false;
  }

  // ---- responses ----

  private json(res: ServerResponse, code: number, body: unknown): void {
    const warnings = this.contexts.get(res)?.warnings ?? [];
    // The real server's Warning headers: code 299, agent "-", the text quoted.
    if (warnings.length)
      res.setHeader(
        'Warning',
        [...new Set(warnings)].map((w) => `299 - "${w.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`),
      );
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  }

  private status(res: ServerResponse, code: number, reason: string, message: string, details?: Json): void {
    this.json(res, code, {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message,
      reason,
      ...(details ? { details } : {}),
      code,
    });
  }

  private notFound(res: ServerResponse, spec: KindSpec, name: string): void {
    const what = `${spec.plural}${spec.group ? '.' + spec.group : ''}`;
    this.status(res, 404, 'NotFound', `${what} "${name}" not found`, { name, group: spec.group, kind: spec.plural });
  }

  private conflict(res: ServerResponse, spec: KindSpec, name: string, why?: string): void {
    const what = `${spec.plural}${spec.group ? '.' + spec.group : ''}`;
    this.status(
      res,
      409,
      'Conflict',
      `Operation cannot be fulfilled on ${what} "${name}": ${why ?? 'the object has been modified; please apply your changes to the latest version and try again'}`,
      { name, group: spec.group, kind: spec.plural },
    );
  }

  private invalid(res: ServerResponse, spec: KindSpec, name: string | undefined, causes: Cause[]): void {
    const msg = `${spec.kind}.${spec.group || 'core'} "${name ?? ''}" is invalid: ${causes.map((c) => `${c.field}: ${c.message}`).join(', ')}`;
    this.refused.push(msg);
    if (process.env.KUBE_DOUBLE_DEBUG) console.error(`kube-apiserver double: ${msg}`);
    this.status(res, 422, 'Invalid', msg, { name, group: spec.group, kind: spec.kind, causes });
  }
}

async function readJson(req: IncomingMessage, contentType: string): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  if (!text) return undefined;
  try {
    // An apply patch is YAML (JSON is YAML too).
    return contentType.startsWith(APPLY_PATCH) ? parseYaml(text) : JSON.parse(text);
  } catch {
    return null;
  }
}

/** A managedFields time: seconds, as the server writes it. */
function now(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, 'Z');
}

function canon(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canon);
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.entries(v)
        .filter(([, x]) => x !== undefined)
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([k, x]) => [k, canon(x)]),
    );
  return v;
}

function canonNoMeta(o: Json): unknown {
  const { metadata: _m, status: _s, ...rest } = o;
  return canon(rest);
}

/** Field selectors the real server supports on every kind: metadata.name and metadata.namespace (= and !=). */
export function fieldMatcher(selector: string): (obj: Json) => boolean {
  const terms = selector
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean)
    .map((t) => {
      // Events also select on their subject (kubectl get events --field-selector involvedObject.name=x).
      const m = /^(metadata\.(?:name|namespace)|involvedObject\.(?:kind|name|namespace|uid)|reason)(==|!=|=)(.*)$/.exec(
        t,
      );
      if (!m) throw new Error(`kube-apiserver double: unsupported field selector ${t}`);
      return { path: m[1]!.split('.'), neq: m[2] === '!=', value: m[3] };
    });
  return (obj) => terms.every(({ path, neq, value }) => (path.reduce<any>((o, k) => o?.[k], obj) === value) !== neq);
}

export function selectorMatcher(selector: string): (labels?: Json) => boolean {
  const terms = selector
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean)
    .map((t) => {
      const neq = t.indexOf('!=');
      if (neq > 0) return { k: t.slice(0, neq), op: '!=', v: t.slice(neq + 2) };
      const eq = t.indexOf('=');
      if (eq > 0) return { k: t.slice(0, eq), op: '=', v: t.slice(eq + 1).replace(/^=/, '') };
      if (t.startsWith('!')) return { k: t.slice(1), op: '!', v: '' };
      return { k: t, op: 'exists', v: '' };
    });
  return (labels) =>
    terms.every(({ k, op, v }) => {
      const x = labels?.[k];
      return op === '=' ? x === v : op === '!=' ? x !== v : op === '!' ? x === undefined : x !== undefined;
    });
}

function mergePatch(target: unknown, patch: unknown): unknown {
  if (!patch || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out: Json = target && typeof target === 'object' && !Array.isArray(target) ? { ...(target as Json) } : {};
  for (const [k, v] of Object.entries(patch as Json)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

type JsonPatchOp = { op: string; path: string; value?: unknown; from?: string };

function applyJsonPatch(doc: Json, ops: JsonPatchOp[]): Json {
  if (!Array.isArray(ops)) throw new Error('json patch must be an array');
  const parse = (p: string) =>
    p
      .split('/')
      .slice(1)
      .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  const parentOf = (path: string[]) => {
    let node: any = doc;
    for (const seg of path.slice(0, -1)) {
      node = node?.[seg];
      if (node === undefined) throw new Error(`path not found: /${path.join('/')}`);
    }
    return node;
  };
  for (const op of ops) {
    const path = parse(op.path);
    const last = path[path.length - 1]!;
    const parent = parentOf(path);
    switch (op.op) {
      case 'add':
        if (Array.isArray(parent)) parent.splice(last === '-' ? parent.length : Number(last), 0, op.value);
        else parent[last] = op.value;
        break;
      case 'replace':
        if (!(last in parent)) throw new Error(`path not found: ${op.path}`);
        parent[last] = op.value;
        break;
      case 'remove':
        if (!(last in parent)) throw new Error(`path not found: ${op.path}`);
        if (Array.isArray(parent)) parent.splice(Number(last), 1);
        else delete parent[last];
        break;
      case 'test':
        if (JSON.stringify(parent[last]) !== JSON.stringify(op.value)) throw new Error(`test failed: ${op.path}`);
        break;
      default:
        throw new Error(`unsupported json patch op ${op.op}`);
    }
  }
  return doc;
}
