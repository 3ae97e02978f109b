// Streams a child's output into the revision log: line-split, batched, written in order.
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import type { LogType, RevisionLogSink, RevisionRef } from '../types.ts';

export class LogWriter {
  private pending: string[] = [];
  private chain: Promise<void> = Promise.resolve();
  private scheduled = false;

  constructor(
    private readonly sink: RevisionLogSink,
    private readonly ref: RevisionRef,
    private readonly type: LogType,
  ) {}

  line(text: string): void {
    this.pending.push(text);
    if (this.pending.length >= 200) this.flushSoon(0);
    else this.flushSoon(100);
  }

  /** Follows a stream until it ends. */
  follow(stream: Readable | null, prefix = ''): Promise<void> {
    if (!stream) return Promise.resolve();
    const rl = createInterface({ input: stream, crlfDelay: Infinity });
    rl.on('line', (l) => this.line(prefix + l));
    return new Promise((resolve) => rl.once('close', resolve));
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
