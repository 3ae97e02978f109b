import { describe, expect, it } from 'vitest';
import {
  BUSY_THREAD_DETAIL,
  cancelEffect,
  decideCreate,
  decideDelete,
  decideSweep,
  mayFinish,
  mayRollback,
  threadErrorAfter,
  threadStatusAfter,
  threadStatusAfterDequeue,
  threadStatusAfterRemoval,
  threadStatusAfterStateUpdate,
} from '../../../src/agent-server/storage/run-rules.ts';
import type {
  CancelAction,
  MultitaskStrategy,
  RunOutcome,
  RunStatus,
} from '../../../src/agent-server/storage/types.ts';

const pending = { run_id: 'p', status: 'pending' as const };
const running = { run_id: 'r', status: 'running' as const };

describe('decideCreate', () => {
  const table: [string, MultitaskStrategy, Array<{ run_id: string; status: RunStatus }>, unknown][] = [
    ['free thread, reject', 'reject', [], { kind: 'insert', cancel: [] }],
    ['free thread, interrupt', 'interrupt', [], { kind: 'insert', cancel: [] }],
    ['busy thread, reject: 409', 'reject', [running], { kind: 'reject', detail: BUSY_THREAD_DETAIL }],
    ['queued run, reject: 409', 'reject', [pending], { kind: 'reject', detail: BUSY_THREAD_DETAIL }],
    ['busy thread, enqueue: nothing cancelled', 'enqueue', [running, pending], { kind: 'insert', cancel: [] }],
    [
      'interrupt flags the running run and ends the queued one',
      'interrupt',
      [running, pending],
      {
        kind: 'insert',
        cancel: [
          { run_id: 'r', effect: 'flag', action: 'interrupt', event: 'cancel' },
          { run_id: 'p', effect: 'interrupt', event: 'run_done' },
        ],
      },
    ],
    [
      'rollback flags the running run and deletes the queued one',
      'rollback',
      [running, pending],
      {
        kind: 'insert',
        cancel: [
          { run_id: 'r', effect: 'flag', action: 'rollback', event: 'cancel' },
          { run_id: 'p', effect: 'delete', event: 'run_done' },
        ],
      },
    ],
  ];
  it.each(table)('%s', (_name, strategy, inflight, expected) => {
    expect(decideCreate(strategy, inflight)).toEqual(expected);
  });
});

describe('cancelEffect', () => {
  const table: [RunStatus, CancelAction, string][] = [
    ['pending', 'interrupt', 'interrupt'],
    ['pending', 'rollback', 'delete'],
    ['running', 'interrupt', 'flag'],
    ['running', 'rollback', 'flag'],
    ['success', 'interrupt', 'none'],
    ['error', 'rollback', 'none'],
    ['interrupted', 'interrupt', 'none'],
    ['timeout', 'rollback', 'none'],
  ];
  it.each(table)('%s run, %s -> %s', (status, action, effect) => {
    const out = cancelEffect({ run_id: 'x', status }, action);
    expect(out.effect).toBe(effect);
    if (out.effect === 'flag') expect(out).toMatchObject({ action, event: 'cancel' });
    if (out.effect === 'delete' || out.effect === 'interrupt') expect(out.event).toBe('run_done');
  });
});

describe('threadStatusAfter (a run ended)', () => {
  const table: [string, Pick<RunOutcome, 'status' | 'interrupted' | 'refused'>, boolean, string][] = [
    ['success, nothing queued', { status: 'success' }, false, 'idle'],
    ['success, more queued', { status: 'success' }, true, 'busy'],
    ['error wins over queued runs', { status: 'error' }, true, 'error'],
    ['timeout is an error', { status: 'timeout' }, false, 'error'],
    ['waiting on a node', { status: 'success', interrupted: true }, false, 'interrupted'],
    ['waiting on a node wins over queued runs', { status: 'success', interrupted: true }, true, 'interrupted'],
    ['cancelled (interrupted), nothing queued', { status: 'interrupted' }, false, 'idle'],
    ['cancelled (interrupted), more queued', { status: 'interrupted' }, true, 'busy'],
    ['error wins over an interrupt', { status: 'error', interrupted: true }, false, 'error'],
    [
      'refused resume: still waiting on its node',
      { status: 'error', refused: true, interrupted: true },
      false,
      'interrupted',
    ],
    ['refused resume, nothing waiting, more queued', { status: 'error', refused: true }, true, 'busy'],
  ];
  it.each(table)('%s', (_name, outcome, more, status) => {
    expect(threadStatusAfter(outcome, more)).toBe(status);
  });
});

