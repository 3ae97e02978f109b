// Schema checks shared by the backends: the zod schemas of src/resources are the source of truth for both.
import type { z } from 'zod';
import { ValidationError, type ValidationIssue } from '../lib/errors.ts';
import { agentDeploymentSchema, agentRevisionSchema } from '../resources/index.ts';
import type { Kind, KindMap } from './resources.ts';

const schemas: Record<Kind, z.ZodType> = {
  AgentDeployment: agentDeploymentSchema,
  AgentRevision: agentRevisionSchema,
};

export function validateResource<K extends Kind>(kind: K, obj: unknown): KindMap[K] {
  const res = schemas[kind].safeParse(obj);
  if (res.success) return res.data as KindMap[K];
  const issues: ValidationIssue[] = res.error.issues.map((i) => ({
    loc: i.path.map((p) => (typeof p === 'number' ? p : String(p))),
    msg: i.message,
    type: i.code,
  }));
  throw new ValidationError(
    `${kind} is invalid: ${issues.map((i) => `${i.loc.join('.')}: ${i.msg}`).join('; ')}`,
    issues,
  );
}

/** Stable JSON for "did the spec change" checks (key order independent). */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)))
      : v,
  );
}
