// Test files share their worker process (vitest `isolate: false`: modules are loaded once per worker, not once per
// file). What a file changes in the process as a whole is put back when it ends, so files cannot see each other's
// leftovers: the environment (loadGraphs copies a langgraph.json's `env` into it, as the agent server does) and
// the exit code an in-process CLI call may set.
//
// What a file must not change at all (process.env replaced by another object, global fetch or undici's dispatcher,
// fake timers, crypto.getRandomValues, the working directory, a signal or error listener left on `process`) is put
// back too, and fails the file that left it, naming what: otherwise the file that runs next in the same worker fails
// instead, in a way its own run alone never shows.
import { appendFileSync } from 'node:fs';
import { afterAll, expect } from 'vitest';

type Globals = Record<PropertyKey, unknown>;
const g = globalThis as Globals;
const UNDICI_DISPATCHER = Symbol.for('undici.globalDispatcher.1');
const REAL_ENV = Symbol.for('agentplane.test.process-env');
// Not 'exit': libraries add their own once, when first used (pino's flush on exit), and take it off themselves.
const PROCESS_EVENTS = ['SIGINT', 'SIGTERM', 'uncaughtException', 'unhandledRejection'] as const;

// This module runs again before each test file is imported, so a change made at a test file's top level counts too.
// The worker's own environment object is kept from the first file on.
g[REAL_ENV] ??= process.env;
const realEnv = g[REAL_ENV] as NodeJS.ProcessEnv;
const env: NodeJS.ProcessEnv = { ...process.env };

/** A process-wide value a file may use but must leave as it found it: how to read it and how to put it back. */
type Slot = { read: () => unknown; restore: (v: unknown) => void };
const onGlobal = (key: PropertyKey): Slot => ({ read: () => g[key], restore: (v) => (g[key] = v) });
const SLOTS: Record<string, Slot> = {
  'globalThis.fetch': onGlobal('fetch'),
  "undici's global dispatcher": onGlobal(UNDICI_DISPATCHER),
  'setTimeout (fake timers?)': onGlobal('setTimeout'),
  'setInterval (fake timers?)': onGlobal('setInterval'),
  'Date (fake timers?)': onGlobal('Date'),
  'crypto.getRandomValues': {
    read: () => (g.crypto as { getRandomValues?: unknown } | undefined)?.getRandomValues,
    restore: (v) =>
      Object.defineProperty(g.crypto, 'getRandomValues', { value: v, configurable: true, writable: true }),
  },
  'the working directory': { read: () => process.cwd(), restore: (v) => process.chdir(v as string) },
};
// `npm run test:cpu` (scripts/suite-cpu.ts) charges the CPU of each process to the file its worker runs: when each
// file starts (its imports included) and ends in this worker.
const cpuLog = process.env.AGENTPLANE_SUITE_CPU_LOG;
const span = (what: 'S' | 'E') => {
  if (cpuLog) appendFileSync(cpuLog, `${what} ${process.pid} ${Date.now()} ${expect.getState().testPath}\n`);
};
span('S');

const before = Object.fromEntries(Object.entries(SLOTS).map(([name, s]) => [name, s.read()]));
const listenersOf = (e: (typeof PROCESS_EVENTS)[number]) =>
  process.listeners(e as 'SIGINT') as ((...a: unknown[]) => void)[];
const listenersBefore = new Map(PROCESS_EVENTS.map((e) => [e, new Set(listenersOf(e))]));

afterAll(() => {
  span('E');
  const changed: string[] = [];
  if (process.env !== realEnv) {
    changed.push('process.env (replaced by another object)');
    process.env = realEnv;
  }
  for (const k of Object.keys(process.env)) if (!(k in env)) delete process.env[k];
  Object.assign(process.env, env);
  process.exitCode = undefined;
  for (const [name, slot] of Object.entries(SLOTS)) {
    // Something made on first use (undici makes its dispatcher at the first fetch) is not a change.
    if (before[name] === undefined || Object.is(slot.read(), before[name])) continue;
    changed.push(name);
    slot.restore(before[name]);
  }
  for (const [event, had] of listenersBefore) {
    const left = listenersOf(event).filter((l) => !had.has(l));
    if (!left.length) continue;
    changed.push(`${left.length} '${event}' listener(s) on process`);
    for (const l of left) process.removeListener(event, l);
  }
  if (changed.length)
    throw new Error(
      `this file left process-wide state changed for the files after it in its worker (put back now): ` +
        `${changed.join(', ')}; undo it in the file's afterAll`,
    );
});
