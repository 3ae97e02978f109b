// What a registry token grants: of the scopes a client asks for (`repository:<name>:<actions>`, the Docker token
// spec), only push and pull on the one repository the push token opens; anything else is left out of the answer
// (not refused: per the spec the client gets a token with less access, and the registry then says no).

export type ResourceActions = { type: string; name: string; actions: string[] };

const GRANTABLE = ['pull', 'push'];

/** The scopes of `scope` query values (each may hold several, space-separated), or the one that is malformed. */
export function parseScopes(values: string[]): { scopes: ResourceActions[] } | { malformed: string } {
  const scopes: ResourceActions[] = [];
  for (const scope of values.flatMap((v) => v.split(' ')).filter(Boolean)) {
    // type[(class)]:name:actions; a name may hold ':' (a port in some clients' names), the actions never do.
    const first = scope.indexOf(':');
    const last = scope.lastIndexOf(':');
    if (first <= 0 || last === first) return { malformed: scope };
    const type = scope.slice(0, first).replace(/\(.*\)$/, '');
    const name = scope.slice(first + 1, last);
    if (!name) return { malformed: scope };
    scopes.push({
      type,
      name,
      actions: scope
        .slice(last + 1)
        .split(',')
        .filter(Boolean),
    });
  }
  return { scopes };
}

/** The access claim: push/pull that was asked for on `repository`, merged; nothing for any other resource. */
export function grantedAccess(requested: ResourceActions[], repository: string): ResourceActions[] {
  const actions = new Set<string>();
  for (const r of requested) {
    if (r.type !== 'repository' || r.name !== repository) continue;
    for (const a of r.actions) if (GRANTABLE.includes(a)) actions.add(a);
  }
  return actions.size
    ? [{ type: 'repository', name: repository, actions: GRANTABLE.filter((a) => actions.has(a)) }]
    : [];
}
