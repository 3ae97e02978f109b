// Condition helpers in the Kubernetes style: lastTransitionTime moves only when a condition's status flips.
import type { Condition } from './meta.ts';

export type ConditionInput = Omit<Condition, 'lastTransitionTime'> & { lastTransitionTime?: string };

export function findCondition(conditions: Condition[] | undefined, type: string): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

/** Returns a new list with `cond` set; keeps the old lastTransitionTime unless the status changed. */
export function setCondition(conditions: Condition[] | undefined, cond: ConditionInput, now = new Date()): Condition[] {
  const list = conditions ?? [];
  const old = list.find((c) => c.type === cond.type);
  const lastTransitionTime =
    old && old.status === cond.status ? old.lastTransitionTime : (cond.lastTransitionTime ?? now.toISOString());
  const next: Condition = { ...cond, lastTransitionTime };
  return old ? list.map((c) => (c.type === cond.type ? next : c)) : [...list, next];
}

export function isConditionTrue(conditions: Condition[] | undefined, type: string): boolean {
  return findCondition(conditions, type)?.status === 'True';
}

/** True when setting `cond` would change anything (so status writes can be skipped when nothing changed). */
export function conditionChanged(conditions: Condition[] | undefined, cond: ConditionInput): boolean {
  const old = findCondition(conditions, cond.type);
  return (
    !old ||
    old.status !== cond.status ||
    old.reason !== cond.reason ||
    old.message !== cond.message ||
    old.observedGeneration !== cond.observedGeneration
  );
}
