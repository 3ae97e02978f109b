// The OwnerReferencesPermissionEnforcement admission plugin: changing an object's ownerReferences on update needs
// `delete` on the object, and setting `blockOwnerDeletion: true` on a reference (new, or newly true) needs `update`
// on the owner's `finalizers` subresource — else 403, in the plugin's words.
import type { RequestAttributes } from './rbac.ts';
import type { KindSpec } from './registry.ts';

type Json = Record<string, any>;

const refKey = (r: Json) => `${r.apiVersion}/${r.kind}/${r.name}/${r.uid}`;

function changed(obj: Json, old: Json | undefined): boolean {
  const a = JSON.stringify(obj.metadata?.ownerReferences ?? []);
  const b = JSON.stringify(old?.metadata?.ownerReferences ?? []);
  return a !== b;
}

/** References that block owner deletion now and did not before (by uid). */
function newlyBlocking(obj: Json, old: Json | undefined): Json[] {
  const before = new Map<string, Json>(((old?.metadata?.ownerReferences ?? []) as Json[]).map((r) => [r.uid, r]));
  return ((obj.metadata?.ownerReferences ?? []) as Json[]).filter(
    (r) =>
      r.blockOwnerDeletion === true &&
      !(before.get(r.uid)?.blockOwnerDeletion === true && refKey(before.get(r.uid)!) === refKey(r)),
  );
}

/**
 * The refusal message (without the "<resource> is forbidden: " prefix) or undefined when the write may go on.
 * `allowed` asks the authorizer for the requesting user; `kinds` finds an owner's resource from its reference.
 */
export function ownerReferenceRefusal(
  spec: KindSpec,
  namespace: string,
  obj: Json,
  old: Json | undefined,
  kinds: KindSpec[],
  allowed: (a: RequestAttributes) => boolean,
): string | undefined {
  if (!changed(obj, old)) return undefined;
  if (old) {
    const del: RequestAttributes = {
      verb: 'delete',
      group: spec.group,
      resource: spec.plural,
      namespace: namespace || undefined,
      name: obj.metadata?.name,
    };
    if (!allowed(del)) return "cannot set an ownerRef on a resource you can't delete: , <nil>";
  }
  for (const ref of newlyBlocking(obj, old)) {
    const [group, version] = String(ref.apiVersion ?? '').includes('/')
      ? String(ref.apiVersion).split('/')
      : ['', String(ref.apiVersion ?? '')];
    const owner = kinds.find((k) => k.group === group && k.version === version && k.kind === ref.kind);
    if (!owner)
      return `cannot set blockOwnerDeletion in this case because cannot find RESTMapping for APIVersion ${ref.apiVersion} Kind ${ref.kind}: no matches for kind "${ref.kind}" in version "${ref.apiVersion}"`;
    const attrs: RequestAttributes = {
      verb: 'update',
      group: owner.group,
      resource: owner.plural,
      subresource: 'finalizers',
      namespace: owner.namespaced ? namespace || undefined : undefined,
      name: ref.name,
    };
    if (!allowed(attrs))
      return "cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: , <nil>";
  }
  return undefined;
}
