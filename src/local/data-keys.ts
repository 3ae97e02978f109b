// Each deployment's data key: the key its agent server encrypts thread values, checkpoints, store items and run
// inputs with at rest (LANGGRAPH_AES_KEY, see agent-server/storage/data-cipher.ts). Made at random on the
// deployment's first start and kept as a secret set of its own, owned by the deployment: sealed with the platform's
// secret key like every secret, never shown by the API, deleted with the deployment. The runtime hands it to the
// agent server after the workspace's own secrets, so a secret of the same name cannot replace it.
// Rotation (`agentplane data-key rotate`) makes a new key the current one and keeps the earlier ones as previous keys:
// at its next start the agent server opens old values with them and reseals everything under the new key.
import { randomBytes } from 'node:crypto';
import { NotFoundError } from '../lib/errors.ts';
import { dataKeysName } from '../resources/names.ts';
import { AlreadyExistsError } from '../state/errors.ts';
import type { PlatformState } from '../state/types.ts';

/** The variables an agent server reads its data keys from. */
const NAMES = ['LANGGRAPH_AES_KEY', 'AGENTPLANE_AES_PREVIOUS_KEYS'] as const;

/** 24 random bytes as 32 characters of base64url: a key of the 32 bytes LANGGRAPH_AES_KEY takes. */
export function newDataKey(): string {
  return randomBytes(24).toString('base64url');
}

type Store = Pick<PlatformState, 'get' | 'getSecrets' | 'putSecrets'>;

/** Where a rotation writes the new keys first: a rotation cut short leaves them there, never no keys at all. */
const nextName = (deployment: string) => `${dataKeysName(deployment)}-next`;

/** The deployment's data keys as stored (the set, else what a rotation cut short left), or undefined. */
async function storedKeys(store: Pick<Store, 'getSecrets'>, namespace: string, deployment: string) {
  for (const set of [dataKeysName(deployment), nextName(deployment)]) {
    try {
      return await store.getSecrets(namespace, set);
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
    }
  }
  return undefined;
}

const ownerOf = async (store: Pick<Store, 'get'>, namespace: string, deployment: string) => {
  const dep = await store.get('AgentDeployment', namespace, deployment);
  return { kind: 'AgentDeployment' as const, name: dep.metadata.name, uid: dep.metadata.uid! };
};

/** The environment that gives a deployment's agent server its data keys, made on first use. */
export function deploymentDataKeys(
  store: Store,
): (ref: { namespace: string; deployment: string }) => Promise<Record<string, string>> {
  const only = (values: Record<string, string>) =>
    Object.fromEntries(NAMES.filter((n) => values[n]).map((n) => [n, values[n]!]));
  return async (ref) => {
    const stored = await storedKeys(store, ref.namespace, ref.deployment);
    if (stored) return only(stored);
    const set = dataKeysName(ref.deployment);
    try {
      await store.putSecrets(ref.namespace, set, await ownerOf(store, ref.namespace, ref.deployment), {
        LANGGRAPH_AES_KEY: newDataKey(),
      });
    } catch (err) {
      // Another start made it first: use that one.
      if (!(err instanceof AlreadyExistsError)) throw err;
    }
    return only(await store.getSecrets(ref.namespace, set));
  };
}

/**
 * Gives a deployment a new current data key, keeping the earlier ones as previous keys (the agent server reseals
 * its data under the new key at its next start). False when the deployment has no data key yet. The new set is
 * written before the old one goes, so whenever this stops, one of the two holds every key.
 */
export async function rotateDataKeys(
  store: Store & Pick<PlatformState, 'deleteSecrets'>,
  namespace: string,
  deployment: string,
): Promise<boolean> {
  const stored = await storedKeys(store, namespace, deployment);
  if (!stored?.LANGGRAPH_AES_KEY) return false;
  const previous = [stored.LANGGRAPH_AES_KEY, ...(stored.AGENTPLANE_AES_PREVIOUS_KEYS ?? '').split(',')].filter(
    Boolean,
  );
  const keys = { LANGGRAPH_AES_KEY: newDataKey(), AGENTPLANE_AES_PREVIOUS_KEYS: previous.join(',') };
  const owner = await ownerOf(store, namespace, deployment);
  const set = dataKeysName(deployment);
  await store.deleteSecrets(namespace, nextName(deployment));
  await store.putSecrets(namespace, nextName(deployment), owner, keys);
  await store.deleteSecrets(namespace, set);
  await store.putSecrets(namespace, set, owner, keys);
  await store.deleteSecrets(namespace, nextName(deployment));
  return true;
}
