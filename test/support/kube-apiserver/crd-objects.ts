// The CRD files served as apiextensions.k8s.io/v1 CustomResourceDefinition objects (GET/LIST by clients such as
// the operator's start-up version check), stored as the administrator's `kubectl apply -f crds/` would.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import type { KubeApiServer } from './server.ts';

/** Stores every CRD yaml of `dir`; `edit` may change (or drop, by returning undefined) each one first. */
export function seedCrdObjects(
  api: KubeApiServer,
  dir: string,
  edit: (crd: Record<string, any>) => Record<string, any> | undefined = (c) => c,
): void {
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.yaml'))) {
    const crd = parse(readFileSync(join(dir, file), 'utf8'));
    if (crd?.kind !== 'CustomResourceDefinition') continue;
    const edited = edit(crd);
    if (edited) api.seed(edited, '');
  }
}
