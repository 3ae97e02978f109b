// Streams a child's output into the revision log: line-split, redacted, capped, batched, written in order.
import type { Readable } from 'node:stream';
import type { LogType, RevisionLogSink, RevisionRef } from '../types.ts';
import {
  cutLogLine,
  DEFAULT_LOG_LIMITS,
  MAX_LOG_LINE as MAX_LINE,
  truncationNotice,
  type LogLimits,
} from '../../../lib/log-limits.ts';
import { redactText } from '../../../git/redact.ts';

export { DEFAULT_LOG_LIMITS, type LogLimits };
/** Lines kept in memory after the cap, so a failing step can still be explained. */
const TAIL = 40;

/** What one revision's log of one type has used so far; shared by every writer of that log. */
export class LogBudget {
  lines = 0;
  bytes = 0;
  truncated = false;
  constructor(readonly limits: LogLimits = DEFAULT_LOG_LIMITS) {}
}

export class LogWriter {
  private pending: string[] = [];
  private chain: Promise<void> = Promise.resolve();
  private scheduled = false;
  /** The last lines written (stored or not), newest last. */
  readonly tail: string[] = [];

  constructor(
    private readonly sink: RevisionLogSink,
    private readonly ref: RevisionRef,
    private readonly type: LogType,
    private readonly budget = new LogBudget(),
  ) {}

  line(raw: string): void {
    const text = redactText(cutLogLine(raw));
    this.tail.push(text);
    if (this.tail.length > TAIL) this.tail.shift();
    const b = this.budget;
    if (b.truncated) return;
    const bytes = Buffer.byteLength(text) + 1;
    if (b.lines + 1 > b.limits.maxLines || b.bytes + bytes > b.limits.maxBytes) {
      b.truncated = true;
      this.pending.push(truncationNotice(b.limits));
      this.flushSoon(0);
      return;
    }
    b.lines++;
    b.bytes += bytes;
    this.pending.push(text);
    this.flushSoon(this.pending.length >= 200 ? 0 : 100);
  }

  /** Follows a stream until it ends, splitting lines itself so that a line without end stays bounded. */
  follow(stream: Readable | null, onBytes?: (n: number) => void): Promise<void> {
    if (!stream) return Promise.resolve();
    let partial = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      onBytes?.(Buffer.byteLength(chunk));
      let parts = (partial + chunk).split('\n');
      partial = parts.pop()!;
      // Past the cap only the tail matters: skip the work for lines that would be dropped anyway.
      if (this.budget.truncated && parts.length > TAIL) parts = parts.slice(-TAIL);
      for (const p of parts) this.line(p.endsWith('\r') ? p.slice(0, -1) : p);
      if (partial.length > MAX_LINE) {
        this.line(partial);
        partial = '';
      }
    });
    return new Promise((resolve) => {
      const end = () => {
        if (partial) this.line(partial);
        partial = '';
        resolve();
      };
      stream.once('end', end);
      stream.once('close', end);
      stream.once('error', end);
    });
  }

  /** Writes everything buffered so far; resolves when it is stored. */
  flush(): Promise<void> {
    const lines = this.pending.splice(0);
    if (lines.length) {
      this.chain = this.chain.then(() => this.sink.append(this.ref, this.type, lines)).catch(() => undefined);
    }
    return this.chain;
  }

  private flushSoon(ms: number): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setTimeout(() => {
      this.scheduled = false;
      void this.flush();
    }, ms).unref();
  }
}
