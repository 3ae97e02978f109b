// Auth service records in the cluster: one Secret each, labelled with kind and tenant; `sealed` is already ciphertext.
import type { V1Secret } from '@kubernetes/client-node';
import { NotFoundError } from '../../lib/errors.ts';
import { LABEL_TENANT } from '../../resources/index.ts';
import type { AuthObject, AuthObjectKind, AuthObjectStore } from '../auth-objects.ts';
import { StaleResourceVersionError } from '../errors.ts';
import { b64, call, unb64, type KubeContext } from './client.ts';

/** On auth service Secrets: provider, token or flow. */
const LABEL_AUTH_KIND = 'agentplane.dev/auth-kind';

export function kubernetesAuthObjects(k: KubeContext): AuthObjectStore {
  function authSecretName(kind: AuthObjectKind, name: string): string {
    return `agentplane-auth-${kind}-${name}`;
  }

  const store: AuthObjectStore = {
    async createAuthObject(o: Omit<AuthObject, 'version'>): Promise<void> {
      const body = authSecret(k.namespace, authSecretName(o.kind, o.name), o);
      await call(() => k.core.createNamespacedSecret({ namespace: k.namespace, body }));
    },

    async getAuthObject(kind: AuthObjectKind, name: string): Promise<AuthObject | undefined> {
      try {
        const s = await call(() =>
          k.core.readNamespacedSecret({ namespace: k.namespace, name: authSecretName(kind, name) }),
        );
        return authObjectFromSecret(s, kind, name);
      } catch (err) {
        if (err instanceof NotFoundError) return undefined;
        throw err;
      }
    },

    async listAuthObjects(kind: AuthObjectKind, tenant: string): Promise<AuthObject[]> {
      const list = await call(() =>
        k.core.listNamespacedSecret({
          namespace: k.namespace,
          labelSelector: `${LABEL_AUTH_KIND}=${kind},${LABEL_TENANT}=${tenant}`,
        }),
      );
      return list.items
        .map((s) => authObjectFromSecret(s, kind))
        .filter((o): o is AuthObject => o !== undefined && o.tenant === tenant);
    },

    async replaceAuthObject(o: AuthObject): Promise<void> {
      const name = authSecretName(o.kind, o.name);
      const current = await store.getAuthObject(o.kind, o.name);
      if (!current) throw new NotFoundError(`auth ${o.kind} "${o.name}" not found`);
      if (current.tenant !== o.tenant || current.version !== o.version) {
        throw new StaleResourceVersionError(`auth ${o.kind} "${o.name}" changed since it was read`);
      }
      const body = authSecret(k.namespace, name, o, o.version);
      await call(() => k.core.replaceNamespacedSecret({ namespace: k.namespace, name, body }));
    },

    async deleteAuthObject(kind: AuthObjectKind, name: string, version?: string): Promise<boolean> {
      try {
        await call(() =>
          k.core.deleteNamespacedSecret({
            namespace: k.namespace,
            name: authSecretName(kind, name),
            ...(version === undefined ? {} : { body: { preconditions: { resourceVersion: version } } }),
          }),
        );
        return true;
      } catch (err) {
        if (err instanceof NotFoundError || err instanceof StaleResourceVersionError) return false;
        throw err;
      }
    },
  };
  return store;
}

/** The Secret holding one auth record; `resourceVersion` makes a replace conditional on it. */
function authSecret(
  namespace: string,
  name: string,
  o: Omit<AuthObject, 'version'>,
  resourceVersion?: string,
): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: {
      name,
      namespace,
      ...(resourceVersion === undefined ? {} : { resourceVersion }),
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
