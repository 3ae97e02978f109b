// Long waits (join, wait) answer JSON but may take minutes: after a short while the reply switches to a
// chunked body that writes "\n" keep-alives (JSON parsers skip leading whitespace) until the result is ready.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { serializeError, stringify } from '../serde.ts';

export interface WaitOptions {
  keepAliveMs: number;
  headers?: Record<string, string>;
  onDisconnect?: () => void;
}

/** An AbortSignal that fires when the client goes away before we answered. */
export function disconnectSignal(request: FastifyRequest, reply: FastifyReply): AbortSignal {
  const ac = new AbortController();
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) ac.abort();
  });
  void request;
  return ac.signal;
}

export async function sendAfterWait(
  reply: FastifyReply,
  result: Promise<unknown>,
  opts: WaitOptions,
): Promise<FastifyReply | void> {
  let timer: NodeJS.Timeout | undefined;
  const early = await Promise.race([
    result.then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    ),
    new Promise<null>((r) => (timer = setTimeout(() => r(null), Math.min(opts.keepAliveMs, 1_000)))),
  ]);
  clearTimeout(timer);
  if (early && 'value' in early) {
    for (const [k, v] of Object.entries(opts.headers ?? {})) reply.header(k, v);
    return reply.type('application/json').send(stringify(early.value));
  }
  if (early && 'error' in early) throw early.error;
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, { 'content-type': 'application/json', ...(opts.headers ?? {}) });
  res.write('\n');
  const beat = setInterval(() => res.write('\n'), opts.keepAliveMs);
  try {
    const value = await result;
    res.end(stringify(value));
  } catch (err) {
    res.end(stringify({ __error__: serializeError(err) }));
  } finally {
    clearInterval(beat);
  }
}
