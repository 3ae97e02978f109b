// The revision log routes `langgraph deploy` polls (a deployment is a "project" there): build and deploy logs of a
// revision, or the deploy logs of whatever the deployment serves, as {logs, next_offset} pages. The same store and
// tenancy as GET /v2/deployments/{id}/revisions/{rid}/logs; POST with a JSON body as the CLI sends it, GET with a
// query string for anyone else.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { NotFoundError } from '../../../lib/errors.ts';
import type { DeploymentService } from '../../services/deployments/index.ts';
import { DeploymentErrorBody, LogPage } from '../../../api/schemas/deployment-views.ts';
import { LogsQuery } from '../../../api/schemas/deployment-queries.ts';

const security = [{ apiKey: [], tenantId: [] }];
const errors = {
  400: DeploymentErrorBody,
  401: DeploymentErrorBody,
  403: DeploymentErrorBody,
  404: DeploymentErrorBody,
  422: DeploymentErrorBody,
};

/** What the CLI sends: order, limit and the offset a previous page answered (null or absent on the first page). */
const LogRequest = LogsQuery.omit({ type: true }).extend({ offset: LogsQuery.shape.offset.nullable() }).passthrough();
const ProjectParams = z.object({ project_id: z.string() });
const ProjectRevisionParams = z.object({ project_id: z.string(), revision_id: z.string() });

type LogRequest = z.infer<typeof LogRequest>;

export const projectLogRoutes =
  (service: DeploymentService): FastifyPluginAsyncZod =>
  async (app) => {
    const tenantOf = (req: FastifyRequest): string => req.principal!.tenant;
    const page = (tenant: string, id: string, rid: string, type: 'build' | 'deploy', q: LogRequest) =>
      service.logs(tenant, id, rid, {
        type,
        limit: q.limit,
        order: q.order,
        limit_bytes: q.limit_bytes,
        ...(q.offset ? { offset: q.offset } : {}),
      });

    for (const type of ['build', 'deploy'] as const) {
      const path = `/projects/:project_id/revisions/:revision_id/${type}_logs`;
      const schema = { tags: ['revisions'], security, params: ProjectRevisionParams };
      app.post(
        path,
        { schema: { ...schema, body: LogRequest.prefault({}), response: { 200: LogPage, ...errors } } },
        (req) => page(tenantOf(req), req.params.project_id, req.params.revision_id, type, req.body),
      );
      app.get(path, { schema: { ...schema, querystring: LogRequest, response: { 200: LogPage, ...errors } } }, (req) =>
        page(tenantOf(req), req.params.project_id, req.params.revision_id, type, req.query),
      );
    }

    // Deploy logs of the revision the deployment serves (or, before any serves, of its newest).
    const current = async (tenant: string, id: string): Promise<string> => {
      const dep = await service.get(tenant, id);
      const rid = dep.active_revision_id ?? dep.latest_revision_id;
      if (!rid) throw new NotFoundError(`Deployment ${id} has no revision yet.`);
      return rid;
    };
    const schema = { tags: ['revisions'], security, params: ProjectParams };
    app.post(
      '/projects/:project_id/deploy_logs',
      { schema: { ...schema, body: LogRequest.prefault({}), response: { 200: LogPage, ...errors } } },
      async (req) =>
        page(
          tenantOf(req),
          req.params.project_id,
          await current(tenantOf(req), req.params.project_id),
          'deploy',
          req.body,
        ),
    );
    app.get(
      '/projects/:project_id/deploy_logs',
      { schema: { ...schema, querystring: LogRequest, response: { 200: LogPage, ...errors } } },
      async (req) =>
        page(
          tenantOf(req),
          req.params.project_id,
          await current(tenantOf(req), req.params.project_id),
          'deploy',
          req.query,
        ),
    );
  };
