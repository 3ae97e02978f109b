// Kubernetes store: AgentDeployment/AgentRevision custom resources, Secrets for environment values and API key
// hashes, ConfigMaps for revision logs, through @kubernetes/client-node. Namespace model: one configured namespace;
// tenants are told apart by the agentplane.dev/tenant label (and spec.tenantId).
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  Watch,
  type V1ConfigMap,
  type V1Secret,
} from '@kubernetes/client-node';
import { createHash } from 'node:crypto';
import { NotFoundError, ValidationError, type ValidationIssue } from '../../../lib/errors.ts';
import type { Logger } from '../../../lib/logger.ts';
import {
  API_VERSION,
  GROUP,
  isLabelValue,
  LABEL_DEPLOYMENT,
  LABEL_TENANT,
  tenantKeysSecretName,
  VERSION,
} from '../../../resources/index.ts';
import { validateResource } from '../validate.ts';
import type { TenantKeySink } from '../types.ts';
import {
  AlreadyExistsError,
  integrationDetails,
  ResourceExpiredError,
  claimObjectName,
  hostClaimObjectName,
  type HostClaim,
  type TenantReferences,
  type NameClaim,
  type NameClaimOwner,
  StaleResourceVersionError,
  type ApiKeyRecord,
  type IntegrationRecord,
  type ListenerRecord,
  type AuthObject,
  type AuthObjectKind,
  type ControlPlaneStore,
  type Kind,
  type KindMap,
  type ListOptions,
  type LogPage,
  type LogType,
  type WatchEventType,
} from '../types.ts';

const PLURAL: Record<Kind, string> = { AgentDeployment: 'agentdeployments', AgentRevision: 'agentrevisions' };
const LABEL_API_KEY = 'agentplane.dev/api-key';
const LABEL_INTEGRATION = 'agentplane.dev/integration';
const LABEL_LISTENER_ID = 'agentplane.dev/listener-id';
const LABEL_GITHUB_INSTALLATION = 'agentplane.dev/github-installation';
/** On auth service Secrets: provider, token or flow. */
const LABEL_AUTH_KIND = 'agentplane.dev/auth-kind';

export { tenantKeysSecretName };
const LABEL_LOG_FOR = 'agentplane.dev/log-for';
/** Server-side end of one watch request, and the client's abort when nothing (not even a bookmark) arrives. */
const WATCH_TIMEOUT_SECONDS = 300;
const WATCH_IDLE_ABORT_MS = 150_000;
/** On name-claim ConfigMaps: the AgentDeployment holding the name (its uid is in the ownerReference). */
const LABEL_NAME_CLAIM_OF = 'agentplane.dev/name-claim-of';
/** On custom-host claim ConfigMaps: the AgentDeployment holding the host. */
const LABEL_HOST_CLAIM_OF = 'agentplane.dev/host-claim-of';
/** Lines kept per revision and log type (a ConfigMap holds at most 1 MiB). */
const MAX_LOG_LINES = 2_000;

export function loadKubeConfig(file?: string): KubeConfig {
  const kc = new KubeConfig();
  if (file) kc.loadFromFile(file);
  else kc.loadFromDefault();
  return kc;
}

export type KubernetesStoreOptions = { kubeConfig: KubeConfig; namespace: string; logger: Logger };

export function openKubernetesStore(opts: KubernetesStoreOptions): ControlPlaneStore {
  return new KubernetesStore(opts);
}

type Status = {
  reason?: string;
  message?: string;
  code?: number;
  details?: { causes?: { field?: string; message?: string; reason?: string }[] };
};

function statusOf(err: ApiException<unknown>): Status {
  const body = err.body;
  if (typeof body === 'string') {
    try {
      return JSON.parse(body) as Status;
    } catch {
      return { message: body };
    }
  }
  return (body as Status) ?? {};
}

/** Maps API server errors onto the store's error types. */
function mapError(err: unknown): unknown {
  if (!(err instanceof ApiException)) return err;
  const s = statusOf(err);
  const message = s.message ?? `Kubernetes API error ${err.code}`;
  switch (err.code) {
    case 404:
      return new NotFoundError(message);
    case 409:
      return s.reason === 'AlreadyExists' ? new AlreadyExistsError(message) : new StaleResourceVersionError(message);
    case 410:
      return new ResourceExpiredError(message);
    case 422: {
      const issues: ValidationIssue[] = (s.details?.causes ?? []).map((c) => ({
        loc: (c.field ?? '').split('.').filter(Boolean),
        msg: c.message ?? 'invalid',
        type: c.reason ?? 'FieldValueInvalid',
      }));
      return new ValidationError(message, issues);
    }
    default:
      return err;
  }
}

async function call<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw mapError(err);
  }
}

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
const unb64 = (s: string) => Buffer.from(s, 'base64').toString('utf8');

class KubernetesStore implements ControlPlaneStore {
  readonly namespace: string;
  private readonly custom: CustomObjectsApi;
  private readonly core: CoreV1Api;
  private readonly watcher: Watch;
  private readonly stops = new Set<() => void>();
  private readonly log: Logger;

