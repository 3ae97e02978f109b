import { createRequire } from 'node:module';
import { isMainThread } from 'node:worker_threads';
import { destination as pinoDestination, pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import type PinoPretty from 'pino-pretty';

// pino-pretty (and what it loads) only when lines are meant for a person: servers and their executor threads log JSON.
const require = createRequire(import.meta.url);

export type { Logger };

const LEVELS = new Set(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

/** One root logger per process; modules take children carrying their context. */
export function createLogger(opts: { level?: string; name?: string } = {}): Logger {
  const level = (opts.level ?? 'info').toLowerCase();
  const options: LoggerOptions = {
    level: LEVELS.has(level) ? level : 'info',
    base: { pid: process.pid, ...(opts.name ? { name: opts.name } : {}) },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  };
  return pino(options, destination() ?? jsonLines());
}

/**
 * Where lines go: JSON (one object a line, for collectors and pipes), or readable lines on a terminal, as pino's own
 * tooling does. AGENTPLANE_LOG_FORMAT=json|pretty overrides the choice made from whether stdout is a terminal.
 */
function destination(): DestinationStream | undefined {
  const format = (process.env.AGENTPLANE_LOG_FORMAT ?? 'auto').toLowerCase();
  const readable = format === 'pretty' || (format !== 'json' && process.stdout.isTTY === true);
  if (!readable) return undefined;
  const pretty = require('pino-pretty') as typeof PinoPretty;
  return pretty({
    sync: true,
    colorize: process.stdout.isTTY === true,
    translateTime: 'SYS:HH:MM:ss',
    ignore: 'pid,hostname',
    singleLine: true,
  });
}

/** A logger that drops everything, for tests and library use. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

/**
 * JSON lines go out as they are logged, on the thread that logs them. pino's default destination hands each line to
 * libuv's thread pool instead: a wake-up of another thread and one back per line (twice per run at the default
 * level; bench/results/issue-30.md, fourteenth session), and a line still queued there is lost when the process is
 * killed. On the main thread process.stdout writes at once as Node's console does, and keeps what a full pipe
 * cannot take yet in memory rather than stopping the process. A worker thread's process.stdout goes through the
 * main thread, so there the line is written to the descriptor directly (those threads log little).
 */
function jsonLines(): DestinationStream {
  return isMainThread ? process.stdout : pinoDestination({ dest: 1, sync: true });
}
