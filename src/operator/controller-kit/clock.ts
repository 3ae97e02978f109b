// Time behind an interface so queue and informer semantics can be tested with explicit ticks.

export type CancelTimer = () => void;

export interface Clock {
  now(): number;
  setTimer(fn: () => void, ms: number): CancelTimer;
}

export const realClock: Clock = {
  now: () => Date.now(),
  setTimer(fn, ms) {
    const t = setTimeout(fn, Math.max(0, ms));
    // Timers never keep the process alive on their own; the servers and watches do.
    t.unref();
    return () => clearTimeout(t);
  },
};

/** A clock that moves only when told to; due timers fire in time order inside advance(). */
export class FakeClock implements Clock {
  private t = 0;
  private seq = 0;
  private timers = new Map<number, { at: number; fn: () => void }>();

  now(): number {
    return this.t;
  }

  setTimer(fn: () => void, ms: number): CancelTimer {
    const id = ++this.seq;
    this.timers.set(id, { at: this.t + Math.max(0, ms), fn });
    return () => void this.timers.delete(id);
  }

  /** Number of timers still waiting. */
  get pending(): number {
    return this.timers.size;
  }

  advance(ms: number): void {
    const until = this.t + ms;
    for (;;) {
      let next: [number, { at: number; fn: () => void }] | undefined;
      for (const e of this.timers) if (e[1].at <= until && (!next || e[1].at < next[1].at)) next = e;
      if (!next) break;
      this.timers.delete(next[0]);
      this.t = next[1].at;
      next[1].fn();
    }
    this.t = until;
  }
}
