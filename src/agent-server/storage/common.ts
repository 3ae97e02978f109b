// Small pieces both adapters share, so their behaviour cannot drift apart (the run rules: run-rules.ts).
import { ValidationError } from '../../lib/errors.ts';
import {
  TERMINAL_RUN_STATUSES,
  type Json,
  type RunOutcome,
  type RunRecord,
  type Thread,
  type ThreadHead,
} from './types.ts';

/** The statuses of a run that has ended, as an SQL list ('error', 'success', ...) for either store's statements. */
export const TERMINAL_STATUSES_SQL = [...TERMINAL_RUN_STATUSES].map((s) => `'${s}'`).join(', ');

/** RunStore.getWithValues' answer from a run and its thread's values: the values count once the run has ended. */
export function withEndedValues(run: RunRecord, values: Json | null): { run: RunRecord; values?: Json | null } {
  return TERMINAL_RUN_STATUSES.has(run.status) ? { run, values } : { run };
}

/**
 * The thread's values after a run as JSON text: undefined leaves them unchanged, null clears them. A store writes
 * it through its codec (sealed when data is encrypted at rest).
 */
export function outcomeValuesText(outcome: Pick<RunOutcome, 'values' | 'valuesJson'>): string | null | undefined {
  if (outcome.valuesJson !== undefined) return outcome.valuesJson;
  if (outcome.values === undefined) return undefined;
  return outcome.values === null ? null : JSON.stringify(outcome.values);
}
/** ISO 8601 with an explicit UTC offset, as the platform's records show them. */
export function isoNow(ms = Date.now()): string {
  return new Date(ms).toISOString().replace('Z', '+00:00');
}

// The sort keys searches accept. Each is also the name of its column in both stores: orderBy() puts only these
// into SQL, never a key it was not given here.
export const ASSISTANT_SORT = new Set(['assistant_id', 'graph_id', 'name', 'created_at', 'updated_at']);
export const THREAD_SORT = new Set(['thread_id', 'status', 'created_at', 'updated_at', 'state_updated_at']);

/** A thread's columns other than its values, the same in both stores' tables (what a ThreadHead is read from). */
export const THREAD_HEAD_COLUMNS: readonly string[] = [
  'thread_id',
  'created_at',
  'updated_at',
  'state_updated_at',
  'metadata',
  'status',
  'config',
  'interrupts',
  'error',
];

/** A row's thread without its values (ThreadHead), by a store's own row mapping; the values are never parsed. */
export function threadHeadOf<R extends object>(toThread: (row: R) => Thread, row: R): ThreadHead {
  const { values: _values, ...head } = toThread({ ...row, values: null });
  return head;
}

/** Sealed values cannot be compared in SQL (the LangGraph platform refuses filters on encrypted fields too). */
export function encryptedValuesFilter(): ValidationError {
  const msg =
    'threads cannot be searched by their values while agent data is encrypted at rest (LANGGRAPH_AES_KEY); ' +
    'search by metadata instead';
  return new ValidationError(`values: ${msg}`, [{ loc: ['body', 'values'], msg, type: 'value_error' }]);
}
