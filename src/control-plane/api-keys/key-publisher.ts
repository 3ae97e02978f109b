// Hands the data plane what it needs to check API keys, and nothing more: per tenant, the SHA-256 hashes of the
// keys of that workspace alone. Platform keys (the bootstrap key, '*' admin keys) and keys that span several
// workspaces are never published, so no agent accepts them and tenant code is never handed one. Level-triggered: each pass computes
// the wanted sets from the store and writes only those that differ from what was written, so a key created or
// revoked by any process (another replica, `agentplane api-key`) reaches the agents within one interval.
import { createHash } from 'node:crypto';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Logger } from '../../lib/logger.ts';
import type { PlatformState } from '../../state/types.ts';
import type { TenantKeySink } from '../../state/api-keys.ts';

/** Where one tenant's key hashes go: a file on one machine, a Secret in a cluster. */
/** A stable, path- and DNS-safe id for a tenant (tenant ids may hold upper case, `_` and `.`). */
export function tenantDigest(tenant: string): string {
  return createHash('sha256').update(tenant).digest('hex').slice(0, 16);
}

/** Path of a tenant's key hashes inside the runtime's key folder: a folder per tenant, so each can be shown alone. */
export function tenantKeysFileName(tenant: string): string {
  return join(`tenant-${tenantDigest(tenant)}`, 'keys.json');
}

/** One JSON file per tenant, replaced atomically (the agent server polls it). */
export function fileKeySink(dir: string): TenantKeySink & { pathFor(tenant: string): string } {
  const pathFor = (tenant: string) => join(dir, tenantKeysFileName(tenant));
  return {
    pathFor,
    async write(tenant, hashes) {
      const target = pathFor(tenant);
      await mkdir(dirname(target), { recursive: true, mode: 0o755 });
      const tmp = `${target}.${process.pid}.tmp`;
      await writeFile(tmp, `${JSON.stringify({ hashes })}\n`, { mode: 0o644 });
      await rename(tmp, target);
    },
  };
}

export type KeyPublisherOptions = {
  store: Pick<PlatformState, 'listApiKeys' | 'list' | 'namespace'>;
  sink: TenantKeySink;
  logger: Logger;
  intervalMs?: number;
};

/**
 * The hashes of the keys a tenant's agents accept: keys of that workspace alone. Listener keys talk to the control
 * plane only; a key good for more than one workspace (or for all: '*', like the bootstrap key) would hand tenant code
 * a credential of another workspace or of the platform, so agents accept neither.
 */
export function agentKeyHashes(
  keys: { hash: string; tenants: string[]; listenerId?: string }[],
  tenant: string,
): string[] {
  const own = keys.filter((k) => !k.listenerId && k.tenants.length === 1 && k.tenants[0] === tenant);
  return [...new Set(own.map((k) => k.hash))].sort();
}

export class KeyPublisher {
  private readonly written = new Map<string, string>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private failing = false;

  constructor(private readonly opts: KeyPublisherOptions) {}

  /** Tenants that need a key set: every tenant with a deployment, plus any named explicitly. */
  async wanted(extraTenants: string[] = []): Promise<Map<string, string[]>> {
    const [keys, deployments] = await Promise.all([
      this.opts.store.listApiKeys(),
      this.opts.store.list('AgentDeployment', this.opts.store.namespace),
    ]);
    const tenants = new Set([...deployments.items.map((d) => d.spec.tenantId), ...extraTenants]);
    const out = new Map<string, string[]>();
    for (const tenant of tenants) out.set(tenant, agentKeyHashes(keys, tenant));
    return out;
  }

  /** One pass; resolves once every changed set is written. Concurrent callers share the pass in flight. */
  sync(extraTenants: string[] = []): Promise<void> {
    this.running ??= (async () => {
      try {
        // One tenant's failure (e.g. its namespace not created yet) must not hold back the others.
        const failures: unknown[] = [];
        for (const [tenant, hashes] of await this.wanted(extraTenants)) {
          const text = JSON.stringify(hashes);
          if (this.written.get(tenant) === text) continue;
          try {
            await this.opts.sink.write(tenant, hashes);
            this.written.set(tenant, text);
            this.opts.logger.debug({ tenant, keys: hashes.length }, 'published API key hashes');
          } catch (err) {
            failures.push(err);
          }
        }
        if (failures.length) throw failures[0];
        if (this.failing) this.opts.logger.info('publishing API key hashes works again');
        this.failing = false;
      } catch (err) {
        if (!this.failing) this.opts.logger.error({ err }, 'could not publish API key hashes; retrying');
        this.failing = true;
        throw err;
      } finally {
        this.running = undefined;
      }
    })();
    return this.running;
  }

  /** Forgets what was written for `tenant`, so the next pass writes its set again (its file was replaced). */
  forget(tenant: string): void {
    this.written.delete(tenant);
  }

  start(): void {
    const tick = () => {
      void this.sync()
        .catch(() => undefined)
        .finally(() => {
          if (this.timer) this.timer = setTimeout(tick, this.opts.intervalMs ?? 1000).unref();
        });
    };
    this.timer = setTimeout(tick, 0).unref();
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running?.catch(() => undefined);
  }
}
