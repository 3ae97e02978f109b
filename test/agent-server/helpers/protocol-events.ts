// Thread-protocol events as a subscription of the SDK yields them, and reading one until its run ends.

export interface ProtocolEvent {
  event_id?: string;
  seq?: number;
  method: string;
  params: { namespace: string[]; data: Record<string, unknown> & { event?: string } };
}

/** The root's terminal lifecycle event: the run completed, was interrupted or failed. */
export const isRootEnd = (e: ProtocolEvent): boolean =>
  e.method === 'lifecycle' &&
  e.params.namespace.length === 0 &&
  ['completed', 'interrupted', 'failed'].includes(String(e.params.data.event));

/** Events of a subscription (an iterator, or anything async-iterable) up to the root's terminal lifecycle event. */
export async function untilEnd(sub: AsyncIterator<ProtocolEvent> | unknown): Promise<ProtocolEvent[]> {
  const it =
    typeof (sub as AsyncIterator<ProtocolEvent>).next === 'function'
      ? (sub as AsyncIterator<ProtocolEvent>)
      : (sub as AsyncIterable<ProtocolEvent>)[Symbol.asyncIterator]();
  const out: ProtocolEvent[] = [];
  for (;;) {
    const { value, done } = await it.next();
    if (done) throw new Error(`subscription ended before the run did: ${JSON.stringify(out.map((e) => e.method))}`);
    out.push(value);
    if (isRootEnd(value)) return out;
  }
}
