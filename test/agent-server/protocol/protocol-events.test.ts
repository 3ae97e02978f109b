// Stored run events -> thread-protocol events (src/agent-server/protocol/events.ts), a table of cases: lifecycle
// from a run's start and end, interrupts as input.requested once each, subgraph namespaces announced once,
// protocol-native and older event shapes, and ids that depend only on the stored ids (the same on every replica).
import { describe, expect, it } from 'vitest';
import {
  ProtocolMapper,
  SEQ_SLOTS,
  type ProtocolEvent,
  type RunFacts,
} from '../../../src/agent-server/protocol/events.ts';
import { runDoneEvent } from '../../../src/agent-server/streams/thread-events.ts';
import type { StoredStreamEvent } from '../../../src/agent-server/storage/types.ts';

const RUN = 'run-1';
let nextId = 1;
const stored = (event: string, data: unknown): StoredStreamEvent => ({
  id: nextId++,
  run_id: RUN,
  event,
  data: typeof data === 'string' ? data : JSON.stringify(data),
});
const done = () => {
  const [event, data] = runDoneEvent(RUN);
  return stored(event, data);
};

function mapper(end: RunFacts['status'] = 'success', error?: string) {
  return new ProtocolMapper({
    started: async () => ({ graphName: 'agent', status: 'running' }),
    ended: async () => ({ graphName: 'agent', status: end, ...(error ? { error } : {}) }),
  });
}

const brief = (events: ProtocolEvent[]) =>
  events.map((e) => [e.method, e.params.namespace.join('/'), e.params.data] as const);

