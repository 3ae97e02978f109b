// Answers read as a caller, kept a moment for the same caller's next requests: MCP's tool table (which assistant a
// tool name is) and A2A's "does this agent take messages" are read on every call but change rarely, and reading
// them costs about as much as everything else the protocols add to a run. An entry is the caller's own
// (CallerApi.callerKey: a digest of their headers) and lives CALLER_MEMO_TTL_MS, so it is at most that much behind
// a change made on any replica. Whatever the protocols then do is still done as the caller, so an entry never
// lets anyone reach more than they could. One memo per app: callers of different apps never share one.
import type { CallerApi } from './as-caller.ts';

export const CALLER_MEMO_TTL_MS = 2_000;
const MAX_ENTRIES = 1_000;

export class CallerMemo<T> {
  private readonly entries = new Map<string, { at: number; value: Promise<T> }>();

  /**
   * The value `load` gave for this caller and `key` less than CALLER_MEMO_TTL_MS ago, else `load`'s (a failure is
   * not kept). `fresh`: load now whatever is kept, and keep that.
   */
  get(api: CallerApi, key: string, load: () => Promise<T>, fresh = false): Promise<T> {
    const id = `${api.callerKey}\n${key}`;
    const kept = this.entries.get(id);
    if (!fresh && kept && Date.now() - kept.at < CALLER_MEMO_TTL_MS) return kept.value;
    const value = load();
    this.entries.delete(id);
    this.entries.set(id, { at: Date.now(), value });
    value.catch(() => {
      if (this.entries.get(id)?.value === value) this.entries.delete(id);
    });
    // A Map iterates oldest first: beyond the bound, the entries refreshed longest ago go.
    for (const k of this.entries.keys()) {
      if (this.entries.size <= MAX_ENTRIES) break;
      this.entries.delete(k);
    }
    return value;
  }
}
