// The logger that `getLogger()` of @langchain/langgraph-sdk/logging returns inside graph code. The SDK types it
// after winston (info(message, ...meta), info(object), levels error..silly); here every call becomes one pino line
// of the server's log carrying the graph id and, inside a run, run_id, thread_id and the node's name.
import type { Logger } from '../../lib/logger.ts';
import { currentGraphContext } from './context.ts';

type PinoLevel = 'error' | 'warn' | 'info' | 'debug' | 'trace';

/** winston's level names (npm and cli sets, as the SDK's Logger type lists them) -> pino's. */
const LEVELS: Record<string, PinoLevel> = {
  error: 'error',
  warn: 'warn',
  info: 'info',
  help: 'info',
  data: 'info',
  prompt: 'info',
  input: 'info',
  http: 'debug',
  verbose: 'debug',
  debug: 'debug',
  silly: 'trace',
};

export type SdkLogger = Record<keyof typeof LEVELS, (...args: unknown[]) => SdkLogger>;

/** One log call's arguments -> pino's (fields, message). */
export function toPinoArgs(args: unknown[]): [Record<string, unknown>, string | undefined] {
  const [first, ...rest] = args;
  const fields: Record<string, unknown> = {};
  const extra: unknown[] = [];
  const absorb = (v: unknown) => {
    if (v instanceof Error) fields.err = v;
    else if (v !== null && typeof v === 'object' && !Array.isArray(v)) Object.assign(fields, v);
    else if (v !== undefined) extra.push(v);
  };
  let msg: string | undefined;
  if (typeof first === 'string') msg = first;
  else if (first instanceof Error) {
    fields.err = first;
    msg = first.message;
  } else if (first !== null && typeof first === 'object' && !Array.isArray(first)) {
    const { message, ...others } = first as Record<string, unknown>;
    Object.assign(fields, others);
    if (message !== undefined) msg = typeof message === 'string' ? message : JSON.stringify(message);
  } else if (first !== undefined) msg = typeof first === 'string' ? first : JSON.stringify(first);
  for (const v of rest) absorb(v);
  if (extra.length) fields.args = extra;
  return [fields, msg];
}

export function createSdkLogger(base: Logger): SdkLogger {
  const graphLog = base.child({ component: 'graph' });
  const logger = {} as SdkLogger;
  for (const [name, level] of Object.entries(LEVELS)) {
    logger[name] = (...args: unknown[]) => {
      if (graphLog.isLevelEnabled(level)) {
        const [fields, msg] = toPinoArgs(args);
        graphLog[level]({ ...currentGraphContext(), ...fields }, msg);
      }
      return logger;
    };
  }
  return logger;
}
