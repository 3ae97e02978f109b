// Assistants of the embedded store.
import { createHash } from 'node:crypto';
import { ConflictError, NotFoundError } from '../../../lib/errors.ts';
import { ASSISTANT_SORT } from '../common.ts';
import type {
  AssistantPatch,
  AssistantQuery,
  AssistantStore,
  AssistantVersion,
  IfExists,
  Json,
  NewAssistant,
} from '../types.ts';
import { j, jsonFilter, toAssistant, type EmbeddedContext, type Row } from './context.ts';

/** A versions row has the assistant's columns but `updated_at`; it reads like an assistant row. */
function toVersion(r: Row): AssistantVersion {
  const { updated_at: _updated, ...version } = toAssistant({ ...r, updated_at: r.created_at });
  return version;
}

/**
 * The token of an assistant's row (AssistantStore.getVersioned): a digest of its stored columns. SQLite keeps no row
 * version (Postgres has xmin); every write that changes the row changes a column, and two rows with the same columns
 * build the same run, so the digest tells a create all it needs.
 */
export function assistantToken(r: Row): string {
  return createHash('sha256').update(JSON.stringify(r)).digest('base64url');
}

export function embeddedAssistants({ sql, inTx, st, now, searchWhere, orderBy }: EmbeddedContext): AssistantStore {
  /** Records the assistant's current fields as its current version (inside the caller's transaction). */
  const snapshot = (id: string) =>
    sql(`INSERT OR REPLACE INTO ap_assistant_versions SELECT assistant_id, version,
    graph_id, config, context, metadata, name, description, updated_at FROM ap_assistants WHERE assistant_id = ?`).run(
      id,
    );
  const requireAssistant = (id: string): Row => {
    const r = st.getAssistant.get(id) as Row | undefined;
    if (!r) throw new NotFoundError(`Assistant ${id} not found`);
    return r;
  };

  return {
    async create(a: NewAssistant, ifExists: IfExists) {
      return inTx(() => {
        const existing = st.getAssistant.get(a.assistant_id) as Row | undefined;
        if (existing) {
          if (ifExists === 'do_nothing') return toAssistant(existing);
          throw new ConflictError(`Assistant ${a.assistant_id} already exists`);
        }
        const t = now();
        sql(`INSERT INTO ap_assistants VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?)`).run(
          a.assistant_id,
          a.graph_id,
          j(a.config),
          j(a.context),
          j(a.metadata),
          a.name,
          a.description,
          t,
          t,
        );
        snapshot(a.assistant_id);
        return toAssistant(st.getAssistant.get(a.assistant_id) as Row);
      });
    },
    async upsertSystem(a: NewAssistant) {
      const t = now();
      return inTx(() => {
        sql(`INSERT INTO ap_assistants VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?)
          ON CONFLICT (assistant_id) DO UPDATE SET graph_id = excluded.graph_id, metadata = excluded.metadata`).run(
          a.assistant_id,
          a.graph_id,
          j(a.config),
          j(a.context),
          j(a.metadata),
          a.name,
          a.description,
          t,
          t,
        );
        snapshot(a.assistant_id);
        return toAssistant(st.getAssistant.get(a.assistant_id) as Row);
      });
    },
    async get(id: string) {
      const r = st.getAssistant.get(id) as Row | undefined;
      return r ? toAssistant(r) : null;
    },
    async getVersioned(id: string) {
      const r = st.getAssistant.get(id) as Row | undefined;
      return r ? { assistant: toAssistant(r), token: assistantToken(r) } : null;
    },
    async patch(id: string, p: AssistantPatch) {
      return inTx(() => {
        const cur = toAssistant(requireAssistant(id));
        // A new version after the newest one (the current may be an earlier one, see setLatest).
        sql(`UPDATE ap_assistants SET graph_id = ?, config = ?, context = ?, metadata = ?, name = ?,
          description = ?, version = (SELECT coalesce(max(version), 0) + 1 FROM ap_assistant_versions
          WHERE assistant_id = ?), updated_at = ? WHERE assistant_id = ?`).run(
          p.graph_id ?? cur.graph_id,
          j(p.config ?? cur.config),
          j(p.context ?? cur.context),
          j({ ...cur.metadata, ...p.metadata }),
          p.name ?? cur.name,
          p.description === undefined ? cur.description : p.description,
          id,
          now(),
          id,
        );
        snapshot(id);
        return toAssistant(st.getAssistant.get(id) as Row);
      });
    },
    async delete(id: string) {
      inTx(() => {
        const res = sql('DELETE FROM ap_assistants WHERE assistant_id = ?').run(id);
        if (res.changes === 0) throw new NotFoundError(`Assistant ${id} not found`);
        sql('DELETE FROM ap_assistant_versions WHERE assistant_id = ?').run(id);
      });
    },
    async search(q: AssistantQuery) {
      const params: unknown[] = [];
      const text = `SELECT * FROM ap_assistants ${searchWhere('a', q, params)} ${orderBy(q, ASSISTANT_SORT)}
        LIMIT ? OFFSET ?`;
      return (sql(text).all(...params, q.limit ?? 10, q.offset ?? 0) as Row[]).map(toAssistant);
    },
    async count(q: AssistantQuery) {
      const params: unknown[] = [];
      const r = sql(`SELECT count(*) AS n FROM ap_assistants ${searchWhere('a', q, params)}`).get(...params);
      return (r as Row).n as number;
    },
    async listVersions(id: string, q: { metadata?: Json; limit: number; offset: number }) {
      requireAssistant(id);
      const params: unknown[] = [id];
      const filters = jsonFilter('metadata', q.metadata, params)
        .map((c) => ` AND ${c}`)
        .join('');
      return (
        sql(`SELECT * FROM ap_assistant_versions WHERE assistant_id = ?${filters} ORDER BY version DESC
        LIMIT ? OFFSET ?`).all(...params, q.limit, q.offset) as Row[]
      ).map(toVersion);
    },
    async setLatest(id: string, version: number) {
      return inTx(() => {
        requireAssistant(id);
        const v = sql('SELECT * FROM ap_assistant_versions WHERE assistant_id = ? AND version = ?').get(id, version) as
          Row | undefined;
        if (!v) throw new NotFoundError(`Assistant ${id} has no version ${version}`);
        sql(`UPDATE ap_assistants SET graph_id = ?, config = ?, context = ?, metadata = ?, name = ?, description = ?,
          version = ?, updated_at = ? WHERE assistant_id = ?`).run(
          v.graph_id,
          v.config,
          v.context,
          v.metadata,
          v.name,
          v.description,
          version,
          now(),
          id,
        );
        return toAssistant(st.getAssistant.get(id) as Row);
      });
    },
  };
}
