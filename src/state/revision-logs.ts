import { EventEmitter } from 'node:events';

export type LogType = 'build' | 'deploy';
export type LogEntry = { id: string; timestamp: string; type: LogType; message: string };

export type LogPage = {
  logs: LogEntry[];
  /** Cursor for the next page; null when there is nothing more (for now). */
  next_offset: string | null;
};

/** Which log got lines: said to the followers of this store object once the lines are stored. */
export type LogsAppended = { namespace: string; revision: string; type: LogType };

/** Build and deploy output of revisions, written by runtimes, read by the API. */
export interface RevisionLogStore {
  appendLogs(namespace: string, revision: string, type: LogType, lines: string[]): Promise<void>;
  /**
   * Calls `listener` after each append through this object, so a live tail reads at once instead of polling; returns
   * the unsubscribe. Lines another process appends (an operator beside this control plane) are not seen here.
   */
  onLogsAppended(listener: (e: LogsAppended) => void): () => void;
  readLogs(
    namespace: string,
    revision: string,
    opts: { type: LogType; limit: number; offset?: string; order: 'asc' | 'desc' },
  ): Promise<LogPage>;
}

/** The in-process signal both adapters share: an EventEmitter whose listener count has no limit (one per tail). */
export function logAppendSignal(): {
  emit: (e: LogsAppended) => void;
  subscribe: RevisionLogStore['onLogsAppended'];
} {
  const events = new EventEmitter().setMaxListeners(0);
  return {
    emit: (e) => void events.emit('appended', e),
    subscribe(listener) {
      events.on('appended', listener);
      return () => void events.off('appended', listener);
    },
  };
}