  constructor(opts: KubernetesStoreOptions) {
    this.namespace = opts.namespace;
    this.custom = opts.kubeConfig.makeApiClient(CustomObjectsApi);
    this.core = opts.kubeConfig.makeApiClient(CoreV1Api);
    this.watcher = new Watch(opts.kubeConfig);
    // client-node aborts a watch after 30 s without data; a quiet store would then relist twice a minute. The server
    // ends each watch after WATCH_TIMEOUT_SECONDS (and sends bookmarks meanwhile), so the idle abort only has to
    // catch a dead connection. (`requestTimeoutMs` is not in client-node's typed surface; it is its only knob.)
    (this.watcher as unknown as { requestTimeoutMs: number }).requestTimeoutMs = WATCH_IDLE_ABORT_MS;
    this.log = opts.logger.child({ component: 'kubernetes-store' });
  }

  async close(): Promise<void> {
    for (const stop of this.stops) stop();
    this.stops.clear();
  }

  private params(kind: Kind, namespace: string) {
    return { group: GROUP, version: VERSION, namespace, plural: PLURAL[kind] };
  }

  async get<K extends Kind>(kind: K, namespace: string, name: string): Promise<KindMap[K]> {
    return call(() => this.custom.getNamespacedCustomObject({ ...this.params(kind, namespace), name })) as Promise<
      KindMap[K]
    >;
  }

  async list<K extends Kind>(kind: K, namespace?: string, opts: ListOptions = {}) {
    const res = (await call(() =>
      namespace === undefined
        ? this.custom.listClusterCustomObject({
            group: GROUP,
            version: VERSION,
            plural: PLURAL[kind],
            labelSelector: opts.labelSelector,
          })
        : this.custom.listNamespacedCustomObject({
            ...this.params(kind, namespace),
            labelSelector: opts.labelSelector,
          }),
    )) as { items: KindMap[K][]; metadata: { resourceVersion: string } };
    return { items: res.items, resourceVersion: res.metadata.resourceVersion };
  }

  async create<K extends Kind>(kind: K, input: KindMap[K]): Promise<KindMap[K]> {
    // Validate locally first so both stores answer bad input the same way (the server would say 422 too).
    const obj = validateResource(kind, { ...input, apiVersion: API_VERSION, kind });
    const namespace = obj.metadata.namespace ?? this.namespace;
    return call(() =>
      this.custom.createNamespacedCustomObject({
        ...this.params(kind, namespace),
        body: { ...obj, metadata: { ...obj.metadata, namespace } },
      }),
    ) as Promise<KindMap[K]>;
  }

  async update<K extends Kind>(kind: K, input: KindMap[K]): Promise<KindMap[K]> {
    const obj = validateResource(kind, input);
    const namespace = obj.metadata.namespace ?? this.namespace;
    // Custom resources need a resourceVersion on update; without one the caller asked for "last write wins".
    const resourceVersion =
      obj.metadata.resourceVersion ?? (await this.get(kind, namespace, obj.metadata.name)).metadata.resourceVersion;
    return call(() =>
      this.custom.replaceNamespacedCustomObject({
        ...this.params(kind, namespace),
        name: obj.metadata.name,
        body: { ...obj, metadata: { ...obj.metadata, namespace, resourceVersion } },
      }),
    ) as Promise<KindMap[K]>;
  }

  async updateStatus<K extends Kind>(kind: K, input: KindMap[K]): Promise<KindMap[K]> {
    const obj = validateResource(kind, input);
    const namespace = obj.metadata.namespace ?? this.namespace;
    const resourceVersion =
      obj.metadata.resourceVersion ?? (await this.get(kind, namespace, obj.metadata.name)).metadata.resourceVersion;
    return call(() =>
      this.custom.replaceNamespacedCustomObjectStatus({
        ...this.params(kind, namespace),
        name: obj.metadata.name,
        body: { ...obj, metadata: { ...obj.metadata, namespace, resourceVersion } },
      }),
    ) as Promise<KindMap[K]>;
  }

  async delete(kind: Kind, namespace: string, name: string): Promise<void> {
    await call(() =>
      this.custom.deleteNamespacedCustomObject({
        ...this.params(kind, namespace),
        name,
        propagationPolicy: 'Background',
      }),
    );
  }

  async watch<K extends Kind>(
    kind: K,
    namespace: string | undefined,
    resourceVersion: string,
    onEvent: (type: WatchEventType, obj: KindMap[K]) => void,
    onError: (err: unknown) => void,
  ): Promise<() => void> {
    const path =
      namespace === undefined
        ? `/apis/${GROUP}/${VERSION}/${PLURAL[kind]}`
        : `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${PLURAL[kind]}`;
    let stopped = false;
    let failed = false;
    const fail = (err: unknown) => {
      if (stopped || failed) return;
      failed = true;
      onError(err);
    };
    const controller = await this.watcher.watch(
      path,
      {
        resourceVersion: resourceVersion || undefined,
        allowWatchBookmarks: true,
        timeoutSeconds: WATCH_TIMEOUT_SECONDS,
      },
      (type: string, obj: unknown) => {
        if (stopped || failed) return;
        if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') onEvent(type, obj as KindMap[K]);
        else if (type === 'ERROR') {
          const s = obj as Status;
          fail(
            s.code === 410
              ? new ResourceExpiredError(s.message ?? 'resource version too old')
              : new Error(s.message ?? 'watch error'),
          );
        }
      },
      (err: unknown) => fail(err ?? new Error('watch closed by the server')),
    );
    const stop = () => {
      stopped = true;
      this.stops.delete(stop);
      controller.abort();
    };
    this.stops.add(stop);
    return stop;
  }

