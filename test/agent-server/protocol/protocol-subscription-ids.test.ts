// Subscription ids that carry their filter (subscription.reconnect restores them on any replica): the filter comes
// back as it went in, two equal filters get two ids, and an id nobody was given (garbage, or a made-up filter the
// subscribe command would refuse) restores nothing.
import { describe, expect, it } from 'vitest';
import { filterOfSubscriptionId, subscriptionIdOf } from '../../../src/agent-server/protocol/subscription-ids.ts';

describe('subscription ids', () => {
  it('carry their filter back, one id per subscription', () => {
    const filter = { channels: ['messages', 'custom:progress'], namespaces: [['inner:1']], depth: 2 };
    const id = subscriptionIdOf(filter);
    expect(filterOfSubscriptionId(id)).toEqual(filter);
    expect(subscriptionIdOf(filter)).not.toBe(id);
  });

  it.each([
    ['no filter part', 'made-up'],
    ['not base64 JSON', 'x.%%%'],
    ['a channel the protocol has not', `x.${Buffer.from('{"channels":["secrets"]}').toString('base64url')}`],
    ['no channels', `x.${Buffer.from('{"channels":[]}').toString('base64url')}`],
    ['a JSON that is no filter', `x.${Buffer.from('[1,2]').toString('base64url')}`],
  ])('restore nothing from an id with %s', (_what, id) => {
    expect(filterOfSubscriptionId(id)).toBeNull();
  });
});
