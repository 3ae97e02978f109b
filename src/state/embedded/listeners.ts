// Listener records of the embedded state: a JSON row each; (tenant, compute_id) is unique.
import { NotFoundError } from '../../lib/errors.ts';
import { AlreadyExistsError } from '../errors.ts';
import type { ListenerRecord, ListenerStore } from '../listeners.ts';
import type { EmbeddedContext } from './context.ts';

export function embeddedListeners({ db }: EmbeddedContext): ListenerStore {
  const getListener = async (tenant: string, id: string): Promise<ListenerRecord | undefined> => {
    const row = db.prepare('SELECT json FROM listeners WHERE tenant = ? AND id = ?').get(tenant, id) as
      { json: string } | undefined;
    return row && (JSON.parse(row.json) as ListenerRecord);
  };
  return {
    async createListener(r: ListenerRecord): Promise<void> {
      try {
        db.prepare('INSERT INTO listeners (id, tenant, compute_id, json) VALUES (?, ?, ?, ?)').run(
          r.id,
          r.tenant,
          r.computeId,
          JSON.stringify(r),
        );
      } catch (err) {
        if ((err as { code?: string }).code?.startsWith('SQLITE_CONSTRAINT')) {
          throw new AlreadyExistsError(`A listener with compute_id "${r.computeId}" already exists in this workspace.`);
        }
        throw err;
      }
    },

    getListener,

    async listListeners(tenant: string): Promise<ListenerRecord[]> {
      const rows = db.prepare('SELECT json FROM listeners WHERE tenant = ?').all(tenant) as { json: string }[];
      return rows
        .map((r) => JSON.parse(r.json) as ListenerRecord)
        .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
    },

    async updateListener(r: ListenerRecord): Promise<void> {
      const found = await getListener(r.tenant, r.id);
      if (!found) throw new NotFoundError(`Listener ID ${r.id} not found.`);
      const next: ListenerRecord = { ...r, computeId: found.computeId, computeType: found.computeType };
      db.prepare('UPDATE listeners SET json = ? WHERE tenant = ? AND id = ?').run(JSON.stringify(next), r.tenant, r.id);
    },

    async deleteListener(tenant: string, id: string): Promise<boolean> {
      return db.prepare('DELETE FROM listeners WHERE tenant = ? AND id = ?').run(tenant, id).changes > 0;
    },
  };
}
