export type ApiKeyRecord = {
  id: string;
  name: string;
  /** Tenants the key may act for; '*' = every tenant (bootstrap admin keys). */
  tenants: string[];
  createdAt: string;
  /** Set on listener keys: the key may only call the endpoints of this listener (in its one tenant). */
  listenerId?: string;
};

/** API keys: only a SHA-256 hash of each key is stored. */
export interface ApiKeyStore {
  /** Stores a key (the caller generated it) by its hash. */
  putApiKey(record: ApiKeyRecord, keyHash: string): Promise<void>;
  findApiKey(keyHash: string): Promise<ApiKeyRecord | undefined>;
  /** Every stored key with its hash, oldest first (the hashes feed the agents' key files; never shown by the API). */
  listApiKeys(): Promise<(ApiKeyRecord & { hash: string })[]>;
  /** Revokes a key by id; false when no such key exists. */
  deleteApiKey(id: string): Promise<boolean>;
}

/** Where the key publisher writes a tenant's key hashes for its agent servers to read (a file, a Secret). */
export interface TenantKeySink {
  write(tenant: string, hashes: string[]): Promise<void>;
}
