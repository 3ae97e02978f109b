// The one client of the control plane's REST API: the deploy CLI (deploy, deployments, revisions, logs) calls the
// Deployments v2 API with a workspace key, and a data plane (`agentplane listener`, a data-plane-only operator's clone
// credentials) calls the Listeners v2 API with its listener key. Thin on purpose: one method per route, typed by the
// API's own schemas (src/api/schemas); the transport (transport.ts) holds the headers, deadlines and error mapping.
import type { z } from 'zod';
import type { DeploymentCreate, DeploymentPatch } from './schemas/deployments.ts';
import type { Deployment, LogPage, Revision } from './schemas/deployment-views.ts';
import type {
  ListenerGitCredential,
  ListenerGitCredentialRequest,
  ListenerReport,
  ListenerReportResult,
  ListenerSnapshot,
} from './schemas/listeners.ts';
import { liveLogs, type LiveLogQuery } from './live-logs.ts';
import { createTransport, type ClientOptions } from './transport.ts';

export { ApiError, ConnectionError, type ClientOptions } from './transport.ts';
export type { LiveLogLine, LiveLogQuery } from './live-logs.ts';
export type { Deployment, Revision };
export type { LogEntry } from './schemas/deployment-views.ts';
export type LogType = 'build' | 'deploy';
export type Page<T> = { resources: T[]; offset: number };
/** A create or patch body as a client writes it (the defaults the control plane fills in may be left out). */
export type DeploymentInput = Partial<z.input<typeof DeploymentCreate>> & z.input<typeof DeploymentPatch>;

/** What a long poll of /watch answers when nothing changed since `since`. */
export type ListenerUnchanged = { cursor: string; unchanged: true };

export function createClient(opts: ClientOptions) {
  const http = createTransport(opts);
  const { call } = http;
  const dep = (id: string) => `/deployments/${encodeURIComponent(id)}`;
  const rev = (id: string, rid: string) => `${dep(id)}/revisions/${encodeURIComponent(rid)}`;

  return {
    url: http.url,
    listDeployments: (query: { limit?: number; offset?: number; name_contains?: string } = {}) =>
      call<Page<Deployment>>('GET', '/deployments', { query }),
    getDeployment: (id: string) => call<Deployment>('GET', dep(id)),
    createDeployment: (body: DeploymentInput) => call<Deployment>('POST', '/deployments', { body }),
    patchDeployment: (id: string, body: DeploymentInput) => call<Deployment>('PATCH', dep(id), { body }),
    deleteDeployment: (id: string) => call<void>('DELETE', dep(id)),
    listRevisions: (id: string, query: { limit?: number; offset?: number } = {}) =>
      call<Page<Revision>>('GET', `${dep(id)}/revisions`, { query }),
    createRevision: (id: string) => call<Revision>('POST', `${dep(id)}/revisions`),
    getRevision: (id: string, rid: string) => call<Revision>('GET', rev(id, rid)),
    redeploy: (id: string, rid: string) => call<Deployment>('POST', `${rev(id, rid)}/redeploy`),
    logs: (
      id: string,
      rid: string,
      query: { type: LogType; limit?: number; offset?: string; order?: 'asc' | 'desc' },
    ) => call<LogPage>('GET', `${rev(id, rid)}/logs`, { query }),
    /** The serving agent's log lines as the control plane streams them (SSE), until `signal` aborts or it ends. */
    liveLogs: (id: string, q: LiveLogQuery) => liveLogs(http, `${dep(id)}/logs/stream`, q),

    /** The Listeners v2 API as the listener `listenerId` calls it (with its listener key). */
    listener(listenerId: string) {
      const at = `/listeners/${encodeURIComponent(listenerId)}`;
      return {
        /**
         * The deployments assigned to this listener, once they differ from the snapshot `since` names or after
         * `timeout` seconds (then `unchanged`). The call's deadline leaves the long poll its time.
         */
        watch: (q: { since?: string; timeout: number }, signal?: AbortSignal) =>
          call<ListenerSnapshot | ListenerUnchanged>('GET', `${at}/watch`, {
            query: q,
            timeoutMs: (q.timeout + 15) * 1000,
            signal,
          }),
        /** What the data plane made of its deployments: statuses, URLs, new log lines. */
        report: (body: ListenerReport, signal?: AbortSignal) =>
          call<ListenerReportResult>('POST', `${at}/report`, { body, signal }),
        /** A fresh clone token for a repository one of this listener's deployments uses. */
        gitCredential: (body: ListenerGitCredentialRequest) =>
          call<Partial<ListenerGitCredential> | undefined>('POST', `${at}/git-credential`, { body }),
      };
    },
  };
}

export type ControlPlaneClient = ReturnType<typeof createClient>;
export type ListenerClient = ReturnType<ControlPlaneClient['listener']>;
