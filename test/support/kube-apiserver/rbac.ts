// RBAC as the real API server's authorizer applies it: a request's user, verb, API group, resource, subresource,
// namespace and name against the Roles/ClusterRoles reached through RoleBindings/ClusterRoleBindings whose
// subjects name that user (a ServiceAccount, its groups, or a User). Denials carry the real server's message.
type Json = Record<string, any>;

export type UserInfo = { name: string; groups: string[] };

export type RequestAttributes = {
  verb: string;
  group: string;
  resource: string;
  subresource?: string;
  namespace?: string;
  name?: string;
};

/** What the authorizer reads: the RBAC objects the server stores. */
export type RbacObjects = {
  roles(namespace: string): Json[];
  clusterRoles(): Json[];
  roleBindings(namespace: string): Json[];
  clusterRoleBindings(): Json[];
};

export function serviceAccountUser(namespace: string, name: string): UserInfo {
  return {
    name: `system:serviceaccount:${namespace}:${name}`,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'],
  };
}

function subjectMatches(subject: Json, user: UserInfo, bindingNamespace: string): boolean {
  if (subject.kind === 'ServiceAccount') {
    return user.name === `system:serviceaccount:${subject.namespace ?? bindingNamespace}:${subject.name}`;
  }
  if (subject.kind === 'User') return subject.name === user.name;
  if (subject.kind === 'Group') return user.groups.includes(subject.name);
  return false;
}

function ruleAllows(rule: Json, a: RequestAttributes): boolean {
  const has = (list: unknown, v: string) => Array.isArray(list) && (list.includes('*') || list.includes(v));
  const resource = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  if (!has(rule.verbs, a.verb) || !has(rule.apiGroups, a.group) || !has(rule.resources, resource)) return false;
  const names = rule.resourceNames as string[] | undefined;
  if (names?.length) return a.name !== undefined && names.includes(a.name);
  return true;
}

export function authorize(objects: RbacObjects, user: UserInfo, a: RequestAttributes): boolean {
  const rulesOf = (kind: string, name: string, namespace?: string): Json[] => {
    const role =
      kind === 'ClusterRole'
        ? objects.clusterRoles().find((r) => r.metadata.name === name)
        : objects.roles(namespace ?? '').find((r) => r.metadata.name === name);
    return (role?.rules as Json[] | undefined) ?? [];
  };
  for (const b of objects.clusterRoleBindings()) {
    if (
      (b.subjects ?? []).some((s: Json) => subjectMatches(s, user, '')) &&
      rulesOf(b.roleRef.kind, b.roleRef.name).some((r) => ruleAllows(r, a))
    )
      return true;
  }
  if (a.namespace) {
    for (const b of objects.roleBindings(a.namespace)) {
      if (!(b.subjects ?? []).some((s: Json) => subjectMatches(s, user, a.namespace!))) continue;
      if (rulesOf(b.roleRef.kind, b.roleRef.name, a.namespace).some((r) => ruleAllows(r, a))) return true;
    }
  }
  return false;
}

/** The real server's 403 message, e.g. `jobs.batch "x" is forbidden: User "..." cannot update resource "jobs" ...`. */
export function forbiddenMessage(user: UserInfo, a: RequestAttributes): string {
  const what = `${a.resource}${a.group ? `.${a.group}` : ''}${a.name ? ` "${a.name}"` : ''}`;
  const resource = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  const scope = a.namespace ? `in the namespace "${a.namespace}"` : 'at the cluster scope';
  return `${what} is forbidden: User "${user.name}" cannot ${a.verb} resource "${resource}" in API group "${a.group}" ${scope}`;
}

/** The verb of a request, as RBAC names it. */
export function verbOf(method: string, hasName: boolean, watch: boolean): string {
  switch (method) {
    case 'GET':
      return hasName ? 'get' : watch ? 'watch' : 'list';
    case 'POST':
      return 'create';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      return hasName ? 'delete' : 'deletecollection';
    default:
      return method.toLowerCase();
  }
}
