// useObjectEnv (shims/thread-env.ts) on a real worker thread, as executor threads use it: the thread's environment
// keeps behaving as one (what is assigned reads back as a string, deletes, `in`, keys, child processes inherit it,
// the process's own environment is untouched), only reads get cheaper.
import { describe, expect, it } from 'vitest';
import { onThread as onAnyThread } from '../helpers/on-thread.ts';

/** Runs `body` (an async function body; `useObjectEnv` in scope) on a new worker thread and returns its result. */
const onThread = (body: string, env?: Record<string, string>) =>
  onAnyThread('agent-server/shims/thread-env.ts', ['useObjectEnv'], body, env);

describe('an executor thread environment as a plain object', () => {
  it('reads, writes, deletes and lists like the environment it replaces', async () => {
    const out = await onThread(
      `const before = process.env;
       process.env.AP_SET_BEFORE = 'kept';
       useObjectEnv();
       useObjectEnv(); // a second call changes nothing
       const e = process.env;
       e.AP_NUMBER = 5;
       e.AP_BOOL = false;
       e.AP_UNDEF = undefined;
       delete e.AP_GONE;
       let symbolThrows = false;
       try { e.AP_SYM = Symbol('x'); } catch { symbolThrows = true; }
       return {
         swapped: before !== e,
         fromSpawn: e.AP_FROM_PARENT,
         setBefore: e.AP_SET_BEFORE,
         number: e.AP_NUMBER, numberType: typeof e.AP_NUMBER,
         bool: e.AP_BOOL, undef: e.AP_UNDEF,
         gone: 'AP_GONE' in e,
         keys: Object.keys(e).filter((k) => k.startsWith('AP_')).sort(),
         symbolThrows,
       };`,
      { AP_FROM_PARENT: 'yes', AP_GONE: 'x' },
    );
    expect(out).toEqual({
      swapped: true,
      fromSpawn: 'yes',
      setBefore: 'kept',
      number: '5',
      numberType: 'string',
      bool: 'false',
      undef: 'undefined',
      gone: false,
      keys: ['AP_BOOL', 'AP_FROM_PARENT', 'AP_NUMBER', 'AP_SET_BEFORE', 'AP_UNDEF'],
      symbolThrows: true,
    });
  });

  it('is what child processes started on the thread inherit, and stays on the thread', async () => {
    const out = await onThread(
      `useObjectEnv();
       process.env.AP_CHILD_SEES = 'from-thread';
       const { execFileSync } = await import('node:child_process');
       return execFileSync(process.execPath, ['-e', 'process.stdout.write(process.env.AP_CHILD_SEES ?? "")']).toString();`,
    );
    expect(out).toBe('from-thread');
    expect(process.env.AP_CHILD_SEES).toBeUndefined();
  });
});
