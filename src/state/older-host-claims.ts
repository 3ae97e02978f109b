// Deployments written before host claims existed hold their custom host without a claim. Release 0.1 found them by
// reading every tenant's deployments on each create and patch; now they are given their claim once, when the control
// plane starts: the embedded store does it in a schema step (embedded/migrations.ts), the kubernetes store, which
// keeps no schema version, here at each start (one list, then nothing for deployments that hold their claim).
import type { Logger } from '../lib/logger.ts';
import { customUrlHost } from '../resources/index.ts';
import type { HostClaimStore } from './claims.ts';
import { AlreadyExistsError } from './errors.ts';
import type { ResourceStore } from './resources.ts';

/** Claims the hosts of deployments that have none; the older deployment keeps a host two of them name. */
export async function claimHostsOfOlderDeployments(
  store: ResourceStore & HostClaimStore & { readonly namespace: string },
  logger: Logger,
): Promise<number> {
  const ns = store.namespace;
  const [{ items }, claims] = await Promise.all([store.list('AgentDeployment', ns), store.listHostClaims(ns)]);
  const held = new Set(claims.map((c) => `${c.host} ${c.owner.uid}`));
  const oldestFirst = items
    .filter((d) => !d.metadata.deletionTimestamp && d.spec.sourceConfig.customUrl)
    .sort((a, b) => (a.metadata.creationTimestamp ?? '').localeCompare(b.metadata.creationTimestamp ?? ''));
  let claimed = 0;
  for (const dep of oldestFirst) {
    const parsed = customUrlHost(dep.spec.sourceConfig.customUrl!);
    if (!('host' in parsed) || held.has(`${parsed.host} ${dep.metadata.uid}`)) continue;
    try {
      await store.claimHost(ns, parsed.host, { name: dep.metadata.name, uid: dep.metadata.uid! });
      claimed++;
    } catch (err) {
      if (!(err instanceof AlreadyExistsError)) throw err;
      logger.warn(
        { deployment: dep.metadata.name, host: parsed.host },
        'a deployment written before host claims names a host another deployment holds; it keeps its custom_url but not the host',
      );
    }
  }
  if (claimed) logger.info({ claimed }, 'claimed the custom hosts of deployments written before host claims');
  return claimed;
}
