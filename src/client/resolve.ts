// Turns what people type (a deployment's name or id; a revision's number, id, "latest" or "active") into records.
import { ApiError, type ControlPlaneClient, type Deployment, type Revision } from '../api/client.ts';
import { CliError } from './args.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The deployment named exactly `name` (names are unique per tenant), searched with name_contains page by page. */
export async function findByName(client: ControlPlaneClient, name: string): Promise<Deployment | undefined> {
  for (let offset = 0; ;) {
    const page = await client.listDeployments({ name_contains: name, limit: 100, offset });
    const hit = page.resources.find((d) => d.name === name);
    if (hit) return hit;
    if (page.resources.length < 100) return undefined;
    offset = page.offset;
  }
}

export async function findDeployment(client: ControlPlaneClient, nameOrId: string): Promise<Deployment> {
  if (UUID.test(nameOrId)) {
    try {
      return await client.getDeployment(nameOrId);
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 404)) throw err;
    }
  }
  const found = await findByName(client, nameOrId);
  if (!found) throw new CliError(`no deployment named or with id "${nameOrId}"`);
  return found;
}

export async function allRevisions(
  client: ControlPlaneClient,
  deploymentId: string,
  limit = Infinity,
): Promise<Revision[]> {
  const out: Revision[] = [];
  for (let offset = 0; out.length < limit;) {
    const page = await client.listRevisions(deploymentId, { limit: Math.min(100, limit - out.length), offset });
    out.push(...page.resources);
    if (page.resources.length === 0 || page.offset <= offset) break;
    offset = page.offset;
  }
  return out;
}

/** `ref`: a revision number (3), its id, "latest" (default) or "active" (the one serving traffic). */
export async function findRevision(client: ControlPlaneClient, dep: Deployment, ref = 'latest'): Promise<Revision> {
  if (ref === 'latest' || ref === 'active') {
    const id = ref === 'latest' ? dep.latest_revision_id : dep.active_revision_id;
    if (!id) throw new CliError(`deployment ${dep.name} has no ${ref} revision`);
    return client.getRevision(dep.id, id);
  }
  if (/^\d+$/.test(ref)) {
    const hit = (await allRevisions(client, dep.id)).find((r) => r.revision_number === Number(ref));
    if (!hit) throw new CliError(`deployment ${dep.name} has no revision ${ref}`);
    return hit;
  }
  return client.getRevision(dep.id, ref);
}