describe('thread status after other changes', () => {
  it.each([
    [true, 'busy'],
    [false, 'idle'],
  ] as const)('rolled back, more queued %s -> %s', (more, status) => {
    expect(threadStatusAfterRemoval(more)).toBe(status);
  });
  it.each([
    [true, null],
    [false, 'idle'],
  ] as const)('pending run removed, still in flight %s -> %s', (inflight, status) => {
    expect(threadStatusAfterDequeue(inflight)).toBe(status);
  });
  const stateTable: [boolean, boolean, string | null][] = [
    [true, true, null],
    [true, false, null],
    [false, true, 'interrupted'],
    [false, false, 'idle'],
  ];
  it.each(stateTable)('state update, in flight %s, interrupted %s -> %s', (inflight, interrupted, status) => {
    expect(threadStatusAfterStateUpdate(inflight, interrupted)).toBe(status);
  });
  it('keeps the error of a failed run on the thread and clears it otherwise', () => {
    expect(threadErrorAfter({ status: 'error', error: { error: 'X' } })).toEqual({ error: 'X' });
    expect(threadErrorAfter({ status: 'error' })).toEqual({});
    expect(threadErrorAfter({ status: 'timeout', error: { error: 'T' } })).toBeNull();
    expect(threadErrorAfter({ status: 'success' })).toBeNull();
    // A refused resume ran nothing: the thread is left without an error.
    expect(threadErrorAfter({ status: 'error', refused: true, error: { error: 'UnknownInterruptError' } })).toBeNull();
  });
});

describe('decideDelete', () => {
  const table: [RunStatus, unknown][] = [
    ['running', { kind: 'conflict', detail: 'Run x is running; cancel it first' }],
    ['pending', { kind: 'delete', settleThread: true }],
    ['success', { kind: 'delete', settleThread: false }],
    ['error', { kind: 'delete', settleThread: false }],
    ['interrupted', { kind: 'delete', settleThread: false }],
  ];
  it.each(table)('%s run', (status, expected) => {
    expect(decideDelete({ run_id: 'x', status })).toEqual(expected);
  });
});

describe('decideSweep (lease expired)', () => {
  const table: [string, number, CancelAction | null, unknown][] = [
    ['first attempt: requeued', 1, null, { kind: 'requeue' }],
    ['second attempt: requeued', 2, null, { kind: 'requeue' }],
    [
      'last attempt: ends in error',
      3,
      null,
      {
        kind: 'end',
        outcome: {
          status: 'error',
          error: { error: 'WorkerLost', message: 'Run abandoned after 3 attempts: its worker stopped responding' },
        },
      },
    ],
    ['cancelled with interrupt: ends interrupted', 1, 'interrupt', { kind: 'end', outcome: { status: 'interrupted' } }],
    [
      'cancelled with interrupt on the last attempt: interrupted, not an error',
      3,
      'interrupt',
      {
        kind: 'end',
        outcome: { status: 'interrupted' },
      },
    ],
    ['cancelled with rollback: rolled back', 1, 'rollback', { kind: 'rollback' }],
    ['cancelled with rollback on the last attempt: rolled back', 3, 'rollback', { kind: 'rollback' }],
  ];
  it.each(table)('%s', (_name, attempt, cancel_action, expected) => {
    expect(decideSweep({ attempt, cancel_action }, 3)).toEqual(expected);
  });
});

describe('who may end a run', () => {
  const table: [string, { status: RunStatus; worker_id: string | null } | null, boolean][] = [
    ['its worker', { status: 'running', worker_id: 'w' }, true],
    ['lease lost to another worker', { status: 'running', worker_id: 'other' }, false],
    ['requeued meanwhile', { status: 'pending', worker_id: null }, false],
    ['already finished', { status: 'success', worker_id: null }, false],
    ['deleted with its thread', null, false],
  ];
  it.each(table)('finish: %s', (_name, run, ok) => {
    expect(mayFinish(run, 'w')).toBe(ok);
  });
  it('rollback: its worker, or anyone when nobody is named', () => {
    expect(mayRollback({ worker_id: 'w' }, 'w')).toBe(true);
    expect(mayRollback({ worker_id: 'other' }, 'w')).toBe(false);
    expect(mayRollback({ worker_id: 'other' }, null)).toBe(true);
    expect(mayRollback(null, null)).toBe(false);
  });
});
