// Server-sent events responses: headers, a heartbeat comment after 5 s without events (proxies keep the
// connection), writes that wait for a client whose socket buffer is full, up to the stall timeout, after which the
// client is disconnected (it can resume).
import type { FastifyReply, FastifyRequest } from 'fastify';
import { disconnectSignal } from './reply.ts';

const HEARTBEAT_MS = 5_000;

/** Starts the SSE response; `write` resolves false once the client is gone or was dropped for not reading. */
export function openSse(req: FastifyRequest, reply: FastifyReply, location: string | null, stallMs: number) {
  const signal = disconnectSignal(req, reply);
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    ...(location ? { 'content-location': location, location: `${location}/stream` } : {}),
  });
  // Now, not with the first event: a client waits for the headers before it counts the stream as open (the
  // protocol SDK's subscribe resolves then), and a quiet thread may send nothing for a while.
  res.flushHeaders();
  let lastWrite = Date.now();
  const beat = setInterval(() => {
    if (Date.now() - lastWrite >= HEARTBEAT_MS - 50 && !res.writableNeedDrain && !res.destroyed) {
      res.write(': heartbeat\n\n');
      lastWrite = Date.now();
    }
  }, HEARTBEAT_MS / 5);
  beat.unref();
  /** Writes frames (one writev); resolves false once the client is gone or was dropped for not reading. */
  const write = async (chunks: Array<string | Buffer>): Promise<boolean> => {
    if (signal.aborted || res.destroyed) return false;
    if (!chunks.length) return true;
    lastWrite = Date.now();
    res.cork();
    for (const c of chunks) res.write(c);
    res.uncork();
    if (!res.writableNeedDrain) return true;
    // The socket's buffer is full: wait for the client to take it, up to the stall timeout.
    const drained = await new Promise<boolean>((resolve) => {
      const done = (v: boolean) => {
        clearTimeout(timer);
        res.off('drain', onDrain);
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      };
      const onDrain = () => done(true);
      const onAbort = () => done(false);
      const timer = setTimeout(() => done(false), stallMs);
      res.once('drain', onDrain);
      signal.addEventListener('abort', onAbort, { once: true });
    });
    if (!drained && !signal.aborted) {
      req.log.warn(
        { stall_ms: stallMs },
        'stream client stopped reading; disconnecting it (it can resume with Last-Event-ID)',
      );
      res.destroy();
    }
    return drained;
  };
  const end = () => {
    clearInterval(beat);
    if (!res.destroyed) res.end();
  };
  /** Ends the response without its last chunk: the client sees a broken stream, not a finished one. */
  const cut = () => {
    clearInterval(beat);
    res.destroy();
  };
  return { signal, write, end, cut };
}
