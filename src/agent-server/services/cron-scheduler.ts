// Cron schedules and the scheduler that fires them. Every replica polls the store for due ticks; the store's
// `fire` makes sure one of them claims each tick (together with its run). The next tick is computed from now, not
// from the tick that was due, so ticks missed while no replica ran collapse into one run.
import { Cron as CronPattern } from 'croner';
import type { Logger } from '../../lib/logger.ts';
import { ValidationError } from '../../lib/errors.ts';
import { isoNow } from '../storage/common.ts';
import type { CronRecord, NewRun, RunRecord, Storage } from '../storage/types.ts';
import type { RunCreateBody } from '../schemas/runs.ts';
import type { RequestAuth } from '../auth/custom.ts';
import type { RunAuth } from './context.ts';

/** Checks a time zone name; throws ValidationError naming the field. */
export function checkTimezone(timezone: string): void {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
  } catch {
    throw new ValidationError(
      `timezone: unknown time zone "${timezone}" (an IANA name such as "Europe/Paris" or "UTC")`,
    );
  }
}

/**
 * The first tick of `schedule` strictly after `after`, in `timezone` (UTC when null); null when there is none or
 * it would be past `endTime`. Standard 5-field crontab; a leading sixth field is seconds. Throws ValidationError
 * quoting the schedule when it does not parse.
 */
export function nextTick(schedule: string, timezone: string | null, after: Date, endTime?: string | null): Date | null {
  let pattern: CronPattern;
  try {
    pattern = new CronPattern(schedule, { paused: true, timezone: timezone ?? 'UTC' });
  } catch (err) {
    throw new ValidationError(`schedule: "${schedule}" is not a valid cron schedule: ${(err as Error).message}`);
  }
  const fields = schedule.trim().split(/\s+/).length;
  if (!schedule.trim().startsWith('@') && (fields < 5 || fields > 6)) {
    throw new ValidationError(
      `schedule: "${schedule}" is not a valid cron schedule: expected 5 fields (or 6 with seconds)`,
    );
  }
  let next: Date | null;
  try {
    next = pattern.nextRun(after);
  } catch (err) {
    throw new ValidationError(`schedule: "${schedule}" has no next run: ${(err as Error).message}`);
  }
  if (!next) return null;
  if (endTime && next.getTime() > Date.parse(endTime)) return null;
  return next;
}

export interface CronSchedulerDeps {
  storage: Storage;
  /** The run a create request asks for (the run service's build). */
  buildRun(threadId: string | null, body: RunCreateBody, caller?: RunAuth): Promise<NewRun>;
  /** on_run_completed delete: removes the tick's thread once its run has ended (the run service's deleteThreadWhenDone). */
  afterCreate(run: RunRecord): void;
  logger: Logger;
  /** How often to look for due ticks. */
  pollMs: number;
}

export class CronScheduler {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;

  constructor(private readonly deps: CronSchedulerDeps) {}

  start(): void {
    this.stopped = false;
    this.timer = setInterval(() => void this.poll(), this.deps.pollMs);
    this.timer.unref();
    void this.poll();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  /** Fires every due tick once; a poll still busy makes the next one a no-op. */
  poll(): Promise<void> {
    if (this.running) return this.running;
    this.running = this.fireDue()
      .catch((err) => this.deps.logger.warn({ err }, 'firing due crons failed; retrying on the next poll'))
      .finally(() => (this.running = null));
    return this.running;
  }

  private async fireDue(): Promise<void> {
    for (;;) {
      const due = await this.deps.storage.crons.due(50);
      for (const cron of due) {
        if (this.stopped) return;
        await this.fireOne(cron).catch((err) =>
          this.deps.logger.warn({ err, cron_id: cron.cron_id }, 'firing a cron tick failed; retrying on the next poll'),
        );
      }
      if (due.length < 50 || this.stopped) return;
    }
  }

  private async fireOne(cron: CronRecord): Promise<void> {
    const log = this.deps.logger.child({ cron_id: cron.cron_id });
    let next: Date | null = null;
    try {
      next = nextTick(cron.schedule, cron.timezone, new Date(), cron.end_time);
    } catch (err) {
      log.warn({ err }, 'cron schedule no longer parses; the cron stops');
    }
    let run: NewRun | null = null;
    let reason: string | undefined;
    try {
      const body = {
        ...(cron.payload as RunCreateBody),
        assistant_id: cron.assistant_id,
        on_completion: cron.on_run_completed ?? 'delete',
      } as RunCreateBody;
      const auth = cron.owner_auth ? (cron.owner_auth as unknown as RequestAuth) : null;
      run = await this.deps.buildRun(cron.thread_id, body, { auth, filters: cron.owner_metadata });
      // Which cron and which of its ticks made the run.
      run.metadata = { ...run.metadata, cron_id: cron.cron_id, cron_tick: cron.next_run_date };
    } catch (err) {
      reason = (err as Error).message;
    }
    const result = await this.deps.storage.crons.fire({
      cron_id: cron.cron_id,
      due: cron.next_run_date!,
      next: next ? isoNow(next.getTime()) : null,
      run,
      reason,
    });
    if (result.kind === 'fired') {
      log.info(
        { run_id: result.run.run_id, thread_id: result.run.thread_id, next_run_date: next?.toISOString() ?? null },
        'cron fired',
      );
      this.deps.afterCreate(result.run);
    } else if (result.kind === 'skipped') {
      log.warn({ reason: result.reason }, 'cron tick skipped: its run could not be created');
      // A thread cron whose thread was deleted goes with it.
      if (cron.thread_id && !(await this.deps.storage.threads.get(cron.thread_id))) {
        await this.deps.storage.crons.delete(cron.cron_id).catch(() => undefined);
        log.info({ thread_id: cron.thread_id }, 'cron deleted: its thread is gone');
      }
    }
  }
}
