// A WebSocket subscription's id carries its filter (after a random part that keeps two equal filters apart), so a
// client that lost its socket can name its subscriptions to any replica (subscription.reconnect) and get them back
// without the server keeping anything per connection. An id is the client's own filter, nothing more: one it made
// up restores only what it could have subscribed to, and passes the same schema and bounds.
import { randomUUID } from 'node:crypto';
import { SubscriptionFilter } from '../schemas/streams.ts';
import type { EventFilter } from './session.ts';

const LiveFilter = SubscriptionFilter.omit({ since: true });

export const subscriptionIdOf = (filter: EventFilter): string =>
  `${randomUUID()}.${Buffer.from(JSON.stringify(filter)).toString('base64url')}`;

/** The filter a subscription id carries; null when the id is none this server gave out. */
export function filterOfSubscriptionId(id: string): EventFilter | null {
  const dot = id.indexOf('.');
  if (dot < 0) return null;
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(id.slice(dot + 1), 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  const parsed = LiveFilter.safeParse(json);
  return parsed.success ? parsed.data : null;
}
