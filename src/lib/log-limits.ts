// How much build and deploy output one revision may store, whoever writes it: the local runtime's builds
// (operator/runtimes/local/logs.ts) and the lines a listener pushes for its data plane (control-plane listeners).

/** How much of one revision's log of one type is stored; the rest is dropped after one line saying so. */
export type LogLimits = { maxLines: number; maxBytes: number };

export const DEFAULT_LOG_LIMITS: LogLimits = { maxLines: 20_000, maxBytes: 5 * 1024 * 1024 };

/** A single output line longer than this (in characters) is cut. */
export const MAX_LOG_LINE = 8 * 1024;

/** The line as stored: cut after MAX_LOG_LINE characters, saying so. */
export function cutLogLine(raw: string): string {
  return raw.length > MAX_LOG_LINE ? `${raw.slice(0, MAX_LOG_LINE)} [line cut]` : raw;
}

export function truncationNotice(limits: LogLimits): string {
  return `[log truncated: more than ${limits.maxLines} lines or ${Math.round(limits.maxBytes / 1024)} KiB; the rest is not stored]`;
}

/** What one revision's log of one type has used so far. */
export type LogUsage = { lines: number; bytes: number; truncated: boolean };

/**
 * The lines of a batch that fit what is left of the budget (each cut to MAX_LOG_LINE), plus the truncation notice
 * when the batch reaches the cap; `usage` is updated in place. Past the cap nothing more is taken.
 */
export function admitLogLines(raw: string[], usage: LogUsage, limits: LogLimits = DEFAULT_LOG_LIMITS): string[] {
  const out: string[] = [];
  for (const r of raw) {
    if (usage.truncated) break;
    const text = cutLogLine(r);
    const bytes = Buffer.byteLength(text) + 1;
    if (usage.lines + 1 > limits.maxLines || usage.bytes + bytes > limits.maxBytes) {
      usage.truncated = true;
      out.push(truncationNotice(limits));
      break;
    }
    usage.lines++;
    usage.bytes += bytes;
    out.push(text);
  }
  return out;
}
