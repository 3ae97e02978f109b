// The crons port: scheduled runs, and the claim of a due tick, which creates the tick's run in the same transaction.
import type { Json, SortOrder } from './common.ts';
import type { NewRun, RunRecord } from './runs.ts';

/** A scheduled run (client.crons.*): a run made from `payload` at every tick of `schedule`. */
export interface Cron {
  cron_id: string;
  assistant_id: string;
  /** null: stateless, every tick runs on a new thread. */
  thread_id: string | null;
  on_run_completed: 'delete' | 'keep' | null;
  end_time: string | null;
  schedule: string;
  /** IANA time zone the schedule is read in (UTC when null). */
  timezone: string | null;
  created_at: string;
  updated_at: string;
  /** The run-create body each tick's run is made from. */
  payload: Json;
  user_id: string | null;
  /** The next tick; null once end_time is passed. */
  next_run_date: string | null;
  metadata: Json;
  enabled: boolean;
}

/**
 * A cron as stored: the public record plus, never shown, what custom auth said about its creator: the metadata their
 * records carry and who they are (each tick's run sees them, as the creator's own runs do).
 */
export interface CronRecord extends Cron {
  owner_metadata: Json;
  owner_auth: Json | null;
}

export type NewCron = Omit<CronRecord, 'created_at' | 'updated_at'>;

export type CronPatch = Partial<
  Pick<
    Cron,
    'schedule' | 'timezone' | 'end_time' | 'payload' | 'metadata' | 'enabled' | 'on_run_completed' | 'next_run_date'
  >
>;

export interface CronQuery {
  assistant_id?: string;
  thread_id?: string;
  enabled?: boolean;
  /** Containment filter on metadata (custom auth's equality conditions). */
  metadata?: Json;
  limit?: number;
  offset?: number;
  sort_by?: 'cron_id' | 'assistant_id' | 'thread_id' | 'created_at' | 'updated_at' | 'next_run_date';
  sort_order?: SortOrder;
}

/**
 * One tick to fire: the cron's tick as read (`due`), the tick after it, and the run to create for it (null: the
 * run cannot be made, e.g. its assistant was deleted; `reason` says why and the tick is skipped).
 */
export interface CronTick {
  cron_id: string;
  due: string;
  next: string | null;
  run: NewRun | null;
  reason?: string;
}

export type CronTickResult =
  /** This caller claimed the tick and created its run. */
  | { kind: 'fired'; run: RunRecord }
  /** This caller claimed the tick but the run was refused (busy thread with reject, thread gone): tick skipped. */
  | { kind: 'skipped'; reason: string }
  /** Someone else has the tick, or it changed (patched, disabled, deleted) since it was read. */
  | { kind: 'taken' };

export interface CronStore {
  create(c: NewCron): Promise<CronRecord>;
  get(id: string): Promise<CronRecord | null>;
  /** NotFoundError when unknown. */
  patch(id: string, patch: CronPatch): Promise<CronRecord>;
  /** NotFoundError when unknown. */
  delete(id: string): Promise<void>;
  search(q: CronQuery): Promise<CronRecord[]>;
  count(q: CronQuery): Promise<number>;
  /** Enabled crons whose next tick is at or before now, earliest first. */
  due(limit: number): Promise<CronRecord[]>;
  /**
   * Claims the tick and creates its run in one transaction: of all processes firing the same tick, exactly one
   * gets `fired` (or `skipped`), and the tick is never claimed without its run (or the reason it has none).
   */
  fire(tick: CronTick): Promise<CronTickResult>;
}