describe('ProtocolMapper', () => {
  it.each([
    [
      'a run start',
      () => stored('metadata', { run_id: RUN, thread_id: 't', attempt: 1 }),
      [['lifecycle', '', { event: 'running', graph_name: 'agent' }]],
    ],
    ['values', () => stored('v2:values', { a: 1 }), [['values', '', { a: 1 }]]],
    ['custom', () => stored('v2:custom', { x: 1 }), [['custom', '', { payload: { x: 1 } }]]],
    [
      'an updates chunk',
      () => stored('v2:updates', { talk: { a: 2 } }),
      [['updates', '', { node: 'talk', values: { a: 2 } }]],
    ],
    [
      'the updates chunk of an interrupt (values carry it)',
      () => stored('v2:updates', { __interrupt__: [{ id: 'i' }] }),
      [],
    ],
    [
      'a content-block delta of a model inside a node (no lifecycle for the node)',
      () =>
        stored('v2:messages|talk:1', [
          { event: 'content-block-delta', index: 0, delta: { type: 'text-delta', text: 'H' } },
          { langgraph_node: 'talk' },
        ]),
      [['messages', 'talk:1', { event: 'content-block-delta', index: 0, delta: { type: 'text-delta', text: 'H' } }]],
    ],
    [
      "a run-API run's whole message, stored as one event: each of its events, with the run id",
      () =>
        stored('v2:messages|talk:1', [
          [
            { event: 'message-start', id: 'm' },
            { event: 'content-block-delta', index: 0, delta: { type: 'text-delta', text: 'Hi' } },
            { event: 'message-finish' },
          ],
          { langgraph_node: 'talk', run_id: 'r' },
        ]),
      [
        ['messages', 'talk:1', { event: 'message-start', id: 'm', run_id: 'r' }],
        [
          'messages',
          'talk:1',
          { event: 'content-block-delta', index: 0, delta: { type: 'text-delta', text: 'Hi' }, run_id: 'r' },
        ],
        ['messages', 'talk:1', { event: 'message-finish', run_id: 'r' }],
      ],
    ],
    ['a tuple of the older messages mode', () => stored('messages', [{ content: 'H' }, {}]), []],
    ['older values', () => stored('values', { a: 3 }), [['values', '', { a: 3 }]]],
    ['older partial messages', () => stored('messages/partial', [{ content: 'H' }]), []],
    ['an error (the run end tells)', () => stored('error', { error: 'E', message: 'boom' }), []],
    ['a thread state update', () => stored('state_update', { values: {} }), []],
  ] as const)('%s', async (_name, make, expected) => {
    expect(brief(await mapper().map(make()))).toEqual(expected);
  });

  it('tells input.answered when a run resuming interrupts by id starts (and nothing for other runs)', async () => {
    const answering = new ProtocolMapper({
      started: async () => ({ graphName: 'agent', status: 'running', answers: ['a'.repeat(32)] }),
      ended: async () => null,
    });
    expect(brief(await answering.map(stored('metadata', { run_id: RUN, thread_id: 't', attempt: 1 })))).toEqual([
      ['lifecycle', '', { event: 'running', graph_name: 'agent' }],
      ['input.answered', '', { interrupt_ids: ['a'.repeat(32)] }],
    ]);
    expect(brief(await mapper().map(stored('metadata', { run_id: RUN, thread_id: 't', attempt: 1 })))).toEqual([
      ['lifecycle', '', { event: 'running', graph_name: 'agent' }],
    ]);
  });

  it('announces each interrupt once, and sends the values without it', async () => {
    const m = mapper('interrupted');
    const chunk = { a: 1, __interrupt__: [{ id: 'int-1', value: { question: 'ok?' } }] };
    const first = await m.map(stored('v2:values', chunk));
    expect(brief(first)).toEqual([
      ['input.requested', '', { interrupt_id: 'int-1', payload: { question: 'ok?' }, value: { question: 'ok?' } }],
      ['values', '', { a: 1 }],
    ]);
    expect(brief(await m.map(stored('v2:values', chunk)))).toEqual([['values', '', { a: 1 }]]);
    expect(brief(await m.map(done()))).toEqual([['lifecycle', '', { event: 'interrupted', graph_name: 'agent' }]]);
  });

  it('starts a subgraph namespace once, ends it with the run, deepest first, then the root', async () => {
    const m = mapper();
    expect(brief(await m.map(stored('v2:values|inner:1|deeper:2', { a: 1 })))).toEqual([
      ['lifecycle', 'inner:1', { event: 'started', graph_name: 'inner' }],
      ['lifecycle', 'inner:1/deeper:2', { event: 'started', graph_name: 'deeper' }],
      ['values', 'inner:1/deeper:2', { a: 1 }],
    ]);
    expect(brief(await m.map(stored('v2:updates|inner:1', { talk: { a: 1 } })))).toEqual([
      ['updates', 'inner:1', { node: 'talk', values: { a: 1 } }],
    ]);
    expect(brief(await m.map(done()))).toEqual([
      ['lifecycle', 'inner:1/deeper:2', { event: 'completed', graph_name: 'deeper' }],
      ['lifecycle', 'inner:1', { event: 'completed', graph_name: 'inner' }],
      ['lifecycle', '', { event: 'completed', graph_name: 'agent' }],
    ]);
  });

  it('ends a failed run with its error, and says nothing of a run that has not ended', async () => {
    expect(brief(await mapper('error', 'boom').map(done()))).toEqual([
      ['lifecycle', '', { event: 'failed', error: 'boom', graph_name: 'agent' }],
    ]);
    expect(await mapper('running').map(done())).toEqual([]);
  });

  it('numbers events from the stored ids alone: two mappers agree, ids grow, event_id is the seq', async () => {
    const log = [
      stored('metadata', { run_id: RUN, thread_id: 't', attempt: 1 }),
      stored('v2:values|inner:1', { a: 1, __interrupt__: [{ id: 'i-9', value: 1 }] }),
      stored('v2:messages|inner:1|talk:2', [{ event: 'message-start', id: 'm' }, {}]),
      done(),
    ];
    const run = async () => {
      const m = mapper('interrupted');
      const out: ProtocolEvent[] = [];
      for (const e of log) out.push(...(await m.map(e)));
      return out.map(({ params: { timestamp: _t, ...params }, ...rest }) => ({ ...rest, params }));
    };
    const [one, two] = [await run(), await run()];
    expect(one).toEqual(two);
    const seqs = one.map((e) => e.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(new Set(seqs).size).toBe(seqs.length);
    for (const e of one) {
      expect(e.event_id).toBe(String(e.seq));
      expect(log.some((s) => Math.floor(e.seq / SEQ_SLOTS) === s.id)).toBe(true);
    }
  });
});
