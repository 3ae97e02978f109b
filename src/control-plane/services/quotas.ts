// Per-workspace quotas, so one workspace cannot take what the others need: how many deployments, listeners,
// integrations and OAuth providers it holds, and how many revisions (builds) it starts per hour. A count quota is
// checked and the object created under one per-workspace lock (two requests at once cannot both take the last
// place in this process); the hourly revision quota is a sliding window kept in the store, so deleting deployments
// does not give builds back and every control-plane replica sees the same window.
import { createHash } from 'node:crypto';
import { QuotaExceededError } from '../../lib/errors.ts';
import { AlreadyExistsError, StaleResourceVersionError } from '../../state/errors.ts';
import type { AuthObjectStore } from '../../state/auth-objects.ts';

export type QuotaLimits = {
  deployments: number;
  revisionsPerHour: number;
  listeners: number;
  integrations: number;
  authProviders: number;
};

/** 0 means no limit. */
export const DEFAULT_QUOTAS: QuotaLimits = {
  deployments: 25,
  revisionsPerHour: 60,
  listeners: 10,
  integrations: 25,
  authProviders: 10,
};

/** The flag and the environment variable of each quota (named in every 429). */
export const QUOTA_SETTINGS: Record<keyof QuotaLimits, { flag: string; env: string }> = {
  deployments: { flag: 'quota-deployments', env: 'AGENTPLANE_QUOTA_DEPLOYMENTS' },
  revisionsPerHour: { flag: 'quota-revisions-per-hour', env: 'AGENTPLANE_QUOTA_REVISIONS_PER_HOUR' },
  listeners: { flag: 'quota-listeners', env: 'AGENTPLANE_QUOTA_LISTENERS' },
  integrations: { flag: 'quota-integrations', env: 'AGENTPLANE_QUOTA_INTEGRATIONS' },
  authProviders: { flag: 'quota-auth-providers', env: 'AGENTPLANE_QUOTA_AUTH_PROVIDERS' },
};

const NOUN: Record<Exclude<keyof QuotaLimits, 'revisionsPerHour'>, string> = {
  deployments: 'deployments',
  listeners: 'listeners',
  integrations: 'integrations',
  authProviders: 'auth providers',
};

type CountedQuota = keyof typeof NOUN;

const HOUR_MS = 3_600_000;
/** Retries of the window's compare-and-swap when other requests of the workspace write it at the same time. */
const MAX_ATTEMPTS = 20;

function setting(q: keyof QuotaLimits): string {
  const s = QUOTA_SETTINGS[q];
  return `--${s.flag}, ${s.env}`;
}

export type Quotas = ReturnType<typeof createQuotas>;

export function createQuotas(deps: { store: AuthObjectStore; limits?: QuotaLimits; now?: () => number }) {
  const limits = deps.limits ?? DEFAULT_QUOTAS;
  const now = deps.now ?? Date.now;
  const { store } = deps;
  const locks = new Map<string, Promise<unknown>>();

  function withLock<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = locks.get(key) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => undefined);
    locks.set(key, tail);
    void tail.then(() => {
      if (locks.get(key) === tail) locks.delete(key);
    });
    return next;
  }

  const windowName = (tenant: string) => `revisions-${createHash('sha256').update(tenant).digest('hex').slice(0, 40)}`;

  function parseTimes(record: string | undefined): number[] {
    if (!record) return [];
    try {
      const v = (JSON.parse(record) as { times?: unknown }).times;
      return Array.isArray(v) ? v.filter((t): t is number => typeof t === 'number') : [];
    } catch {
      return [];
    }
  }

  /** Applies `change` to the tenant's window of revision start times (compare-and-swap, retried). */
  function updateWindow(tenant: string, change: (times: number[]) => number[]): Promise<void> {
    // Serialized in this process; the compare-and-swap below settles races with other replicas.
    return withLock(`revisions\0${tenant}`, () => writeWindow(tenant, change));
  }

  async function writeWindow(tenant: string, change: (times: number[]) => number[]): Promise<void> {
    const name = windowName(tenant);
    for (let attempt = 0; ; attempt++) {
      const current = await store.getAuthObject('usage', name);
      const times = change(parseTimes(current?.record));
      const record = JSON.stringify({ times });
      try {
        if (current) await store.replaceAuthObject({ ...current, record });
        // Nothing secret in it; `sealed` only has to be non-empty for the stores to accept the record.
        else await store.createAuthObject({ kind: 'usage', name, tenant, record, sealed: 'none' });
        return;
      } catch (err) {
        const raced = err instanceof StaleResourceVersionError || err instanceof AlreadyExistsError;
        if (!raced || attempt >= MAX_ATTEMPTS) throw err;
      }
    }
  }

  return {
    limits,

    /**
     * Runs `create` when the workspace holds fewer than its quota of `quota` (counted by `count`); otherwise a 429
     * and nothing is written. Check and create run under one lock per workspace and quota.
     */
    admit<T>(tenant: string, quota: CountedQuota, count: () => Promise<number>, create: () => Promise<T>): Promise<T> {
      const limit = limits[quota];
      if (!limit) return create();
      return withLock(`${quota}\0${tenant}`, async () => {
        const held = await count();
        if (held >= limit) {
          throw new QuotaExceededError(
            `Quota reached: this workspace has ${held} ${NOUN[quota]}, its quota is ${limit} (${setting(quota)}). ` +
              `Delete one first, or ask the operator to raise the quota.`,
            QUOTA_SETTINGS[quota].flag,
          );
        }
        return create();
      });
    },

    /**
     * Takes one place in the workspace's hourly revision window, or throws a 429 with the seconds until the oldest
     * start leaves the window. Resolves to a function that gives the place back (the revision was not made).
     */
    async reserveRevision(tenant: string): Promise<() => Promise<void>> {
      const limit = limits.revisionsPerHour;
      if (!limit) return async () => undefined;
      let at = 0;
      await updateWindow(tenant, (times) => {
        at = now();
        const recent = times.filter((t) => t > at - HOUR_MS && t <= at + HOUR_MS).sort((a, b) => a - b);
        if (recent.length >= limit) {
          const retryAfter = (recent[recent.length - limit]! + HOUR_MS - at) / 1000;
          throw new QuotaExceededError(
            `Quota reached: this workspace started ${recent.length} revisions in the last hour, its quota is ` +
              `${limit} per hour (${setting('revisionsPerHour')}). Retry in ${Math.ceil(retryAfter)} s.`,
            QUOTA_SETTINGS.revisionsPerHour.flag,
            retryAfter,
          );
        }
        return [...recent, at];
      });
      return async () => {
        await updateWindow(tenant, (times) => {
          const i = times.indexOf(at);
          return i < 0 ? times : [...times.slice(0, i), ...times.slice(i + 1)];
        });
      };
    },
  };
}
