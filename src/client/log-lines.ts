// Agent servers log pino JSON lines; a deploy log read in a terminal shows them as people read logs:
//   12:01:02 INFO  agent server listening port=8123 graphs=agent
// time (UTC), level, message, then the other fields, each value cut short. Lines that are not pino JSON pass as
// they are; `--json` and `--raw` keep every character, and no form prints one a terminal would act on (printable()).
import { printable } from './output.ts';

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
/** Fields every line has (or that say nothing to a reader of one deployment's log). */
const OMITTED = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'name', 'v']);
const MAX_VALUE = 80;

function short(value: unknown): string {
  let text: string;
  if (typeof value === 'string') text = /[\s"=]/.test(value) ? JSON.stringify(value) : value;
  else if (value && typeof value === 'object' && typeof (value as { message?: unknown }).message === 'string') {
    // An error: its message, not its stack.
    text = JSON.stringify(((value as { message: string }).message.split('\n')[0] ?? '').trim());
  } else text = JSON.stringify(value) ?? String(value);
  return text.length > MAX_VALUE ? `${text.slice(0, MAX_VALUE - 1)}…` : text;
}

function clock(time: unknown): string {
  const d = typeof time === 'number' || typeof time === 'string' ? new Date(time) : undefined;
  return d && !Number.isNaN(d.getTime()) ? d.toISOString().slice(11, 19) : '';
}

/**
 * One log message for a terminal: a pino JSON line made readable, anything else as it is; either way with the
 * characters a terminal would act on shown as escapes (a log line is the workspace's text).
 */
export function formatLogLine(message: string): string {
  return printable(readable(message));
}

function readable(message: string): string {
  const text = message.trim();
  if (!text.startsWith('{') || !text.endsWith('}')) return message;
  let line: Record<string, unknown>;
  try {
    line = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return message;
  }
  if (!line || typeof line !== 'object' || Array.isArray(line)) return message;
  // pino writes a number, or the label when a formatter says so (the agent server does).
  const level =
    typeof line.level === 'number'
      ? (LEVELS[line.level] ?? String(line.level))
      : typeof line.level === 'string'
        ? line.level.toUpperCase()
        : undefined;
  if (!level || !('msg' in line || 'time' in line)) return message;
  const extras = Object.entries(line)
    .filter(([k, v]) => !OMITTED.has(k) && v !== undefined)
    .map(([k, v]) => `${k}=${short(v)}`);
  const msg = typeof line.msg === 'string' ? line.msg : '';
  return [clock(line.time), level.padEnd(5), msg, ...extras].filter(Boolean).join(' ');
}
