// crypto.getRandomValues() on an executor thread, from a pool. LangGraph makes every checkpoint and task id from
// random bytes (uuid6/uuid4 through @langchain/core's rng: 16 bytes, one getRandomValues call each, some dozens a
// run), and each call into Node's Web Crypto costs ~1.2 µs: argument checks, then a call into the OpenSSL CSPRNG for
// 16 bytes. Node's own crypto.randomUUID() takes its bytes from a cache filled in bulk for the same reason.
//
// usePooledRandomValues() serves small Uint8Array requests (what id generators ask for) from a 4 KiB buffer that
// the original method refills from the same CSPRNG; each byte is handed out once and cleared in the pool as it is.
// Anything else (other typed arrays, larger requests, a call on another receiver) goes to the original method, so
// its errors (TypeMismatchError, QuotaExceededError, ERR_INVALID_THIS) are the same as before.
import { webcrypto } from 'node:crypto';

type Crypto = webcrypto.Crypto;
const POOLED = Symbol.for('agentplane.pooled-random');
const POOL_BYTES = 4096;
/** Requests up to this size come from the pool. */
const MAX_POOLED = 256;

export function usePooledRandomValues(): void {
  const c = globalThis.crypto as Crypto & { [POOLED]?: true };
  if (!c || c[POOLED]) return;
  const original = c.getRandomValues;
  const pool = new Uint8Array(POOL_BYTES);
  let used = POOL_BYTES;
  Object.defineProperty(c, POOLED, { value: true });
  Object.defineProperty(c, 'getRandomValues', {
    configurable: true,
    enumerable: true,
    writable: true,
    value: function getRandomValues<T extends ArrayBufferView | null>(this: unknown, array: T): T {
      if (this !== c || !(array instanceof Uint8Array) || array.byteLength > MAX_POOLED)
        return original.call(this as Crypto, array as never) as unknown as T;
      const n = array.byteLength;
      if (used + n > POOL_BYTES) {
        original.call(c, pool);
        used = 0;
      }
      const bytes = pool.subarray(used, used + n);
      array.set(bytes);
      bytes.fill(0);
      used += n;
      return array;
    },
  });
}
