// The LangGraph platform environment that graph code relies on, installed as the globals the reference server
// sets and @langchain/langgraph-sdk reads: the logger of `getLogger()`, and the fetch and base URL that
// `new Client()` without arguments uses to call this very server. Installed on the main thread and in every
// executor thread before any graph module is imported.
import type { FastifyInstance } from 'fastify';
import type { Logger } from '../../lib/logger.ts';
import { createPlatformFetch } from './fetch.ts';
import { adoptInternalCallToken, internalCallToken } from './internal-call.ts';
import { createSdkLogger } from './sdk-logger.ts';

export { INTERNAL_CALL_HEADER, internalCallToken, isInternalCall } from './internal-call.ts';
export type { GraphContext } from './context.ts';

const SDK_LOGGER = Symbol.for('langgraph.api.sdk-logger');
const API_FETCH = Symbol.for('langgraph_api:fetch');
const API_URL = Symbol.for('langgraph_api:url');

/** What an executor thread needs to set up the same environment (plain data, sent as workerData). */
export interface PlatformWorkerEnv {
  /** The listening URL over loopback; null while the server does not listen yet. */
  apiUrl: string | null;
  internalToken: string;
  logLevel: string;
}

function setGlobal(key: symbol, value: unknown): void {
  (globalThis as Record<symbol, unknown>)[key] = value;
}

export interface MainThreadPlatform {
  /** In-process calls dispatch into this app from now on. */
  bindApp(app: FastifyInstance): void;
  /** The server listens: clients created from now on use this URL (the earlier one keeps working). */
  setListeningUrl(url: string): void;
  workerEnv(): PlatformWorkerEnv;
}

/**
 * `plannedUrl` is what the URL will be (e.g. http://127.0.0.1:8000): clients created at module top level, before the
 * server listens, keep it, so it stays recognised as this server's.
 */
export function installMainThreadPlatform(opts: {
  logger: Logger;
  plannedUrl: string;
  logLevel: string;
}): MainThreadPlatform {
  let app: FastifyInstance | undefined;
  let url: string | null = null;
  const origins = new Set([new URL(opts.plannedUrl).origin]);
  setGlobal(SDK_LOGGER, createSdkLogger(opts.logger));
  setGlobal(API_FETCH, createPlatformFetch({ isOwn: (u) => origins.has(u.origin), app: () => app }));
  setGlobal(API_URL, opts.plannedUrl);
  return {
    bindApp(a) {
      app = a;
    },
    setListeningUrl(u) {
      url = u;
      origins.add(new URL(u).origin);
      setGlobal(API_URL, u);
    },
    workerEnv: () => ({ apiUrl: url, internalToken: internalCallToken(), logLevel: opts.logLevel }),
  };
}

export function installWorkerPlatform(env: PlatformWorkerEnv, logger: Logger): void {
  adoptInternalCallToken(env.internalToken);
  const origin = env.apiUrl ? new URL(env.apiUrl).origin : null;
  setGlobal(SDK_LOGGER, createSdkLogger(logger));
  setGlobal(API_FETCH, createPlatformFetch({ isOwn: (u) => u.origin === origin, app: () => undefined }));
  if (env.apiUrl) setGlobal(API_URL, env.apiUrl);
}

/** The loopback URL of a listening server: a wildcard address is reached through the loopback interface. */
export function loopbackUrl(address: { address: string; family: string; port: number }): string {
  const host =
    address.address === '0.0.0.0'
      ? '127.0.0.1'
      : address.address === '::'
        ? '[::1]'
        : address.family === 'IPv6' || address.address.includes(':')
          ? `[${address.address}]`
          : address.address;
  return `http://${host}:${address.port}`;
}
