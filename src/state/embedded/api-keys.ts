// API keys of the embedded state: a row per key, found by the hash of the key (the key itself is never stored).
import type { ApiKeyRecord, ApiKeyStore } from '../api-keys.ts';
import type { EmbeddedContext } from './context.ts';

type ApiKeyRow = {
  id: string;
  hash: string;
  name: string;
  tenants: string;
  created_at: string;
  listener_id: string | null;
};

function apiKeyOf(r: Omit<ApiKeyRow, 'hash'>): ApiKeyRecord {
  return {
    id: r.id,
    name: r.name,
    tenants: JSON.parse(r.tenants) as string[],
    createdAt: r.created_at,
    ...(r.listener_id ? { listenerId: r.listener_id } : {}),
  };
}

export function embeddedApiKeys({ db }: EmbeddedContext): ApiKeyStore {
  return {
    async putApiKey(record: ApiKeyRecord, keyHash: string): Promise<void> {
      db.prepare(
        'INSERT INTO api_keys (id, hash, name, tenants, created_at, listener_id) VALUES (?, ?, ?, ?, ?, ?)',
      ).run(
        record.id,
        keyHash,
        record.name,
        JSON.stringify(record.tenants),
        record.createdAt,
        record.listenerId ?? null,
      );
    },

    async findApiKey(keyHash: string): Promise<ApiKeyRecord | undefined> {
      const row = db.prepare('SELECT * FROM api_keys WHERE hash = ?').get(keyHash) as ApiKeyRow | undefined;
      return row && apiKeyOf(row);
    },

    async listApiKeys(): Promise<(ApiKeyRecord & { hash: string })[]> {
      const rows = db.prepare('SELECT * FROM api_keys ORDER BY created_at, id').all() as ApiKeyRow[];
      return rows.map((r) => {
        const { id, ...rest } = apiKeyOf(r);
        return { id, hash: r.hash, ...rest };
      });
    },

    async deleteApiKey(id: string): Promise<boolean> {
      return db.prepare('DELETE FROM api_keys WHERE id = ?').run(id).changes > 0;
    },
  };
}
