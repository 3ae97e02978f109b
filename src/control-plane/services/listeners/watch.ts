// What a listener must run, as a snapshot with a digest cursor, served by long poll.
import { createHash } from 'node:crypto';
import { LABEL_DEPLOYMENT } from '../../../resources/index.ts';
import type { ListenerRecord } from '../../../state/listeners.ts';
import { agentKeyHashes } from '../../api-keys/key-publisher.ts';
import { deploymentsOf, requireListener, touch, type ListenerDeps } from './records.ts';
import { LOG_CURSOR_ANNOTATION } from './report.ts';
import type { ListenerSnapshot } from '../../../api/schemas/listeners.ts';

async function snapshot(deps: ListenerDeps, r: ListenerRecord): Promise<ListenerSnapshot> {
  const { store, ns } = deps;
  const deployments = (await deploymentsOf(deps, r.tenant, r.id)).filter((d) => !d.metadata.deletionTimestamp);
  const out: ListenerSnapshot['deployments'] = [];
  const setNames = new Set<string>();
  for (const d of deployments) {
    const { items } = await store.list('AgentRevision', ns, {
      labelSelector: `${LABEL_DEPLOYMENT}=${d.metadata.name}`,
    });
    const revisions = items
      .filter((x) => x.spec.tenantId === r.tenant)
      .sort((a, b) => a.spec.revisionNumber - b.spec.revisionNumber);
    if (d.spec.secretsName) setNames.add(d.spec.secretsName);
    for (const x of revisions) if (x.spec.secretsName) setNames.add(x.spec.secretsName);
    out.push({
      name: d.metadata.name,
      annotations: Object.fromEntries(
        Object.entries(d.metadata.annotations ?? {}).filter(([k]) => k.startsWith('agentplane.dev/secret-names')),
      ),
      spec: d.spec,
      revisions: revisions.map((x) => ({
        name: x.metadata.name,
        spec: x.spec,
        log_cursors: {
          build: x.metadata.annotations?.[LOG_CURSOR_ANNOTATION.build] ?? null,
          deploy: x.metadata.annotations?.[LOG_CURSOR_ANNOTATION.deploy] ?? null,
        },
      })),
    });
  }
  const secrets: ListenerSnapshot['secrets'] = {};
  for (const name of [...setNames].sort()) {
    secrets[name] = await store.getSecrets(ns, name).catch(() => ({}));
  }
  const keys = await store.listApiKeys();
  const key_hashes = agentKeyHashes(keys, r.tenant);
  // The cursor covers what the data plane must act on; log cursors move with every report and are left out.
  const digestOf = {
    deployments: out.map((d) => ({ ...d, revisions: d.revisions.map((x) => ({ name: x.name, spec: x.spec })) })),
    secrets,
    key_hashes,
    namespaces: r.computeConfig.k8sNamespaces,
  };
  const cursor = createHash('sha256').update(JSON.stringify(digestOf)).digest('hex').slice(0, 32);
  return { cursor, deployments: out, secrets, key_hashes, namespaces: r.computeConfig.k8sNamespaces };
}

/** Long poll: answers at once when the snapshot's cursor differs from `since`, else when it changes or at `waitMs`. */
export async function watchListener(
  deps: ListenerDeps,
  tenant: string,
  id: string,
  since: string | undefined,
  waitMs: number,
  opts: { agentVersion?: string; closed: () => boolean },
): Promise<ListenerSnapshot | { cursor: string; unchanged: true }> {
  let r = await requireListener(deps, tenant, id);
  await touch(deps, r, opts.agentVersion);
  const until = Date.now() + waitMs;
  for (;;) {
    const snap = await snapshot(deps, r);
    if (snap.cursor !== since) return snap;
    if (Date.now() >= until || opts.closed()) {
      r = await requireListener(deps, tenant, id);
      await touch(deps, r);
      return { cursor: snap.cursor, unchanged: true };
    }
    await new Promise((res) => setTimeout(res, 500));
    r = await requireListener(deps, tenant, id);
  }
}
