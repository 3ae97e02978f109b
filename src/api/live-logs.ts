// The serving agent's log as the control plane streams it (GET /v2/deployments/{id}/logs/stream, server-sent events),
// turned into lines, resumed where it broke off when the connection drops.
import { setTimeout as sleep } from 'node:timers/promises';
import type { LogEntry } from './schemas/deployment-views.ts';
import { ApiError, ConnectionError, reason, type Transport } from './transport.ts';

/** A line of the serving agent's log, with the revision it came from. */
export type LiveLogLine = LogEntry & { revision_id: string; revision_number: number };

export type LiveLogQuery = {
  tail: number;
  signal: AbortSignal;
  /** Called before each try to resume a dropped stream, with the try's number and why the stream broke. */
  onResume?: (attempt: number, why: string) => void;
};

/** Tries in a row to resume a dropped log stream before giving up (about 30 s with the backoff). */
const RESUME_TRIES = 10;

/**
 * The stream as lines: a connection that drops (a restart of the control plane, a proxy's idle cut) is opened again
 * with the id of the last line read (Last-Event-ID), so nothing comes twice and nothing is missed; `onResume` says
 * each try. It ends at the control plane's `end` event (the deployment deleted), when `signal` aborts, or after
 * RESUME_TRIES failed tries in a row. The first connection is not retried: a wrong URL says so at once.
 */
export async function* liveLogs(http: Transport, path: string, q: LiveLogQuery): AsyncGenerator<LiveLogLine> {
  let lastId: string | undefined;
  let opened = false;
  let tries = 0;
  for (;;) {
    let broke: unknown;
    try {
      for await (const event of openLiveLogs(http, path, q, lastId)) {
        if (event.type === 'end') return;
        opened = true;
        tries = 0;
        if (event.type === 'open') continue;
        lastId = event.id ?? lastId;
        yield event.line;
      }
      broke = new Error('the stream ended without its end event');
    } catch (err) {
      if (q.signal.aborted) return;
      // A refusal (404: deleted meanwhile; 401: the key revoked) is an answer, not a drop.
      if (err instanceof ApiError || !opened) throw err;
      broke = err;
    }
    if (q.signal.aborted) return;
    if (++tries > RESUME_TRIES) {
      throw new ConnectionError(`the control plane at ${http.url} broke off the log stream: ${reason(broke)}`);
    }
    q.onResume?.(tries, reason(broke));
    await sleep(Math.min(250 * 2 ** (tries - 1), 5_000), undefined, { signal: q.signal }).catch(() => undefined);
  }
}

async function* openLiveLogs(
  http: Transport,
  path: string,
  q: LiveLogQuery,
  lastId: string | undefined,
): AsyncGenerator<{ type: 'open' } | { type: 'log'; id: string | undefined; line: LiveLogLine } | { type: 'end' }> {
  const res = await http.open('GET', path, {
    query: { tail: q.tail },
    accept: 'text/event-stream',
    headers: lastId ? { 'last-event-id': lastId } : {},
    signal: q.signal,
    timeoutMs: 0,
  });
  yield { type: 'open' };
  // Events are `id:`, `event:` and one `data:` line of JSON, a blank line after each (the control plane writes
  // them so); heartbeat comments and other fields are skipped. Small enough not to need an SSE library.
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const fields = buffer.slice(0, end).split('\n');
      buffer = buffer.slice(end + 2);
      const field = (name: string) =>
        fields.filter((l) => l.startsWith(`${name}:`)).map((l) => l.slice(name.length + 1).trimStart());
      const type = field('event')[0];
      if (type === 'end') return yield { type: 'end' };
      const data = field('data').join('\n');
      if (data) yield { type: 'log', id: field('id')[0], line: JSON.parse(data) as LiveLogLine };
    }
  }
}
