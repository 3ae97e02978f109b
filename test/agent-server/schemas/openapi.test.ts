// The OpenAPI document is generated from the same zod schemas that validate requests.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../helpers/harness.ts';

describe('OpenAPI document', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ store: 'embedded' });
  });
  afterAll(async () => h?.close());

  it('lists the routes with their request schemas', async () => {
    const res = await h.app.inject({ method: 'GET', url: '/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/threads',
        '/threads/{thread_id}/runs',
        '/threads/{thread_id}/runs/{run_id}/join',
        '/threads/{thread_id}/state',
        '/assistants/search',
        '/runs/wait',
        '/threads/{thread_id}/runs/stream',
      ]),
    );
    const body = doc.paths['/threads/{thread_id}/runs'].post.requestBody.content['application/json'].schema;
    expect(body.required).toContain('assistant_id');
    expect(body.properties.multitask_strategy.anyOf ?? body.properties.multitask_strategy.enum).toBeTruthy();
  });
});
