// Streams: the run and thread SSE streams' queries and headers, and the thread protocol's subscription filter.
import { isSupportedChannel } from '@langchain/langgraph/stream';
import { z } from 'zod';
import { API_STREAM_MODES } from '../streams/stream-modes.ts';
import { THREAD_STREAM_MODES } from '../streams/thread-events.ts';
import { RunParams } from './common.ts';
import { JoinQuery } from './runs.ts';

const modeList = <T extends string>(valid: readonly T[]) => {
  const one = z.string().refine((m): m is T => (valid as readonly string[]).includes(m), {
    message: `unknown stream mode; valid modes: ${valid.join(', ')}`,
  });
  // The SDK sends a list as JSON (stream_mode=["a","b"]); a repeated parameter or a single mode work too.
  const fromJson = (v: unknown) => {
    if (typeof v !== 'string' || !v.startsWith('[')) return v;
    try {
      return JSON.parse(v) as unknown;
    } catch {
      return v;
    }
  };
  return z
    .preprocess(
      fromJson,
      z
        .union([one, z.array(one)], {
          error: `unknown stream mode; valid modes: ${valid.join(', ')}`,
        })
        .optional(),
    )
    .transform((v) => (v === undefined ? undefined : ((Array.isArray(v) ? v : [v]) as T[])));
};
/**
 * namespace (SDK streamNamespaces, repeated): only these namespaces of the run, "" the root graph, a subgraph's as
 * its event names carry it (`node:task|node:task`, or node names alone).
 */
const namespaces = z.preprocess(
  (v) => (typeof v === 'string' ? [v] : v),
  z.array(z.string().max(2000)).max(100).optional(),
);
export const StreamNamespaceQuery = z.object({ namespace: namespaces });
/**
 * checkpoint_id (SDK joinStream checkpointId) is taken and not acted on: the SDK lets a server send the whole run
 * instead, as it does here (docs/agent-server.md).
 */
export const JoinStreamQuery = JoinQuery.extend({
  stream_mode: modeList(API_STREAM_MODES),
  namespace: namespaces,
  checkpoint_id: z.string().max(200).optional(),
});
// The SDK sends stream_mode; the platform's OpenAPI names it stream_modes: either is read.
export const ThreadStreamQuery = z.object({
  stream_mode: modeList([...THREAD_STREAM_MODES, ...API_STREAM_MODES]),
  stream_modes: modeList([...THREAD_STREAM_MODES, ...API_STREAM_MODES]),
});
// -1 is "from the start": React useStream sends it when it joins or reconnects to a run it has no event id of.
export const LastEventId = z
  .object({
    'last-event-id': z
      .string()
      .regex(/^(?:-1|\d{1,15})$/, 'must be the id of an event the stream sent (a number), or -1 for the start')
      .optional(),
  })
  .passthrough();
export const RunIdParams = RunParams.pick({ run_id: true });

/** A thread protocol subscription (POST /threads/{id}/stream/events). */
export const SubscriptionFilter = z.object({
  channels: z
    .array(
      z.string().refine(isSupportedChannel, {
        message:
          'unknown channel; valid: values, updates, messages, tools, lifecycle, input, checkpoints, tasks, custom, custom:<name>',
      }),
    )
    .min(1)
    .max(50),
  namespaces: z
    .array(z.array(z.string().max(500)).max(50))
    .max(50)
    .optional(),
  depth: z.number().int().nonnegative().max(1000).optional(),
  since: z.number().int().nonnegative().optional(),
});
