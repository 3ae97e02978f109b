export type LogType = 'build' | 'deploy';
export type LogEntry = { id: string; timestamp: string; type: LogType; message: string };

export type LogPage = {
  logs: LogEntry[];
  /** Cursor for the next page; null when there is nothing more (for now). */
  next_offset: string | null;
};

/** Build and deploy output of revisions, written by runtimes, read by the API. */
export interface RevisionLogStore {
  appendLogs(namespace: string, revision: string, type: LogType, lines: string[]): Promise<void>;
  readLogs(
    namespace: string,
    revision: string,
    opts: { type: LogType; limit: number; offset?: string; order: 'asc' | 'desc' },
  ): Promise<LogPage>;
}
