// Build and deploy output of revisions in the embedded state: a row per line, paged by its row id; removed with the
// revision (resources.ts).
import { logAppendSignal, type LogPage, type LogType, type RevisionLogStore } from '../revision-logs.ts';
import type { EmbeddedContext } from './context.ts';

export function embeddedRevisionLogs({ db }: EmbeddedContext): RevisionLogStore {
  const appended = logAppendSignal();
  return {
    onLogsAppended: appended.subscribe,

    async appendLogs(namespace: string, revision: string, type: LogType, lines: string[]): Promise<void> {
      const ins = db.prepare(
        'INSERT INTO revision_logs (namespace, revision, type, ts, message) VALUES (?, ?, ?, ?, ?)',
      );
      const ts = new Date().toISOString();
      db.transaction(() => {
        for (const line of lines) ins.run(namespace, revision, type, ts, line);
      })();
      if (lines.length) appended.emit({ namespace, revision, type });
    },

    async readLogs(
      namespace: string,
      revision: string,
      opts: { type: LogType; limit: number; offset?: string; order: 'asc' | 'desc' },
    ): Promise<LogPage> {
      const cursor = opts.offset ? Number(opts.offset) : undefined;
      const asc = opts.order === 'asc';
      const where = cursor === undefined ? '' : asc ? 'AND id > ?' : 'AND id < ?';
      const params: unknown[] = [namespace, revision, opts.type];
      if (cursor !== undefined) params.push(cursor);
      const rows = db
        .prepare(
          `SELECT id, ts, type, message FROM revision_logs WHERE namespace = ? AND revision = ? AND type = ? ${where}
         ORDER BY id ${asc ? 'ASC' : 'DESC'} LIMIT ?`,
        )
        .all(...params, opts.limit + 1) as { id: number; ts: string; type: LogType; message: string }[];
      const more = rows.length > opts.limit;
      const page = rows.slice(0, opts.limit);
      return {
        logs: page.map((r) => ({ id: String(r.id), timestamp: r.ts, type: r.type, message: r.message })),
        next_offset: more ? String(page[page.length - 1]!.id) : null,
      };
    },
  };
}
