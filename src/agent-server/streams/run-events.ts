// How runs started over the thread protocol store their events: LangGraph's protocol-native (v3) stream chunks,
// each under `v2:<mode>` plus the usual `|ns` suffix, so the run-centric streams (routes/stream.ts), whose clients
// expect the older payload shapes, can tell them apart and leave them out. Runs started with the run API store
// their models' messages in that form too (`v2:messages`, runs/protocol-messages.ts), beside their own events.
import { STREAM_EVENTS_V3_MODES } from '@langchain/langgraph/stream';

export const PROTOCOL_GRAPH_MODES: string[] = [...STREAM_EVENTS_V3_MODES];

const PREFIX = 'v2:';

export const protocolEventName = (mode: string, ns: string[]): string =>
  `${PREFIX}${mode}${ns.length ? `|${ns.join('|')}` : ''}`;

export const isProtocolEventName = (event: string): boolean => event.startsWith(PREFIX);

/** The mode, namespace and format of a stored event's name. */
export function parseStoredName(event: string): { mode: string; namespace: string[]; native: boolean } {
  const [head = '', ...namespace] = event.split('|');
  const native = head.startsWith(PREFIX);
  return { mode: native ? head.slice(PREFIX.length) : head, namespace, native };
}
