// Bodies, answers and path parameters of the API keys v2 API (admin keys only): a key as listed, a key as created
// (with the key itself, shown once), and what creating one takes.
import { z } from 'zod';
import { isLabelValue } from '../../resources/index.ts';

const ApiKeyOut = z.object({
  id: z.string(),
  name: z.string(),
  tenants: z.array(z.string()),
  created_at: z.string(),
});
export const ApiKeyCreated = ApiKeyOut.extend({
  key: z.string().describe('The key itself: shown only in this answer'),
});

export const ApiKeyCreate = z
  .object({
    name: z
      .string()
      .min(1)
      .max(200)
      .regex(/^[^\p{Cc}]*$/u, 'must not contain control characters')
      .default('api-key'),
    tenants: z
      .array(
        z
          .string()
          .refine((t) => t === '*' || isLabelValue(t), 'a tenant id (1-63 letters, digits, "-", "_", ".") or "*"'),
      )
      .min(1)
      .max(100),
  })
  .strict();

export const KeyParams = z.object({ key_id: z.string().uuid() });

export const ApiKeyList = z.object({ resources: z.array(ApiKeyOut) });