  // ---- secrets ----

  async putSecrets(
    namespace: string,
    name: string,
    owner: { kind: Kind; name: string; uid: string },
    values: Record<string, string>,
  ): Promise<void> {
    const body: V1Secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'Opaque',
      metadata: {
        name,
        namespace,
        labels: owner.kind === 'AgentDeployment' ? { [LABEL_DEPLOYMENT]: owner.name } : {},
        ownerReferences: [
          { apiVersion: API_VERSION, kind: owner.kind, name: owner.name, uid: owner.uid, blockOwnerDeletion: true },
        ],
      },
      data: Object.fromEntries(Object.entries(values).map(([k, v]) => [k, b64(v)])),
    };
    await call(() => this.core.createNamespacedSecret({ namespace, body }));
  }

  async getSecrets(namespace: string, name: string): Promise<Record<string, string>> {
    const s = await call(() => this.core.readNamespacedSecret({ namespace, name }));
    return Object.fromEntries(Object.entries(s.data ?? {}).map(([k, v]) => [k, unb64(v)]));
  }

  async secretNames(namespace: string, name: string): Promise<string[]> {
    const s = await call(() => this.core.readNamespacedSecret({ namespace, name }));
    return Object.keys(s.data ?? {});
  }

  async deleteSecrets(namespace: string, name: string): Promise<void> {
    try {
      await call(() => this.core.deleteNamespacedSecret({ namespace, name }));
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
    }
  }

  // ---- integrations: one Secret per integration, labelled with its tenant; the token is a data key of it ----

  private integrationSecretName(id: string): string {
    return `agentplane-integration-${id}`;
  }

  async putIntegration(r: IntegrationRecord, token: string): Promise<void> {
    const body: V1Secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'Opaque',
      metadata: {
        name: this.integrationSecretName(r.id),
        namespace: this.namespace,
        labels: { [LABEL_INTEGRATION]: 'true', [LABEL_TENANT]: r.tenant, 'app.kubernetes.io/managed-by': 'agentplane' },
      },
      data: {
        id: b64(r.id),
        tenant: b64(r.tenant),
        name: b64(r.name),
        host: b64(r.host),
        ...(r.username === undefined ? {} : { username: b64(r.username) }),
        createdAt: b64(r.createdAt),
        details: b64(JSON.stringify(integrationDetails(r))),
        token: b64(token),
      },
    };
    if (r.installationId !== undefined) {
      body.metadata!.labels![LABEL_GITHUB_INSTALLATION] = String(r.installationId);
      if ((await this.findIntegrations({ installationId: r.installationId })).length)
        throw new AlreadyExistsError(`GitHub installation ${r.installationId} is already an integration`);
    }
    await call(() => this.core.createNamespacedSecret({ namespace: this.namespace, body }));
  }

  async findIntegrations(where: { id?: string; installationId?: number }): Promise<IntegrationRecord[]> {
    if (where.id !== undefined) {
      try {
        const s = await call(() =>
          this.core.readNamespacedSecret({ namespace: this.namespace, name: this.integrationSecretName(where.id!) }),
        );
        const r = integrationFromSecret(s);
        return r && r.id === where.id && s.metadata?.labels?.[LABEL_TENANT] === r.tenant ? [r] : [];
      } catch (err) {
        if (err instanceof NotFoundError) return [];
        throw err;
      }
    }
    if (where.installationId === undefined) return [];
    const list = await call(() =>
      this.core.listNamespacedSecret({
        namespace: this.namespace,
        labelSelector: `${LABEL_INTEGRATION}=true,${LABEL_GITHUB_INSTALLATION}=${where.installationId}`,
      }),
    );
    return list.items
      .filter((s) => s.metadata?.labels?.[LABEL_TENANT])
      .map(integrationFromSecret)
      .filter((r): r is IntegrationRecord => r !== undefined && r.installationId === where.installationId);
  }

  /** The integration's Secret when it exists and belongs to `tenant` (label and data agree). */
  private async integrationSecret(tenant: string, id: string): Promise<V1Secret | undefined> {
    let s: V1Secret;
    try {
      s = await call(() =>
        this.core.readNamespacedSecret({ namespace: this.namespace, name: this.integrationSecretName(id) }),
      );
    } catch (err) {
      if (err instanceof NotFoundError) return undefined;
      throw err;
    }
    const r = integrationFromSecret(s);
    return r && r.tenant === tenant && r.id === id && s.metadata?.labels?.[LABEL_TENANT] === tenant ? s : undefined;
  }

  async listIntegrations(tenant: string): Promise<IntegrationRecord[]> {
    const list = await call(() =>
      this.core.listNamespacedSecret({
        namespace: this.namespace,
        labelSelector: `${LABEL_INTEGRATION}=true,${LABEL_TENANT}=${tenant}`,
      }),
    );
    return list.items
      .map(integrationFromSecret)
      .filter((r): r is IntegrationRecord => r !== undefined && r.tenant === tenant)
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
  }

  async getIntegration(tenant: string, id: string): Promise<IntegrationRecord | undefined> {
    const s = await this.integrationSecret(tenant, id);
    return s && integrationFromSecret(s);
  }

  async integrationToken(tenant: string, id: string): Promise<string | undefined> {
    const token = (await this.integrationSecret(tenant, id))?.data?.token;
    return token === undefined ? undefined : unb64(token);
  }

  async deleteIntegration(tenant: string, id: string): Promise<boolean> {
    const s = await this.integrationSecret(tenant, id);
    if (!s?.metadata?.uid) return false;
    try {
      await call(() =>
        this.core.deleteNamespacedSecret({
          namespace: this.namespace,
          name: this.integrationSecretName(id),
          body: { preconditions: { uid: s.metadata!.uid } },
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof NotFoundError) return false;
      throw err;
    }
  }

  // ---- auth service records: one Secret each, labelled with kind and tenant; `sealed` is already ciphertext ----

  private authSecretName(kind: AuthObjectKind, name: string): string {
    return `agentplane-auth-${kind}-${name}`;
  }

  async createAuthObject(o: Omit<AuthObject, 'version'>): Promise<void> {
    const body: V1Secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'Opaque',
      metadata: {
        name: this.authSecretName(o.kind, o.name),
        namespace: this.namespace,
        labels: { [LABEL_AUTH_KIND]: o.kind, [LABEL_TENANT]: o.tenant, 'app.kubernetes.io/managed-by': 'agentplane' },
      },
      data: {
        kind: b64(o.kind),
        name: b64(o.name),
        tenant: b64(o.tenant),
        record: b64(o.record),
        sealed: b64(o.sealed),
      },
    };
    await call(() => this.core.createNamespacedSecret({ namespace: this.namespace, body }));
  }

  async getAuthObject(kind: AuthObjectKind, name: string): Promise<AuthObject | undefined> {
    try {
      const s = await call(() =>
        this.core.readNamespacedSecret({ namespace: this.namespace, name: this.authSecretName(kind, name) }),
      );
      return authObjectFromSecret(s, kind, name);
    } catch (err) {
      if (err instanceof NotFoundError) return undefined;
      throw err;
    }
  }

  async listAuthObjects(kind: AuthObjectKind, tenant: string): Promise<AuthObject[]> {
    const list = await call(() =>
      this.core.listNamespacedSecret({
        namespace: this.namespace,
        labelSelector: `${LABEL_AUTH_KIND}=${kind},${LABEL_TENANT}=${tenant}`,
      }),
    );
    return list.items
      .map((s) => authObjectFromSecret(s, kind))
      .filter((o): o is AuthObject => o !== undefined && o.tenant === tenant);
  }

  async replaceAuthObject(o: AuthObject): Promise<void> {
    const name = this.authSecretName(o.kind, o.name);
    const current = await this.getAuthObject(o.kind, o.name);
    if (!current) throw new NotFoundError(`auth ${o.kind} "${o.name}" not found`);
    if (current.tenant !== o.tenant || current.version !== o.version) {
      throw new StaleResourceVersionError(`auth ${o.kind} "${o.name}" changed since it was read`);
    }
    const body: V1Secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'Opaque',
      metadata: {
        name,
        namespace: this.namespace,
        resourceVersion: o.version,
        labels: { [LABEL_AUTH_KIND]: o.kind, [LABEL_TENANT]: o.tenant, 'app.kubernetes.io/managed-by': 'agentplane' },
      },
      data: {
        kind: b64(o.kind),
        name: b64(o.name),
        tenant: b64(o.tenant),
        record: b64(o.record),
        sealed: b64(o.sealed),
      },
    };
    await call(() => this.core.replaceNamespacedSecret({ namespace: this.namespace, name, body }));
  }

  async deleteAuthObject(kind: AuthObjectKind, name: string, version?: string): Promise<boolean> {
    try {
      await call(() =>
        this.core.deleteNamespacedSecret({
          namespace: this.namespace,
          name: this.authSecretName(kind, name),
          ...(version === undefined ? {} : { body: { preconditions: { resourceVersion: version } } }),
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof NotFoundError || err instanceof StaleResourceVersionError) return false;
      throw err;
    }
  }

  // ---- listeners: one ConfigMap each, named by (tenant, compute id) so creating it is the uniqueness check ----

  private listenerMapName(tenant: string, computeId: string): string {
    const digest = createHash('sha256')
      .update(JSON.stringify([tenant, computeId]))
      .digest('hex')
      .slice(0, 40);
    return `agentplane-listener-${digest}`;
  }

  private async listenerMap(tenant: string, id: string): Promise<{ cm: V1ConfigMap; r: ListenerRecord } | undefined> {
    if (!isLabelValue(id)) return undefined;
    const list = await call(() =>
      this.core.listNamespacedConfigMap({
        namespace: this.namespace,
        labelSelector: `${LABEL_LISTENER_ID}=${id},${LABEL_TENANT}=${tenant}`,
      }),
    );
    for (const cm of list.items) {
      const r = listenerFromMap(cm);
      if (r && r.id === id && r.tenant === tenant && cm.metadata?.name === this.listenerMapName(tenant, r.computeId))
        return { cm, r };
    }
    return undefined;
  }

  async createListener(r: ListenerRecord): Promise<void> {
    const body: V1ConfigMap = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: this.listenerMapName(r.tenant, r.computeId),
        namespace: this.namespace,
        labels: { [LABEL_LISTENER_ID]: r.id, [LABEL_TENANT]: r.tenant, 'app.kubernetes.io/managed-by': 'agentplane' },
      },
      data: { listener: JSON.stringify(r) },
    };
    try {
      await call(() => this.core.createNamespacedConfigMap({ namespace: this.namespace, body }));
    } catch (err) {
      if (err instanceof AlreadyExistsError) {
        throw new AlreadyExistsError(`A listener with compute_id "${r.computeId}" already exists in this tenant.`);
      }
      throw err;
    }
  }

  async getListener(tenant: string, id: string): Promise<ListenerRecord | undefined> {
    return (await this.listenerMap(tenant, id))?.r;
  }

  async listListeners(tenant: string): Promise<ListenerRecord[]> {
    const list = await call(() =>
      this.core.listNamespacedConfigMap({
        namespace: this.namespace,
        labelSelector: `${LABEL_LISTENER_ID},${LABEL_TENANT}=${tenant}`,
      }),
    );
    return list.items
      .map((cm) => ({ cm, r: listenerFromMap(cm) }))
      .filter(
        (x): x is { cm: V1ConfigMap; r: ListenerRecord } =>
          x.r !== undefined &&
          x.r.tenant === tenant &&
          x.cm.metadata?.name === this.listenerMapName(tenant, x.r.computeId),
      )
      .map((x) => x.r)
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
  }

  async updateListener(r: ListenerRecord): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const found = await this.listenerMap(r.tenant, r.id);
      if (!found) throw new NotFoundError(`Listener ID ${r.id} not found.`);
      const next: ListenerRecord = { ...r, computeId: found.r.computeId, computeType: found.r.computeType };
      try {
        await call(() =>
          this.core.replaceNamespacedConfigMap({
            namespace: this.namespace,
            name: found.cm.metadata!.name!,
            body: { ...found.cm, data: { listener: JSON.stringify(next) } },
          }),
        );
        return;
      } catch (err) {
        if (!(err instanceof StaleResourceVersionError) || attempt >= 5) throw err;
      }
    }
  }

  async deleteListener(tenant: string, id: string): Promise<boolean> {
    const found = await this.listenerMap(tenant, id);
    if (!found) return false;
    try {
      await call(() =>
        this.core.deleteNamespacedConfigMap({
          namespace: this.namespace,
          name: found.cm.metadata!.name!,
          body: { preconditions: { uid: found.cm.metadata!.uid } },
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof NotFoundError) return false;
      throw err;
    }
  }

  // ---- api keys: one Secret per key, named by its hash so lookup is a single GET ----

  private keySecretName(hash: string): string {
    return `agentplane-apikey-${hash.slice(0, 40)}`;
  }

  async putApiKey(record: ApiKeyRecord, keyHash: string): Promise<void> {
    const body: V1Secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'Opaque',
      metadata: { name: this.keySecretName(keyHash), namespace: this.namespace, labels: { [LABEL_API_KEY]: 'true' } },
      data: {
        hash: b64(keyHash),
        id: b64(record.id),
        name: b64(record.name),
        tenants: b64(JSON.stringify(record.tenants)),
        createdAt: b64(record.createdAt),
        ...(record.listenerId ? { listenerId: b64(record.listenerId) } : {}),
      },
    };
    await call(() => this.core.createNamespacedSecret({ namespace: this.namespace, body }));
  }

  async findApiKey(keyHash: string): Promise<ApiKeyRecord | undefined> {
    let s: V1Secret;
    try {
      s = await call(() =>
        this.core.readNamespacedSecret({ namespace: this.namespace, name: this.keySecretName(keyHash) }),
      );
    } catch (err) {
      if (err instanceof NotFoundError) return undefined;
      throw err;
    }
    const key = this.keyFromSecret(s);
    return key && key.hash === keyHash
      ? {
          id: key.id,
          name: key.name,
          tenants: key.tenants,
          createdAt: key.createdAt,
          ...(key.listenerId ? { listenerId: key.listenerId } : {}),
        }
      : undefined;
  }

  private keyFromSecret(s: V1Secret): (ApiKeyRecord & { hash: string; secretName: string }) | undefined {
    const d = Object.fromEntries(Object.entries(s.data ?? {}).map(([k, v]) => [k, unb64(v)]));
    if (!d.hash || !s.metadata?.name) return undefined;
    let tenants: string[];
    try {
      tenants = JSON.parse(d.tenants ?? '[]') as string[];
    } catch {
      return undefined; // not one of ours
    }
    return {
      id: d.id ?? '',
      hash: d.hash,
      name: d.name ?? '',
      tenants,
      createdAt: d.createdAt ?? '',
      ...(d.listenerId ? { listenerId: d.listenerId } : {}),
      secretName: s.metadata.name,
    };
  }

  private async keySecrets(): Promise<(ApiKeyRecord & { hash: string; secretName: string })[]> {
    const list = await call(() =>
      this.core.listNamespacedSecret({ namespace: this.namespace, labelSelector: `${LABEL_API_KEY}=true` }),
    );
    return list.items
      .map((s) => this.keyFromSecret(s))
      .filter((k): k is NonNullable<typeof k> => k !== undefined && k.secretName === this.keySecretName(k.hash))
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
  }

  async listApiKeys(): Promise<(ApiKeyRecord & { hash: string })[]> {
    return (await this.keySecrets()).map(({ secretName: _s, ...k }) => k);
  }

  async deleteApiKey(id: string): Promise<boolean> {
    const found = (await this.keySecrets()).find((k) => k.id === id);
    if (!found) return false;
    try {
      await call(() => this.core.deleteNamespacedSecret({ namespace: this.namespace, name: found.secretName }));
      return true;
    } catch (err) {
      if (err instanceof NotFoundError) return false;
      throw err;
    }
  }

  // ---- per-tenant key hashes for the agents: a Secret each, mounted by agent pods (the kubelet refreshes it) ----

  tenantKeySink(namespaceFor: (tenant: string) => string = () => this.namespace): TenantKeySink {
    return {
      write: async (tenant, hashes) => {
        const name = tenantKeysSecretName(tenant);
        const namespace = namespaceFor(tenant);
        const data = { 'keys.json': b64(`${JSON.stringify({ hashes })}\n`) };
        const metadata = {
          name,
          namespace,
          labels: { [LABEL_TENANT]: tenant, 'app.kubernetes.io/managed-by': 'agentplane' },
        };
        try {
          await call(() =>
            this.core.createNamespacedSecret({
              namespace,
              body: { apiVersion: 'v1', kind: 'Secret', type: 'Opaque', metadata, data },
            }),
          );
          return;
        } catch (err) {
          if (!(err instanceof AlreadyExistsError)) throw err;
        }
        const current = await call(() => this.core.readNamespacedSecret({ namespace, name }));
        if (current.data?.['keys.json'] === data['keys.json']) return;
        await call(() =>
          this.core.replaceNamespacedSecret({
            namespace,
            name,
            body: {
              ...current,
              metadata: { ...current.metadata, labels: { ...current.metadata?.labels, ...metadata.labels } },
              data,
            },
          }),
        );
      },
    };
  }

  // ---- deployment name claims: a ConfigMap per (tenant, name), owned by the AgentDeployment holding it ----
  // ConfigMaps because the control plane's Role already manages them (revision logs): no new permission.

  private claimBody(
    namespace: string,
    objectName: string,
    labelKey: string,
    data: Record<string, string>,
    owner: NameClaimOwner,
    resourceVersion?: string,
  ): V1ConfigMap {
    return {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: objectName,
        namespace,
        resourceVersion,
        labels: { [labelKey]: owner.name },
        ownerReferences: [{ apiVersion: API_VERSION, kind: 'AgentDeployment', name: owner.name, uid: owner.uid }],
      },
      data,
    };
  }

  /** The deployment a claim names still exists (same uid) and is not being deleted. */
  private async holds(namespace: string, holder: { name: string; uid: string }): Promise<boolean> {
    try {
      const dep = await this.get('AgentDeployment', namespace, holder.name);
      return dep.metadata.uid === holder.uid && !dep.metadata.deletionTimestamp;
    } catch (err) {
      if (err instanceof NotFoundError) return false;
      throw err;
    }
  }

  /** Creates the claim ConfigMap `objectName` for `owner`, or takes over a stale one (see NameClaimStore). */
  private async claim(
    namespace: string,
    objectName: string,
    labelKey: string,
    data: Record<string, string>,
    owner: NameClaimOwner,
    what: string,
  ) {
    for (let attempt = 0; attempt < 10; attempt++) {
      try {
        await call(() =>
          this.core.createNamespacedConfigMap({
            namespace,
            body: this.claimBody(namespace, objectName, labelKey, data, owner),
          }),
        );
        return;
      } catch (err) {
        if (!(err instanceof AlreadyExistsError)) throw err;
      }
      let cur: V1ConfigMap;
      try {
        cur = await call(() => this.core.readNamespacedConfigMap({ namespace, name: objectName }));
      } catch (err) {
        if (err instanceof NotFoundError) continue; // released meanwhile: create again
        throw err;
      }
      const holder = cur.metadata?.ownerReferences?.find((o) => o.kind === 'AgentDeployment');
      if (holder?.uid === owner.uid) return;
      if (holder && (await this.holds(namespace, holder))) {
        throw new AlreadyExistsError(`${what} is held by AgentDeployment "${holder.name}"`);
      }
      // Stale (its deployment is gone or being deleted; garbage collection may lag): take it over, but only if
      // nobody changed it since it was read. Of two processes doing this at once, one gets 409 and looks again.
      try {
        await call(() =>
          this.core.replaceNamespacedConfigMap({
            namespace,
            name: objectName,
            body: this.claimBody(namespace, objectName, labelKey, data, owner, cur.metadata!.resourceVersion),
          }),
        );
        this.log.info({ claim: objectName, from: holder?.name, to: owner.name }, 'took over a stale claim');
        return;
      } catch (err) {
        if (!(err instanceof StaleResourceVersionError || err instanceof NotFoundError)) throw err;
      }
    }
    throw new AlreadyExistsError(`${what} is contended; try again`);
  }

  /** Deletes the claim ConfigMap if `owner` holds it, never one another deployment took over meanwhile. */
  private async release(namespace: string, objectName: string, owner: NameClaimOwner): Promise<void> {
    let cm: V1ConfigMap;
    try {
      cm = await call(() => this.core.readNamespacedConfigMap({ namespace, name: objectName }));
    } catch (err) {
      if (err instanceof NotFoundError) return;
      throw err;
    }
    const m = cm.metadata!;
    if (!m.ownerReferences?.some((o) => o.uid === owner.uid)) return;
    try {
      await call(() =>
        this.core.deleteNamespacedConfigMap({
          namespace,
          name: objectName,
          body: { preconditions: { uid: m.uid, resourceVersion: m.resourceVersion } },
        }),
      );
    } catch (err) {
      if (!(err instanceof NotFoundError || err instanceof StaleResourceVersionError)) throw err;
    }
  }

  async claimName(namespace: string, tenant: string, name: string, owner: NameClaimOwner): Promise<void> {
    await this.claim(
      namespace,
      claimObjectName(tenant, name),
      LABEL_NAME_CLAIM_OF,
      { tenant, name },
      owner,
      `the name "${name}"`,
    );
  }

  async releaseName(namespace: string, tenant: string, name: string, owner: NameClaimOwner): Promise<void> {
    await this.release(namespace, claimObjectName(tenant, name), owner);
  }

  async listNameClaims(namespace: string): Promise<NameClaim[]> {
    const res = await call(() => this.core.listNamespacedConfigMap({ namespace, labelSelector: LABEL_NAME_CLAIM_OF }));
    return res.items.map((cm) => {
      const o = cm.metadata?.ownerReferences?.find((r) => r.kind === 'AgentDeployment');
      return {
        tenant: cm.data?.tenant ?? '',
        name: cm.data?.name ?? '',
        owner: { name: o?.name ?? '', uid: o?.uid ?? '' },
      };
    });
  }

  // ---- custom host claims: a ConfigMap per host, like name claims but shared by every tenant ----

  async claimHost(namespace: string, host: string, owner: NameClaimOwner): Promise<void> {
    const key = host.toLowerCase();
    await this.claim(
      namespace,
      hostClaimObjectName(key),
      LABEL_HOST_CLAIM_OF,
      { host: key },
      owner,
      `the host "${key}"`,
    );
  }

  async releaseHost(namespace: string, host: string, owner: NameClaimOwner): Promise<void> {
    await this.release(namespace, hostClaimObjectName(host), owner);
  }

  async listHostClaims(namespace: string): Promise<HostClaim[]> {
    const res = await call(() => this.core.listNamespacedConfigMap({ namespace, labelSelector: LABEL_HOST_CLAIM_OF }));
    return res.items.map((cm) => {
      const o = cm.metadata?.ownerReferences?.find((r) => r.kind === 'AgentDeployment');
      return { host: cm.data?.host ?? '', owner: { name: o?.name ?? '', uid: o?.uid ?? '' } };
    });
  }

  // ---- references to cluster objects: only those labelled with the tenant ----

  async checkTenantReferences(namespace: string, tenant: string, refs: TenantReferences) {
    const refused: { kind: 'ServiceAccount' | 'Secret'; name: string }[] = [];
    const labelled = async (kind: 'ServiceAccount' | 'Secret', name: string) => {
      try {
        const obj =
          kind === 'Secret'
            ? await call(() => this.core.readNamespacedSecret({ namespace, name }))
            : await call(() => this.core.readNamespacedServiceAccount({ namespace, name }));
        if (obj.metadata?.labels?.[LABEL_TENANT] !== tenant) refused.push({ kind, name });
      } catch (err) {
        if (!(err instanceof NotFoundError)) throw err;
        refused.push({ kind, name });
      }
    };
    await Promise.all([
      ...[...new Set(refs.serviceAccounts)].map((n) => labelled('ServiceAccount', n)),
      ...[...new Set(refs.secrets)].map((n) => labelled('Secret', n)),
    ]);
    return refused;
  }

  // ---- revision logs: a ConfigMap per revision and type, owned by the revision, newest MAX_LOG_LINES kept ----

  private logMapName(revision: string, type: LogType): string {
    return `${revision}-log-${type}`;
  }

  async appendLogs(namespace: string, revision: string, type: LogType, lines: string[]): Promise<void> {
    if (!lines.length) return;
    const name = this.logMapName(revision, type);
    for (let attempt = 0; ; attempt++) {
      let cm: V1ConfigMap | undefined;
      try {
        cm = await call(() => this.core.readNamespacedConfigMap({ namespace, name }));
      } catch (err) {
        if (!(err instanceof NotFoundError)) throw err;
      }
      const entries = parseLog(cm);
      let next = Number(cm?.data?.next ?? '1');
      const ts = new Date().toISOString();
      for (const line of lines) entries.push({ id: next++, ts, message: line });
      const kept = entries.slice(-MAX_LOG_LINES);
      const data = { next: String(next), lines: kept.map((e) => JSON.stringify(e)).join('\n') };
      try {
        if (cm) {
          await call(() => this.core.replaceNamespacedConfigMap({ namespace, name, body: { ...cm, data } }));
        } else {
          const rev = await this.get('AgentRevision', namespace, revision);
          await call(() =>
            this.core.createNamespacedConfigMap({
              namespace,
              body: {
                apiVersion: 'v1',
                kind: 'ConfigMap',
                metadata: {
                  name,
                  namespace,
                  labels: { [LABEL_LOG_FOR]: revision },
                  ownerReferences: [
                    { apiVersion: API_VERSION, kind: 'AgentRevision', name: revision, uid: rev.metadata.uid! },
                  ],
                },
                data,
              },
            }),
          );
        }
        return;
      } catch (err) {
        const retry = err instanceof StaleResourceVersionError || err instanceof AlreadyExistsError;
        if (!retry || attempt >= 5) throw err;
        this.log.debug({ revision, attempt }, 'log append raced, retrying');
      }
    }
  }

  async readLogs(
    namespace: string,
    revision: string,
    opts: { type: LogType; limit: number; offset?: string; order: 'asc' | 'desc' },
  ): Promise<LogPage> {
    let cm: V1ConfigMap | undefined;
    try {
      cm = await call(() =>
        this.core.readNamespacedConfigMap({ namespace, name: this.logMapName(revision, opts.type) }),
      );
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
    }
    const cursor = opts.offset ? Number(opts.offset) : undefined;
    let entries = parseLog(cm);
    if (opts.order === 'desc') entries = entries.reverse();
    if (cursor !== undefined) entries = entries.filter((e) => (opts.order === 'asc' ? e.id > cursor : e.id < cursor));
    const page = entries.slice(0, opts.limit);
    return {
      logs: page.map((e) => ({ id: String(e.id), timestamp: e.ts, type: opts.type, message: e.message })),
      next_offset: entries.length > opts.limit ? String(page[page.length - 1]!.id) : null,
    };
  }
}

