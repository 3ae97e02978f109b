import type { Kind } from './resources.ts';

/** Environment values of a deployment, one immutable set per change (see resources/names.ts secretsName). */
export interface SecretStore {
  /** Creates the set `name` owned by `owner` (garbage-collected with it). Existing name -> AlreadyExistsError. */
  putSecrets(
    namespace: string,
    name: string,
    owner: { kind: Kind; name: string; uid: string },
    values: Record<string, string>,
  ): Promise<void>;
  /** Values of a set; NotFoundError when missing. Only runtimes call this; the API never returns values. */
  getSecrets(namespace: string, name: string): Promise<Record<string, string>>;
  /** Variable names of a set, for API responses. */
  secretNames(namespace: string, name: string): Promise<string[]>;
  deleteSecrets(namespace: string, name: string): Promise<void>;
}
