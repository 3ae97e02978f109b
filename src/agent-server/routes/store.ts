// The long-term memory store (LangGraph's BaseStore) over HTTP, as the platform serves it to the SDK's
// client.store: put/get/delete an item, search items under a namespace prefix, list namespaces. Graphs reach
// the same items through config.store / getStore() (see storage/items.ts).
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { StoreItem } from '../storage/types.ts';
import type { RouteDeps } from './deps.ts';
import { StoreDelete, StoreGetQuery, StoreNamespaces, StorePut, StoreSearch } from '../schemas/store.ts';

const publicItem = (i: StoreItem) => ({
  namespace: i.namespace,
  key: i.key,
  value: i.value,
  created_at: i.created_at,
  updated_at: i.updated_at,
});

export const storeRoutes =
  (deps: RouteDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const items = deps.service.store;

    app.put('/store/items', { schema: { body: StorePut } }, async (req, reply) => {
      const { namespace, key, value, index, ttl } = req.body;
      await items.put(namespace, key, value, { index: index ?? undefined, ttl: ttl ?? null });
      return reply.code(204).send();
    });

    app.get('/store/items', { schema: { querystring: StoreGetQuery } }, async (req, reply) => {
      const { namespace, key, refresh_ttl } = req.query;
      const item = await items.get(namespace, key, { refresh_ttl });
      // A missing item is `null` (the SDK's getItem answers null), not a 404.
      return reply.type('application/json').send(item ? JSON.stringify(publicItem(item)) : 'null');
    });

    app.delete('/store/items', { schema: { body: StoreDelete } }, async (req, reply) => {
      await items.delete(req.body.namespace, req.body.key);
      return reply.code(204).send();
    });

    app.post('/store/items/search', { schema: { body: StoreSearch.optional() } }, async (req) => {
      const q = StoreSearch.parse(req.body ?? {});
      const found = await items.search({
        namespace_prefix: q.namespace_prefix,
        filter: q.filter ?? undefined,
        limit: q.limit,
        offset: q.offset,
        query: q.query ?? undefined,
        refresh_ttl: q.refresh_ttl ?? undefined,
      });
      return { items: found.map((i) => ({ ...publicItem(i), score: i.score ?? null })) };
    });

    app.post('/store/namespaces', { schema: { body: StoreNamespaces.optional() } }, async (req) => {
      const q = StoreNamespaces.parse(req.body ?? {});
      const namespaces = await items.listNamespaces({
        prefix: q.prefix ?? undefined,
        suffix: q.suffix ?? undefined,
        max_depth: q.max_depth ?? undefined,
        limit: q.limit,
        offset: q.offset,
      });
      return { namespaces };
    });
  };
