// The run create's statement keeps one generic plan per connection. Postgres plans a named statement anew at every
// execution while a custom plan (one made for the call's parameters) looks cheaper than the generic one; a single
// form whose NULL parameters switched subqueries off looked so on every call, and planning it cost about ten times
// its execution. Each form of runCreateStatement must settle on the generic plan after Postgres' five trial plans,
// with real tables and any mix of parameters it is sent.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { openPostgresStorage } from '../../../../src/agent-server/storage/postgres/index.ts';
import { runCreateStatement } from '../../../../src/agent-server/storage/postgres/runs/create.ts';
import type { Storage } from '../../../../src/agent-server/storage/types.ts';
import { createTestDatabase } from '../../helpers/pg.ts';

describe('run create statement plans (postgres)', () => {
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  let storage: Storage;
  let client: pg.Client;

  beforeAll(async () => {
    db = await createTestDatabase();
    // The schema, as a server makes it; the statements then go through a connection of the test's own.
    storage = await openPostgresStorage({ databaseUrl: db.url, poolSize: 2 });
    client = new pg.Client({ connectionString: db.url });
    await client.connect();
  });
  afterAll(async () => {
    await client?.end();
    await storage?.close();
    await db?.drop();
  });

  it('every form settles on a generic plan, whatever mix of threads and parameters it gets', async () => {
    const threads: string[] = [];
    for (let i = 0; i < 6; i++) {
      threads.push((await storage.threads.create({ thread_id: randomUUID(), metadata: {} }, 'raise')).thread_id);
    }
    const forms = [
      [false, false],
      [false, true],
      [true, false],
      [true, true],
    ] as const;
    const calls = 20;
    for (const [claiming, check] of forms) {
      for (let i = 0; i < calls; i++) {
        // Existing threads (free or already busy), missing ones, delays and strategies, as creates send them.
        const thread = i % 3 === 2 ? randomUUID() : threads[i % threads.length]!;
        await client.query({
          ...runCreateStatement('agentplane', claiming, check),
          values: [
            randomUUID(),
            thread,
            randomUUID(),
            '{}',
            JSON.stringify({ input: { i } }),
            i % 2 ? 'enqueue' : 'reject',
            '{}',
            'agentplane_events',
            claiming ? 0 : (i % 4) * 100,
            '{"type":"wake"}',
            claiming ? 'worker-1' : null,
            claiming ? 30 : 0,
            check ? String(1000 + i) : null,
          ],
        });
      }
    }
    const { rows } = await client.query(
      `SELECT name, generic_plans::int AS generic, custom_plans::int AS custom FROM pg_prepared_statements
       WHERE name LIKE 'ap_run_create%' ORDER BY name`,
    );
    expect(rows.map((r) => r.name)).toEqual([
      'ap_run_create_a_agentplane',
      'ap_run_create_agentplane',
      'ap_run_create_c_agentplane',
      'ap_run_create_ca_agentplane',
    ]);
    for (const r of rows) {
      expect({ name: r.name, custom: r.custom }).toEqual({ name: r.name, custom: 5 });
      expect(r.generic).toBe(calls - 5);
    }
    // The creates did what they say: runs on the existing threads, nothing on the missing ones.
    const made = await client.query(
      `SELECT count(*)::int AS n, count(DISTINCT thread_id)::int AS t FROM agentplane.runs`,
    );
    expect(made.rows[0].t).toBeGreaterThan(0);
    expect(made.rows[0].t).toBeLessThanOrEqual(threads.length);
  });
});
