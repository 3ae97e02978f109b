// In-process fan-out of a running run's stream events to SSE clients. Events are kept (bounded) while the run
// is active so a client that connects a little late, or reconnects with Last-Event-ID, misses nothing.
// Events of runs executing in another process are not relayed; the stream routes fall back to final values.

export interface StreamEvent {
  id: number;
  event: string;
  data: unknown;
}

type Listener = (e: StreamEvent | null) => void;

interface Channel {
  events: StreamEvent[];
  listeners: Set<Listener>;
  done: boolean;
}

const MAX_BUFFERED = 5_000;

export class StreamBroker {
  private readonly channels = new Map<string, Channel>();

  private channel(runId: string): Channel {
    let c = this.channels.get(runId);
    if (!c) this.channels.set(runId, (c = { events: [], listeners: new Set(), done: false }));
    return c;
  }

  /** The engine opens a channel when it starts a run here. */
  open(runId: string): void {
    const c = this.channel(runId);
    c.done = false;
    c.events = [];
    for (const w of [...(this.openWaiters.get(runId) ?? [])]) w();
  }

  publish(runId: string, event: string, data: unknown): void {
    const c = this.channels.get(runId);
    if (!c || c.done) return;
    const e = { id: c.events.length, event, data };
    if (c.events.length < MAX_BUFFERED) c.events.push(e);
    for (const l of c.listeners) l(e);
  }

  /** Ends the stream; the buffer stays a short while for clients that connect just after the end. */
  close(runId: string): void {
    const c = this.channels.get(runId);
    if (!c) return;
    c.done = true;
    for (const l of c.listeners) l(null);
    c.listeners.clear();
    setTimeout(() => {
      if (this.channels.get(runId) === c && c.done) this.channels.delete(runId);
    }, 30_000).unref();
  }

  isLocal(runId: string): boolean {
    return this.channels.has(runId);
  }

  /**
   * Replays buffered events after `afterId` and then live ones; `listener(null)` marks the end.
   * Returns an unsubscribe function, or null when this process is not running the run.
   */
  subscribe(runId: string, afterId: number, listener: Listener): (() => void) | null {
    const c = this.channels.get(runId);
    if (!c) return null;
    for (const e of c.events) if (e.id > afterId) listener(e);
    if (c.done) {
      listener(null);
      return () => undefined;
    }
    c.listeners.add(listener);
    return () => c.listeners.delete(listener);
  }

  /** Resolves when this process starts the run (true), or false when `signal` fires first. */
  waitOpen(runId: string, signal: AbortSignal): Promise<boolean> {
    if (this.channels.has(runId)) return Promise.resolve(true);
    return new Promise((resolve) => {
      const set = this.openWaiters.get(runId) ?? new Set();
      this.openWaiters.set(runId, set);
      const done = (v: boolean) => {
        set.delete(fire);
        if (!set.size) this.openWaiters.delete(runId);
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      };
      const fire = () => done(true);
      const onAbort = () => done(false);
      set.add(fire);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  private readonly openWaiters = new Map<string, Set<() => void>>();
}
