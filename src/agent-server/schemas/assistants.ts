// Assistants: create, patch, search, count, versions, and the graph's schemas, subgraphs and drawing.
import { z } from 'zod';
import { AssistantParams, Config, MAX_OFFSET, SortOrder, boolish, obj, uuid } from './common.ts';

export const AssistantCreate = z.object({
  graph_id: z.string().min(1),
  assistant_id: uuid.nullish(),
  config: Config.nullish(),
  context: obj.nullish(),
  metadata: obj.nullish(),
  if_exists: z.enum(['raise', 'do_nothing']).nullish(),
  name: z.string().nullish(),
  description: z.string().nullish(),
});

export const AssistantPatch = z.object({
  graph_id: z.string().min(1).nullish(),
  config: Config.nullish(),
  context: obj.nullish(),
  metadata: obj.nullish(),
  name: z.string().nullish(),
  description: z.string().nullish(),
});

export const AssistantSearch = z.object({
  graph_id: z.string().nullish(),
  name: z.string().nullish(),
  metadata: obj.nullish(),
  limit: z.number().int().min(1).max(1000).default(10),
  offset: z.number().int().min(0).max(MAX_OFFSET).default(0),
  sort_by: z.enum(['assistant_id', 'graph_id', 'name', 'created_at', 'updated_at']).nullish(),
  sort_order: SortOrder.nullish(),
  select: z.array(z.string()).nullish(),
});

export const AssistantCount = z.object({
  graph_id: z.string().nullish(),
  name: z.string().nullish(),
  metadata: obj.nullish(),
});

export const AssistantVersionsQuery = z.object({
  limit: z.number().int().min(1).max(1000).default(10),
  offset: z.number().int().min(0).max(MAX_OFFSET).default(0),
  metadata: obj.nullish(),
});
export const AssistantLatest = z.object({ version: z.number().int().min(1) });

export const AssistantDeleteQuery = z.object({ delete_threads: boolish.default(false) });

export const SubgraphParams = AssistantParams.extend({ namespace: z.string().min(1) });
export const SubgraphQuery = z.object({ recurse: boolish.default(false) });

export const GraphQuery = z.object({
  xray: z.union([z.coerce.number().int(), boolish]).optional(),
});
