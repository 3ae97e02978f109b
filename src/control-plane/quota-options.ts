// The per-workspace quota flags, shared by `control-plane` and `dev` (services/quotas.ts applies them).
import { z } from 'zod';
import { UsageError, type PlainOption } from '../lib/cli-args.ts';
import { DEFAULT_QUOTAS, QUOTA_SETTINGS, type QuotaLimits } from './services/quotas.ts';

const DESCRIPTIONS: Record<keyof QuotaLimits, string> = {
  deployments: 'Deployments one workspace may have (0 = no limit)',
  revisionsPerHour: 'Revisions (builds) one workspace may start in any hour (0 = no limit)',
  listeners: 'Listeners one workspace may register (0 = no limit)',
  integrations: 'Integrations (git credentials, GitHub installations) one workspace may have (0 = no limit)',
  authProviders: 'OAuth providers of the auth service one workspace may have (0 = no limit)',
};

const KEYS = Object.keys(QUOTA_SETTINGS) as (keyof QuotaLimits)[];

export const quotaOptions: Record<string, PlainOption> = Object.fromEntries(
  KEYS.map((k) => [
    QUOTA_SETTINGS[k].flag,
    {
      type: 'string',
      description: DESCRIPTIONS[k],
      default: String(DEFAULT_QUOTAS[k]),
      env: [QUOTA_SETTINGS[k].env],
    } satisfies PlainOption,
  ]),
);

const count = z.coerce.number().int().min(0).max(1_000_000);

/** The quotas from flags and environment; a value that is not a whole number >= 0 is a usage error naming its flag. */
export function quotaLimitsFrom(pick: (name: string) => string | undefined): QuotaLimits {
  const out = {} as QuotaLimits;
  for (const k of KEYS) {
    const raw = pick(QUOTA_SETTINGS[k].flag);
    const parsed = count.safeParse(raw?.trim() === '' ? undefined : raw);
    if (!parsed.success) {
      throw new UsageError(`--${QUOTA_SETTINGS[k].flag}: must be a whole number, 0 or more (0 = no limit)`);
    }
    out[k] = parsed.data;
  }
  return out;
}
