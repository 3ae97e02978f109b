// Build slots shared fairly between workspaces: at most `slots` builds run at once, at most `perWorkspace` of them
// for one workspace, and a freed slot goes to the waiting workspace served least recently (round robin), not to
// whoever queued first. One workspace queuing many slow builds therefore holds at most its own share of the slots,
// and another workspace's build starts as soon as a slot it may use is free. Hand-written: the rule is a dozen
// lines and no queue library does per-key caps with round robin.

export type BuildQueueOptions = {
  /** Builds running at once (at least 1). */
  slots: number;
  /** Builds one workspace may run at once (default: half the slots, at least 1). */
  perWorkspace?: number;
};

export function defaultPerWorkspace(slots: number): number {
  return Math.max(1, Math.floor(slots / 2));
}

export class FairBuildQueue {
  private readonly slots: number;
  private readonly perWorkspace: number;
  private running = 0;
  private readonly runningBy = new Map<string, number>();
  /** Waiting builds per workspace, in the order the workspaces started waiting. */
  private readonly waiting = new Map<string, (() => void)[]>();
  /** When each busy workspace last got a slot (a counter): the least recently served goes next. */
  private readonly served = new Map<string, number>();
  private turn = 0;

  constructor(opts: BuildQueueOptions) {
    this.slots = Math.max(1, Math.floor(opts.slots));
    this.perWorkspace = Math.max(1, Math.floor(opts.perWorkspace ?? defaultPerWorkspace(this.slots)));
  }

  /** Resolves once the build may start, with the function that frees its slot (calling it twice frees one). */
  acquire(workspace: string): Promise<() => void> {
    return new Promise((resolve) => {
      const start = () => {
        let released = false;
        resolve(() => {
          if (released) return;
          released = true;
          this.running--;
          const n = (this.runningBy.get(workspace) ?? 1) - 1;
          if (n > 0) this.runningBy.set(workspace, n);
          else this.runningBy.delete(workspace);
          // An idle workspace starts afresh: its next build waits behind no one's turn.
          if (n <= 0 && !this.waiting.has(workspace)) this.served.delete(workspace);
          this.pump();
        });
      };
      const queue = this.waiting.get(workspace);
      if (queue) queue.push(start);
      else this.waiting.set(workspace, [start]);
      this.pump();
    });
  }

  /** Builds running and waiting, per workspace (diagnostics and tests). */
  snapshot(): { running: Record<string, number>; waiting: Record<string, number> } {
    return {
      running: Object.fromEntries(this.runningBy),
      waiting: Object.fromEntries([...this.waiting].map(([w, q]) => [w, q.length])),
    };
  }

  private pump(): void {
    while (this.running < this.slots) {
      let next: string | undefined;
      for (const w of this.waiting.keys()) {
        if ((this.runningBy.get(w) ?? 0) >= this.perWorkspace) continue;
        if (next === undefined || (this.served.get(w) ?? -1) < (this.served.get(next) ?? -1)) next = w;
      }
      if (next === undefined) return;
      const queue = this.waiting.get(next)!;
      const start = queue.shift()!;
      if (!queue.length) this.waiting.delete(next);
      this.served.set(next, this.turn++);
      this.running++;
      this.runningBy.set(next, (this.runningBy.get(next) ?? 0) + 1);
      start();
    }
  }
}
