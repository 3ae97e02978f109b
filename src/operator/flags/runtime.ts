// The schema of each runtime flag (`runtime.*` paths) is the field of the Kubernetes runtime's own schema at that
// path (runtimes/kubernetes/config.ts), so a runtime setting's type is declared once, there, with its default.
import { z } from 'zod';
import type { ConfigOption } from '../../lib/cli-args.ts';
import { kubernetesRuntimeConfigSchema } from '../runtimes/kubernetes/config.ts';

type RuntimeOption = Omit<ConfigOption, 'schema'> & { path: `runtime.${string}` };

/** The field of `schema` at the dotted `path`, through defaults and optionals; an unknown path throws. */
export function fieldAt(schema: z.ZodType, path: string): z.ZodType {
  let at = schema;
  for (const key of path.split('.')) {
    while (at instanceof z.ZodDefault || at instanceof z.ZodOptional) at = at.unwrap() as z.ZodType;
    const field = at instanceof z.ZodObject ? (at.shape as Record<string, z.ZodType>)[key] : undefined;
    if (!field) throw new Error(`no setting ${path} in the schema (at ${key})`);
    at = field;
  }
  return at;
}

/** Runtime flags, each given the schema of its path in the Kubernetes runtime's configuration. */
export function runtimeOptions<const O extends Record<string, RuntimeOption>>(
  options: O,
): { [K in keyof O]: O[K] & { schema: z.ZodType } } {
  return Object.fromEntries(
    Object.entries(options).map(([name, o]) => [
      name,
      { ...o, schema: fieldAt(kubernetesRuntimeConfigSchema, o.path.slice('runtime.'.length)) },
    ]),
  ) as { [K in keyof O]: O[K] & { schema: z.ZodType } };
}
