import { pino, type Logger, type LoggerOptions } from 'pino';

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
  return pino(options);
}

/** A logger that drops everything, for tests and library use. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
