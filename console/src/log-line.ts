// A log line as a person reads it. Agent servers and our own processes write JSON lines (pino: level as a number,
// time in epoch ms, msg; others: level/severity as a word, timestamp, message); those show as level, time and
// message plus the remaining fields. Anything else is shown as it came.

export type ParsedLine = {
  level: string | null;
  time: string | null;
  message: string;
  /** Fields besides level, time and message, as `key=value`. */
  extra: string;
  /** A logged error as a person reads it: `Type: message` and its stack, line breaks kept (never its JSON). */
  error: string | null;
};

const PINO_LEVELS: Record<number, string> = {
  10: 'trace',
  20: 'debug',
  30: 'info',
  40: 'warn',
  50: 'error',
  60: 'fatal',
};
const LEVEL_KEYS = ['level', 'severity', 'lvl'];
const TIME_KEYS = ['time', 'timestamp', 'ts', '@timestamp'];
const MESSAGE_KEYS = ['msg', 'message', 'event'];
/** Fields every pino line carries that say nothing about the event. */
const NOISE = new Set(['pid', 'hostname', 'v']);

function levelOf(v: unknown): string | null {
  if (typeof v === 'number') return PINO_LEVELS[v] ?? String(v);
  if (typeof v === 'string' && v) return v.toLowerCase();
  return null;
}

function timeOf(v: unknown): string | null {
  const d = typeof v === 'number' ? new Date(v) : typeof v === 'string' ? new Date(v) : null;
  if (!d || Number.isNaN(d.getTime())) return typeof v === 'string' ? v : null;
  return d.toISOString().slice(11, 23);
}

const show = (v: unknown) => (typeof v === 'string' ? (/\s/.test(v) ? JSON.stringify(v) : v) : JSON.stringify(v));

/** The readable form of a JSON log line, or null when the line is not a JSON object. */
export function parseLogLine(raw: string): ParsedLine | null {
  const text = raw.trim();
  if (!text.startsWith('{') || !text.endsWith('}')) return null;
  let o: unknown;
  try {
    o = JSON.parse(text);
  } catch {
    return null;
  }
  if (!o || typeof o !== 'object' || Array.isArray(o)) return null;
  const rec = o as Record<string, unknown>;
  const pick = (keys: string[]) => keys.find((k) => k in rec);
  const lk = pick(LEVEL_KEYS);
  const tk = pick(TIME_KEYS);
  const mk = pick(MESSAGE_KEYS);
  if (!lk && !mk) return null;
  const err = errorOf(rec.err ?? rec.error);
  const used = new Set([lk, tk, mk, ...(err ? ['err', 'error'] : [])]);
  const rest = Object.entries(rec).filter(([k]) => !used.has(k) && !NOISE.has(k));
  const message = mk && rec[mk] !== undefined ? String(rec[mk]) : (err?.message ?? '');
  return {
    level: lk ? levelOf(rec[lk]) : null,
    time: tk ? timeOf(rec[tk]) : null,
    message,
    extra: rest.map(([k, v]) => `${k}=${show(v)}`).join(' '),
    error: err ? err.text : null,
  };
}

/**
 * pino's serialized error ({type, message, stack}) as text. The stack already starts with `Type: message`; what
 * follows it (the frames, the user's file:line:column among them) stays on lines of its own.
 */
function errorOf(v: unknown): { message: string; text: string } | null {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return null;
  const e = v as { type?: unknown; message?: unknown; stack?: unknown };
  if (typeof e.message !== 'string') return null;
  const head = typeof e.type === 'string' && e.type ? `${e.type}: ${e.message}` : e.message;
  const text = typeof e.stack === 'string' && e.stack.includes(e.message) ? e.stack : head;
  return { message: e.message, text };
}
