// The work an agent server's store holds for later, read from outside the server: runs queued or executing, the
// first run waiting for its after_seconds, the next cron tick. A platform that stops an idle server reads it to know
// whether the server is idle, and (once the server has stopped, so nothing changes it any more) when it must be
// started again. Read-only, through connections of its own: the owning server may be running meanwhile.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { newPgClient } from '../../lib/connections.ts';

export type PendingWork = {
  /** Runs executing, or queued and free to start now. */
  activeRuns: number;
  /** When the first run waiting for its start time (after_seconds), or the next cron tick, is due (ms); none: null. */
  nextDueMs: number | null;
};

const earliest = (...ms: (number | null | undefined)[]): number | null => {
  const known = ms.filter((m): m is number => typeof m === 'number' && Number.isFinite(m));
  return known.length ? Math.min(...known) : null;
};

/** The embedded store in `dataDir` (the server's --data-dir); a folder without a store holds no work. */
export function embeddedPendingWork(dataDir: string, now = Date.now()): PendingWork {
  const file = join(dataDir, 'agentplane.sqlite');
  if (!existsSync(file)) return { activeRuns: 0, nextDueMs: null };
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    const tables = new Set(
      (db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table'`).all() as { name: string }[]).map(
        (t) => t.name,
      ),
    );
    if (!tables.has('ap_runs')) return { activeRuns: 0, nextDueMs: null };
    const runs = db
      .prepare(
        `SELECT
           sum(CASE WHEN status = 'running' OR (status = 'pending' AND (not_before IS NULL OR not_before <= ?))
               THEN 1 ELSE 0 END) AS active,
           min(CASE WHEN status = 'pending' AND not_before > ? THEN not_before END) AS scheduled
         FROM ap_runs WHERE status IN ('pending', 'running')`,
      )
      .get(now, now) as { active: number | null; scheduled: number | null };
    const cron = tables.has('ap_crons')
      ? (db.prepare('SELECT min(next_ms) AS next FROM ap_crons WHERE enabled = 1').get() as { next: number | null })
      : { next: null };
    return { activeRuns: runs.active ?? 0, nextDueMs: earliest(runs.scheduled, cron.next) };
  } finally {
    db.close();
  }
}

/** The Postgres store at `databaseUrl` (schema `agentplane`, the server's default); a fresh database holds no work. */
export async function postgresPendingWork(databaseUrl: string, schema = 'agentplane'): Promise<PendingWork> {
  const client = newPgClient({ connectionString: databaseUrl, connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    const s = `"${schema.replace(/"/g, '""')}"`;
    const present = await client.query<{ runs: string | null; crons: string | null }>(
      `SELECT to_regclass($1) AS runs, to_regclass($2) AS crons`,
      [`${s}.runs`, `${s}.crons`],
    );
    if (!present.rows[0]?.runs) return { activeRuns: 0, nextDueMs: null };
    const runs = await client.query<{ active: string; scheduled: Date | null }>(
      `SELECT
         count(*) FILTER (WHERE status = 'running' OR (status = 'pending' AND (not_before IS NULL OR not_before <= now())))
           AS active,
         min(not_before) FILTER (WHERE status = 'pending' AND not_before > now()) AS scheduled
       FROM ${s}.runs WHERE status IN ('pending', 'running')`,
    );
    const cron = present.rows[0].crons
      ? await client.query<{ next: Date | null }>(`SELECT min(next_run_date) AS next FROM ${s}.crons WHERE enabled`)
      : { rows: [{ next: null }] };
    return {
      activeRuns: Number(runs.rows[0]?.active ?? 0),
      nextDueMs: earliest(runs.rows[0]?.scheduled?.getTime(), cron.rows[0]?.next?.getTime()),
    };
  } finally {
    await client.end();
  }
}