function parseLog(cm: V1ConfigMap | undefined): { id: number; ts: string; message: string }[] {
  const text = cm?.data?.lines;
  if (!text) return [];
  return text.split('\n').map((l) => JSON.parse(l) as { id: number; ts: string; message: string });
}

function authObjectFromSecret(s: V1Secret, kind: AuthObjectKind, name?: string): AuthObject | undefined {
  const d = s.data ?? {};
  if (!d.kind || !d.name || !d.tenant || !d.record || !d.sealed || !s.metadata?.resourceVersion) return undefined;
  const o: AuthObject = {
    kind: unb64(d.kind) as AuthObjectKind,
    name: unb64(d.name),
    tenant: unb64(d.tenant),
    record: unb64(d.record),
    sealed: unb64(d.sealed),
    version: s.metadata.resourceVersion,
  };
  // The label, the data and the object name must agree, or the object is not trusted.
  if (o.kind !== kind || (name !== undefined && o.name !== name) || s.metadata.labels?.[LABEL_TENANT] !== o.tenant) {
    return undefined;
  }
  return o;
}

function listenerFromMap(cm: V1ConfigMap): ListenerRecord | undefined {
  try {
    const r = JSON.parse(cm.data?.listener ?? '') as ListenerRecord;
    return typeof r.id === 'string' && typeof r.tenant === 'string' && typeof r.computeId === 'string' ? r : undefined;
  } catch {
    return undefined;
  }
}

function integrationFromSecret(s: V1Secret): IntegrationRecord | undefined {
  const d = Object.fromEntries(Object.entries(s.data ?? {}).map(([k, v]) => [k, unb64(v)]));
  if (!d.id || !d.tenant || !d.host) return undefined;
  return {
    id: d.id,
    tenant: d.tenant,
    name: d.name ?? '',
    host: d.host,
    ...(d.username === undefined ? {} : { username: d.username }),
    createdAt: d.createdAt ?? '',
    ...(d.details ? integrationDetails(JSON.parse(d.details) as IntegrationRecord) : {}),
  };
}
