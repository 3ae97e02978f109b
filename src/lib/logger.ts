import { destination as pinoDestination, pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import pretty from 'pino-pretty';

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
  return pino(options, destination() ?? pinoDestination({ dest: 1, sync: true }));
}

/**
 * Where lines go: JSON (one object a line, for collectors and pipes), or readable lines on a terminal, as pino's own
 * tooling does. AGENTPLANE_LOG_FORMAT=json|pretty overrides the choice made from whether stdout is a terminal.
 * JSON lines are written to stdout as they are logged (sync), as Node's own console writes to files and pipes on
 * Linux. pino's default destination writes each line through libuv's thread pool instead: a hand-off to another
 * thread and a wake-up back on this one per line, twice per run at the default level (bench/results/issue-30.md,
 * fourteenth session), and lines still buffered are lost when the process is killed.
 */
function destination(): DestinationStream | undefined {
  const format = (process.env.AGENTPLANE_LOG_FORMAT ?? 'auto').toLowerCase();
  const readable = format === 'pretty' || (format !== 'json' && process.stdout.isTTY === true);
  if (!readable) return undefined;
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
