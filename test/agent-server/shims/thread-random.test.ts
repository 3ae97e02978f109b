// usePooledRandomValues (shims/thread-random.ts) on a real worker thread, as executor threads use it: small byte
// requests come from a pool of CSPRNG bytes, each byte handed out once; everything else, and every error, is Web
// Crypto's own.
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { onThread as onAnyThread } from '../helpers/on-thread.ts';

const require = createRequire(import.meta.url);
/** A package's entry as a URL the worker's entry file (in a temporary folder) can import. */
const entryOf = (pkg: string) => JSON.stringify(pathToFileURL(require.resolve(pkg)).href);

const onThread = (body: string) => onAnyThread('agent-server/shims/thread-random.ts', ['usePooledRandomValues'], body);

/** The error a call throws (Node's code, else its name: DOMException codes are numbers), or 'ok'. */
const CATCH = `const outcome = (f) => {
  try { f(); return 'ok'; } catch (e) { return typeof e.code === 'string' ? e.code : e.name; }
};`;

describe('pooled crypto.getRandomValues on an executor thread', () => {
  it('fills small byte arrays in place with bytes never handed out twice', async () => {
    const out = (await onThread(
      `usePooledRandomValues();
       const seen = new Set();
       let repeats = 0;
       const counts = new Array(256).fill(0);
       // 40 000 requests of 16 bytes: the 4 KiB pool is refilled many times over.
       for (let i = 0; i < 40000; i++) {
         const a = new Uint8Array(16);
         const same = crypto.getRandomValues(a);
         if (same !== a) return 'not the same array';
         const hex = Buffer.from(a).toString('hex');
         if (seen.has(hex)) repeats++;
         seen.add(hex);
         for (const b of a) counts[b]++;
       }
       const odd = [new Uint8Array(0), new Uint8Array(1), new Uint8Array(256), Buffer.alloc(33)].map((a) => {
         crypto.getRandomValues(a);
         return a.length;
       });
       return { repeats, min: Math.min(...counts), max: Math.max(...counts), odd };`,
    )) as { repeats: number; min: number; max: number; odd: number[] };
    expect(out.repeats).toBe(0);
    // 640 000 bytes: each value about 2500 times; a byte stuck at a value (or zeroed) would show far outside this.
    expect(out.min).toBeGreaterThan(2200);
    expect(out.max).toBeLessThan(2800);
    expect(out.odd).toEqual([0, 1, 256, 33]);
  });

  it('throws what Web Crypto throws, and serves what the pool does not take from Web Crypto', async () => {
    const out = await onThread(
      `${CATCH}
       const before = {
         float: outcome(() => crypto.getRandomValues(new Float32Array(4))),
         huge: outcome(() => crypto.getRandomValues(new Uint8Array(65537))),
         unbound: outcome(() => { const g = crypto.getRandomValues; g(new Uint8Array(4)); }),
         notView: outcome(() => crypto.getRandomValues([1, 2, 3])),
       };
       usePooledRandomValues();
       usePooledRandomValues(); // twice: still one pool
       const after = {
         float: outcome(() => crypto.getRandomValues(new Float32Array(4))),
         huge: outcome(() => crypto.getRandomValues(new Uint8Array(65537))),
         unbound: outcome(() => { const g = crypto.getRandomValues; g(new Uint8Array(4)); }),
         notView: outcome(() => crypto.getRandomValues([1, 2, 3])),
       };
       const big = crypto.getRandomValues(new Uint8Array(65536));
       const words = crypto.getRandomValues(new Uint32Array(64));
       return { before, after, bigNonZero: big.some((b) => b !== 0), wordsNonZero: words.some((w) => w !== 0) };`,
    );
    const o = out as { before: unknown; after: unknown; bigNonZero: boolean; wordsNonZero: boolean };
    expect(o.after).toEqual(o.before);
    expect(o.before).toEqual({
      float: 'TypeMismatchError',
      huge: 'QuotaExceededError',
      unbound: 'ERR_INVALID_THIS',
      notView: expect.any(String),
    });
    expect(o.bigNonZero).toBe(true);
    expect(o.wordsNonZero).toBe(true);
  });

  it('gives LangGraph ids as before (uuid6 / uuid4 through @langchain/core), all distinct', async () => {
    const out = (await onThread(
      `usePooledRandomValues();
       const { uuid6 } = await import(${entryOf('@langchain/langgraph-checkpoint')});
       const { v4 } = await import(${entryOf('@langchain/core/utils/uuid')});
       const ids = [];
       for (let i = 0; i < 5000; i++) ids.push(uuid6(-1), v4());
       return ids;`,
    )) as string[];
    expect(new Set(out).size).toBe(out.length);
    for (const id of out) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[46][0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  });
});
