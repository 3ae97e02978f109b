// Integrations of the embedded state: a row each, the token sealed with the store's key, its id and tenant as
// additional data.
import { AlreadyExistsError } from '../errors.ts';
import { integrationDetails, type IntegrationRecord, type IntegrationStore } from '../integrations.ts';
import type { EmbeddedContext } from './context.ts';
import { open as openSealed, seal } from './secret-box.ts';

export const integrationAad = (tenant: string, id: string) => `integration/${tenant}/${id}`;

type IntegrationRow = {
  id: string;
  tenant: string;
  name: string;
  host: string;
  username: string | null;
  created_at: string;
  details: string | null;
};

function integrationOf(r: IntegrationRow): IntegrationRecord {
  const details = r.details ? (JSON.parse(r.details) as Partial<IntegrationRecord>) : {};
  return {
    id: r.id,
    tenant: r.tenant,
    name: r.name,
    host: r.host,
    ...(r.username === null ? {} : { username: r.username }),
    createdAt: r.created_at,
    ...integrationDetails(details as IntegrationRecord),
  };
}

export function embeddedIntegrations(ctx: EmbeddedContext): IntegrationStore {
  const { db } = ctx;
  return {
    async putIntegration(r: IntegrationRecord, token: string): Promise<void> {
      const sealed = seal(ctx.secretKey(), token, integrationAad(r.tenant, r.id));
      try {
        db.prepare(
          'INSERT INTO integrations (id, tenant, name, host, username, created_at, token, details, installation_id) ' +
            'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
        ).run(
          r.id,
          r.tenant,
          r.name,
          r.host,
          r.username ?? null,
          r.createdAt,
          sealed,
          JSON.stringify(integrationDetails(r)),
          r.installationId ?? null,
        );
      } catch (err) {
        if ((err as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE')
          throw new AlreadyExistsError(`GitHub installation ${r.installationId} is already an integration`);
        throw err;
      }
    },

    async findIntegrations(where: { id?: string; installationId?: number }): Promise<IntegrationRecord[]> {
      const rows =
        where.id !== undefined
          ? db.prepare('SELECT * FROM integrations WHERE id = ?').all(where.id)
          : where.installationId !== undefined
            ? db.prepare('SELECT * FROM integrations WHERE installation_id = ?').all(where.installationId)
            : [];
      return (rows as IntegrationRow[]).map(integrationOf);
    },

    async listIntegrations(tenant: string): Promise<IntegrationRecord[]> {
      const rows = db
        .prepare('SELECT * FROM integrations WHERE tenant = ? ORDER BY created_at, id')
        .all(tenant) as IntegrationRow[];
      return rows.map(integrationOf);
    },

    async getIntegration(tenant: string, id: string): Promise<IntegrationRecord | undefined> {
      const row = db.prepare('SELECT * FROM integrations WHERE tenant = ? AND id = ?').get(tenant, id) as
        IntegrationRow | undefined;
      return row && integrationOf(row);
    },

    async integrationToken(tenant: string, id: string): Promise<string | undefined> {
      const row = db.prepare('SELECT token FROM integrations WHERE tenant = ? AND id = ?').get(tenant, id) as
        { token: string } | undefined;
      return row && openSealed(ctx.secretKey(), row.token, integrationAad(tenant, id));
    },

    async deleteIntegration(tenant: string, id: string): Promise<boolean> {
      return db.prepare('DELETE FROM integrations WHERE tenant = ? AND id = ?').run(tenant, id).changes > 0;
    },
  };
}
