// POST /internal/truncate: empties threads, assistants and store items for an API test suite run against this
// server (the reference servers' suite resets its server this way). Registered only with --test-truncate: it deletes
// everything of everyone, so a deployment never serves it.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { TruncateService } from '../services/truncate.ts';

const TruncateBody = z
  .strictObject({
    runs: z.boolean().optional(),
    threads: z.boolean().optional(),
    assistants: z.boolean().optional(),
    checkpointer: z.boolean().optional(),
    store: z.boolean().optional(),
  })
  .default({});

export const internalRoutes =
  (truncate: TruncateService): FastifyPluginAsyncZod =>
  async (app) => {
    app.post('/internal/truncate', { schema: { body: TruncateBody, hide: true } }, async (req) => ({
      ok: true,
      deleted: await truncate.truncate(req.body),
    }));
  };
