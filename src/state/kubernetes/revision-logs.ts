// Revision logs in the cluster: a ConfigMap per revision and type, owned by the revision, newest MAX_LOG_LINES kept.
import type { V1ConfigMap } from '@kubernetes/client-node';
import { NotFoundError } from '../../lib/errors.ts';
import { API_VERSION } from '../../resources/index.ts';
import { AlreadyExistsError, StaleResourceVersionError } from '../errors.ts';
import type { ResourceStore } from '../resources.ts';
import { logAppendSignal, type LogPage, type LogType, type RevisionLogStore } from '../revision-logs.ts';
import { call, type KubeContext } from './client.ts';

const LABEL_LOG_FOR = 'agentplane.dev/log-for';
/** Lines kept per revision and log type (a ConfigMap holds at most 1 MiB). */
const MAX_LOG_LINES = 2_000;

export function kubernetesRevisionLogs(k: KubeContext, resources: Pick<ResourceStore, 'get'>): RevisionLogStore {
  function logMapName(revision: string, type: LogType): string {
    return `${revision}-log-${type}`;
  }

  const appended = logAppendSignal();
  return {
    onLogsAppended: appended.subscribe,
    async appendLogs(namespace: string, revision: string, type: LogType, lines: string[]): Promise<void> {
      if (!lines.length) return;
      const name = logMapName(revision, type);
      for (let attempt = 0; ; attempt++) {
        let cm: V1ConfigMap | undefined;
        try {
          cm = await call(() => k.core.readNamespacedConfigMap({ namespace, name }));
        } catch (err) {
          if (!(err instanceof NotFoundError)) throw err;
        }
        const entries = parseLog(cm);
        let next = Number(cm?.data?.next ?? '1');
        const ts = new Date().toISOString();
        for (const line of lines) entries.push({ id: next++, ts, message: line });
        const kept = entries.slice(-MAX_LOG_LINES);
        const data = { next: String(next), lines: kept.map((e) => JSON.stringify(e)).join('\n') };
        try {
          if (cm) {
            await call(() => k.core.replaceNamespacedConfigMap({ namespace, name, body: { ...cm, data } }));
          } else {
            const rev = await resources.get('AgentRevision', namespace, revision);
            await call(() =>
              k.core.createNamespacedConfigMap({
                namespace,
                body: {
                  apiVersion: 'v1',
                  kind: 'ConfigMap',
                  metadata: {
                    name,
                    namespace,
                    labels: { [LABEL_LOG_FOR]: revision },
                    ownerReferences: [
                      { apiVersion: API_VERSION, kind: 'AgentRevision', name: revision, uid: rev.metadata.uid! },
                    ],
                  },
                  data,
                },
              }),
            );
          }
          appended.emit({ namespace, revision, type });
          return;
        } catch (err) {
          const retry = err instanceof StaleResourceVersionError || err instanceof AlreadyExistsError;
          if (!retry || attempt >= 5) throw err;
          k.log.debug({ revision, attempt }, 'log append raced, retrying');
        }
      }
    },

    async readLogs(
      namespace: string,
      revision: string,
      opts: { type: LogType; limit: number; offset?: string; order: 'asc' | 'desc' },
    ): Promise<LogPage> {
      let cm: V1ConfigMap | undefined;
      try {
        cm = await call(() => k.core.readNamespacedConfigMap({ namespace, name: logMapName(revision, opts.type) }));
      } catch (err) {
        if (!(err instanceof NotFoundError)) throw err;
      }
      const cursor = opts.offset ? Number(opts.offset) : undefined;
      let entries = parseLog(cm);
      if (opts.order === 'desc') entries = entries.reverse();
      if (cursor !== undefined) entries = entries.filter((e) => (opts.order === 'asc' ? e.id > cursor : e.id < cursor));
      const page = entries.slice(0, opts.limit);
      return {
        logs: page.map((e) => ({ id: String(e.id), timestamp: e.ts, type: opts.type, message: e.message })),
        next_offset: entries.length > opts.limit ? String(page[page.length - 1]!.id) : null,
      };
    },
  };
}

function parseLog(cm: V1ConfigMap | undefined): { id: number; ts: string; message: string }[] {
  const text = cm?.data?.lines;
  if (!text) return [];
  return text.split('\n').map((l) => JSON.parse(l) as { id: number; ts: string; message: string });
}
