// Readers the flags of several commands share (OptionSpec.read): each turns a flag's text into what its command's
// schema checks, and leaves what it cannot convert for zod to refuse with the flag's name.
import { UsageError } from './cli-args.ts';

/** Comma-separated entries, trimmed, empty ones dropped. */
export const list = (v: string | undefined): string[] =>
  (v ?? '')
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);

/** A number, or NaN for zod to refuse; undefined stays undefined. */
export const num = (v: string | undefined): number | undefined => (v === undefined ? undefined : Number(v));

/** "true"/"false" to a boolean; anything else stays a string for zod to refuse. */
export const bool = (v: string | undefined): boolean | string | undefined =>
  v === 'true' ? true : v === 'false' ? false : v;

/** Lower case, for enums that accept any case (log levels, true/false). */
export const lower = (v: string | undefined): string | undefined => v?.toLowerCase();

/** A JSON flag (Helm's toJson of a values map or list): parsed here, its shape checked by zod. */
export function json(v: string | undefined, flag: string): unknown {
  if (v === undefined || v.trim() === '') return undefined;
  try {
    return JSON.parse(v);
  } catch (err) {
    throw new UsageError(`invalid ${flag}: not JSON (${(err as Error).message})`);
  }
}
