// How the operator's flags turn their text into what runtimes/kubernetes/config.ts checks: each flag names its reader
// where it is declared. A reader leaves what it cannot convert as it is, for zod to refuse with the flag's name.
import { UsageError } from '../../lib/cli-args.ts';

export const text = (v: string | undefined) => v;

export const list = (v: string | undefined): string[] =>
  (v ?? '')
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);

/** A list where `none` means the empty list (Helm cannot pass an empty value that differs from "unset"). */
export const listOrNone = (v: string | undefined): string[] => (v === 'none' ? [] : list(v));

/** A number, or NaN for zod to refuse; undefined stays undefined. */
export const num = (v: string | undefined): number | undefined => (v === undefined ? undefined : Number(v));

/** "true"/"false" to a boolean; anything else stays a string for zod to refuse. */
export const bool = (v: string | undefined): boolean | string | undefined =>
  v === 'true' ? true : v === 'false' ? false : v;

/** A JSON flag (Helm's toJson of a values map or list): parsed here, its shape checked by zod. */
export function json(v: string | undefined, flag: string): unknown {
  if (v === undefined || v.trim() === '') return undefined;
  try {
    return JSON.parse(v);
  } catch (err) {
    throw new UsageError(`invalid ${flag}: not JSON (${(err as Error).message})`);
  }
}

/** `k=v,k2=v2` to a label map; a malformed entry becomes a message zod then refuses. */
export function labelMap(v: string | undefined): Record<string, string> | string {
  const out: Record<string, string> = {};
  for (const term of list(v)) {
    const eq = term.indexOf('=');
    if (eq <= 0) return `"${term}" is not key=value`;
    out[term.slice(0, eq)] = term.slice(eq + 1);
  }
  return out;
}

/** `namespace/name` to an object reference; anything else stays a string for zod to refuse. */
export function objectRef(v: string | undefined): { namespace: string; name: string } | string | undefined {
  const m = v === undefined ? null : /^([a-z0-9][-a-z0-9]*)\/([a-z0-9][-a-z0-9.]*)$/.exec(v);
  return v === undefined ? undefined : m ? { namespace: m[1]!, name: m[2]! } : v;
}
