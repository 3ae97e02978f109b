// A sleeping deployment, written down in the runtime's own data folder (beside its revisions, not in the agent's
// store): a restart of the platform reads it back and leaves the deployment asleep, with the same wake time, instead
// of starting a server that would only fall asleep again after its window.
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { deploymentDir, type LocalContext } from './context.ts';

const SleepRecord = z.object({
  revision: z.string().min(1),
  /** When it fell asleep (ms). */
  since: z.number().int().nonnegative(),
  /** When its store's next work is due (ms); absent: only a request wakes it. */
  wakeAt: z.number().int().nonnegative().optional(),
});
export type SleepRecord = z.infer<typeof SleepRecord>;

const recordFile = (ctx: LocalContext, deploymentId: string) => join(deploymentDir(ctx, deploymentId), 'sleep.json');

/** Per runtime and deployment: the last write or removal, so they happen in the order they were asked for. */
const writes = new WeakMap<LocalContext, Map<string, Promise<void>>>();

/**
 * Writes the record (or removes it: undefined) after the deployment's earlier writes. Whole or not at all (a
 * rename): a crash mid-write leaves the previous record or none, never half of one. A deployment folder removed
 * meanwhile (cleanup) is not created again.
 */
export function recordSleep(ctx: LocalContext, deploymentId: string, record: SleepRecord | undefined): Promise<void> {
  let mine = writes.get(ctx);
  if (!mine) writes.set(ctx, (mine = new Map()));
  const file = recordFile(ctx, deploymentId);
  const next = (mine.get(deploymentId) ?? Promise.resolve())
    .then(async () => {
      if (!record) return rm(file, { force: true });
      const tmp = `${file}.${process.pid}.tmp`;
      await writeFile(tmp, `${JSON.stringify(record)}\n`, { mode: 0o600 });
      await rename(tmp, file);
    })
    .catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return;
      ctx.opts.logger.warn(
        { deployment: deploymentId, reason: err.message },
        'could not write the sleep record; after a restart of the platform the deployment starts',
      );
    });
  mine.set(deploymentId, next);
  void next.finally(() => {
    if (mine.get(deploymentId) === next) mine.delete(deploymentId);
  });
  return next;
}

/** The deployment's record, or undefined when there is none or it cannot be read (then it simply starts). */
export async function loadSleep(ctx: LocalContext, deploymentId: string): Promise<SleepRecord | undefined> {
  const text = await readFile(recordFile(ctx, deploymentId), 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  try {
    return SleepRecord.parse(JSON.parse(text));
  } catch (err) {
    ctx.opts.logger.warn(
      { deployment: deploymentId, reason: (err as Error).message.split('\n')[0] },
      'unreadable sleep record ignored; the deployment starts',
    );
    return undefined;
  }
}
