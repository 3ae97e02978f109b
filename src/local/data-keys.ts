// Each deployment's data key: the key its agent server encrypts thread values, checkpoints, store items and run
// inputs with at rest (LANGGRAPH_AES_KEY, see agent-server/storage/data-cipher.ts). Made at random on the
// deployment's first start and kept as a secret set of its own, owned by the deployment: sealed with the platform's
// secret key like every secret, never shown by the API, deleted with the deployment. The runtime hands it to the
// agent server after the workspace's own secrets, so a secret of the same name cannot replace it.
import { randomBytes } from 'node:crypto';
import { NotFoundError } from '../lib/errors.ts';
import { dataKeysName } from '../resources/names.ts';
import type { DeploymentRef } from '../operator/runtimes/local/context.ts';
import { AlreadyExistsError } from '../state/errors.ts';
import type { PlatformState } from '../state/types.ts';

/** The variables an agent server reads its data keys from. */
const NAMES = ['LANGGRAPH_AES_KEY', 'AGENTPLANE_AES_PREVIOUS_KEYS'] as const;

/** 24 random bytes as 32 characters of base64url: a key of the 32 bytes LANGGRAPH_AES_KEY takes. */
export function newDataKey(): string {
  return randomBytes(24).toString('base64url');
}

type Store = Pick<PlatformState, 'get' | 'getSecrets' | 'putSecrets'>;

/** The environment that gives a deployment's agent server its data keys, made on first use. */
export function deploymentDataKeys(store: Store): (ref: DeploymentRef) => Promise<Record<string, string>> {
  const only = (values: Record<string, string>) =>
    Object.fromEntries(NAMES.filter((n) => values[n]).map((n) => [n, values[n]!]));
  return async (ref) => {
    const set = dataKeysName(ref.deployment);
    try {
      return only(await store.getSecrets(ref.namespace, set));
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
    }
    const dep = await store.get('AgentDeployment', ref.namespace, ref.deployment);
    const owner = { kind: 'AgentDeployment' as const, name: dep.metadata.name, uid: dep.metadata.uid! };
    try {
      await store.putSecrets(ref.namespace, set, owner, { LANGGRAPH_AES_KEY: newDataKey() });
    } catch (err) {
      // Another start made it first: use that one.
      if (!(err instanceof AlreadyExistsError)) throw err;
    }
    return only(await store.getSecrets(ref.namespace, set));
  };
}
