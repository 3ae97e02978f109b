// Readers of the operator's own flag formats (OptionSpec.read); the shared ones are in lib/option-readers.ts.
import { z } from 'zod';
import { list } from '../../lib/option-readers.ts';

/** A Kubernetes object name (namespaces, Leases). */
export const kubernetesName = z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a Kubernetes name');

/** A list where `none` means the empty list (Helm cannot pass an empty value that differs from "unset"). */
export const listOrNone = (v: string | undefined): string[] => (v === 'none' ? [] : list(v));

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
