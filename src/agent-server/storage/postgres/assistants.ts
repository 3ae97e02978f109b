// Assistants of the Postgres store.
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
import { ASSISTANT_COLS, toAssistant, type PgContext, type Row } from './context.ts';

export function postgresAssistants(ctx: PgContext): AssistantStore {
  const { pool, s, named, tx, where, orderBy } = ctx;
  /** Records the rows of `a` (a CTE of assistants) as their current versions. */
  const snapshot = (
    from: string,
    onConflict = 'DO NOTHING',
  ) => `INSERT INTO ${s}.assistant_versions (assistant_id, version,
    graph_id, config, context, metadata, name, description, created_at) SELECT assistant_id, version, graph_id, config,
    context, metadata, name, description, updated_at FROM ${from} ON CONFLICT (assistant_id, version) ${onConflict}`;
  // A versions row has the assistant's columns but `updated_at`; it reads like an assistant row.
  const toVersion = (r: Row): AssistantVersion => {
    const { updated_at: _updated, ...version } = toAssistant({ ...r, updated_at: r.created_at });
    return version;
  };

  const insertAssistant = `INSERT INTO ${s}.assistants (assistant_id, graph_id, config, context, metadata, name,
    description, version) VALUES ($1, $2, $3, $4, $5, $6, $7, 1)`;
  const assistantParams = (a: NewAssistant) => [
    a.assistant_id,
    a.graph_id,
    JSON.stringify(a.config),
    JSON.stringify(a.context),
    JSON.stringify(a.metadata),
    a.name,
    a.description,
  ];

  return {
    async create(a: NewAssistant, ifExists: IfExists) {
      const { rows } = await pool.query(
        `WITH a AS (${insertAssistant} ON CONFLICT (assistant_id) DO NOTHING RETURNING *),
        v AS (${snapshot('a')}) SELECT * FROM a`,
        assistantParams(a),
      );
      if (rows[0]) return toAssistant(rows[0]);
      if (ifExists === 'raise') throw new ConflictError(`Assistant ${a.assistant_id} already exists`);
      const existing = await this.get(a.assistant_id);
      if (!existing) throw new ConflictError(`Assistant ${a.assistant_id} was deleted concurrently`);
      return existing;
    },
    async upsertSystem(a: NewAssistant) {
      const { rows } = await pool.query(
        `WITH a AS (${insertAssistant} ON CONFLICT (assistant_id) DO UPDATE SET
        graph_id = excluded.graph_id, metadata = excluded.metadata RETURNING *),
        v AS (${snapshot('a', 'DO UPDATE SET graph_id = excluded.graph_id, metadata = excluded.metadata')})
        SELECT * FROM a`,
        assistantParams(a),
      );
      return toAssistant(rows[0]);
    },
    async get(id: string) {
      const { rows } = await pool.query(
        named('assistant_get', `SELECT ${ASSISTANT_COLS} FROM ${s}.assistants WHERE assistant_id = $1`, [id]),
      );
      return rows[0] ? toAssistant(rows[0]) : null;
    },
    // The token is the row's xmin: every UPDATE (patch, setLatest, a system assistant's upsert) and a delete and
    // re-create make a new row version with another one.
    async getVersioned(id: string) {
      const { rows } = await pool.query(
        named(
          'assistant_get_versioned',
          `SELECT ${ASSISTANT_COLS}, xmin::text AS _token FROM ${s}.assistants WHERE assistant_id = $1`,
          [id],
        ),
      );
      return rows[0] ? { assistant: toAssistant(rows[0]), token: String(rows[0]._token) } : null;
    },
    async patch(id: string, p: AssistantPatch) {
      return tx(async (c) => {
        // Locked first, so the next statement's snapshot sees every version a concurrent patch made.
        const { rows: found } = await c.query(`SELECT 1 FROM ${s}.assistants WHERE assistant_id = $1 FOR UPDATE`, [id]);
        if (!found[0]) throw new NotFoundError(`Assistant ${id} not found`);
        // A new version after the newest one (the current may be an earlier one, see setLatest).
        const { rows } = await c.query(
          `WITH a AS (UPDATE ${s}.assistants SET graph_id = coalesce($2, graph_id),
          config = coalesce($3::jsonb, config), context = coalesce($4::jsonb, context),
          metadata = metadata || coalesce($5::jsonb, '{}'), name = coalesce($6, name),
          description = CASE WHEN $7::boolean THEN $8 ELSE description END,
          version = (SELECT coalesce(max(version), 0) + 1 FROM ${s}.assistant_versions WHERE assistant_id = $1),
          updated_at = now() WHERE assistant_id = $1 RETURNING *), v AS (${snapshot('a')}) SELECT * FROM a`,
          [
            id,
            p.graph_id ?? null,
            p.config ? JSON.stringify(p.config) : null,
            p.context ? JSON.stringify(p.context) : null,
            p.metadata ? JSON.stringify(p.metadata) : null,
            p.name ?? null,
            p.description !== undefined,
            p.description ?? null,
          ],
        );
        return toAssistant(rows[0]);
      });
    },
    async delete(id: string) {
      const { rows } = await pool.query(
        `WITH a AS (DELETE FROM ${s}.assistants WHERE assistant_id = $1 RETURNING 1),
        v AS (DELETE FROM ${s}.assistant_versions WHERE assistant_id = $1 AND EXISTS (SELECT 1 FROM a))
        SELECT count(*)::int AS n FROM a`,
        [id],
      );
      if (!rows[0]?.n) throw new NotFoundError(`Assistant ${id} not found`);
    },
    async search(q: AssistantQuery) {
      const params: unknown[] = [];
      const w = where('a', q, params);
      params.push(q.limit ?? 10, q.offset ?? 0);
      const { rows } = await pool.query(
        `SELECT * FROM ${s}.assistants ${w} ${orderBy(q, ASSISTANT_SORT)}
        LIMIT $${params.length - 1} OFFSET $${params.length}`,
        params,
      );
      return rows.map(toAssistant);
    },
    async count(q: AssistantQuery) {
      const params: unknown[] = [];
      const { rows } = await pool.query(
        `SELECT count(*)::int AS n FROM ${s}.assistants ${where('a', q, params)}`,
        params,
      );
      return rows[0].n as number;
    },
    async listVersions(id: string, q: { metadata?: Json; limit: number; offset: number }) {
      const { rows: found } = await pool.query(`SELECT 1 FROM ${s}.assistants WHERE assistant_id = $1`, [id]);
      if (!found[0]) throw new NotFoundError(`Assistant ${id} not found`);
      const { rows } = await pool.query(
        `SELECT * FROM ${s}.assistant_versions WHERE assistant_id = $1
        AND metadata @> $2::jsonb ORDER BY version DESC LIMIT $3 OFFSET $4`,
        [id, JSON.stringify(q.metadata ?? {}), q.limit, q.offset],
      );
      return rows.map(toVersion);
    },
    async setLatest(id: string, version: number) {
      const { rows } = await pool.query(
        `WITH v AS (SELECT * FROM ${s}.assistant_versions WHERE assistant_id = $1
          AND version = $2)
        UPDATE ${s}.assistants a SET graph_id = v.graph_id, config = v.config, context = v.context,
          metadata = v.metadata, name = v.name, description = v.description, version = v.version, updated_at = now()
        FROM v WHERE a.assistant_id = $1 RETURNING a.*`,
        [id, version],
      );
      if (rows[0]) return toAssistant(rows[0]);
      if (!(await this.get(id))) throw new NotFoundError(`Assistant ${id} not found`);
      throw new NotFoundError(`Assistant ${id} has no version ${version}`);
    },
  };
}
