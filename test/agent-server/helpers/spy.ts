// Seeing the calls a library's methods get (node-pg's Client.query, better-sqlite3's statements) without changing
// what they do: for tests that count or inspect the statements a store sends.
import Database from 'better-sqlite3';

export type Fn = (...a: unknown[]) => unknown;

/** Wraps target[method] so that `before` sees each call first; returns what puts the method back. */
export function wrapMethod(
  target: Record<string, Fn>,
  method: string,
  before: (self: unknown, args: unknown[]) => void,
): () => void {
  const original = target[method]!;
  target[method] = function (this: unknown, ...args: unknown[]) {
    before(this, args);
    return original.apply(this, args);
  };
  return () => void (target[method] = original);
}

/** The prototype of better-sqlite3's statements (get, all, run...): wrapping it sees every connection's statements. */
export function sqliteStatementPrototype(): Record<string, Fn> {
  return Object.getPrototypeOf(new Database(':memory:').prepare('SELECT 1')) as Record<string, Fn>;
}
