// Deployments v2: deployments, revisions, redeploy and logs. Registered under /v2 and /api-host/v2.
import { once } from 'node:events';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { AppError, BadRequestError } from '../../../lib/errors.ts';
import { NO_PUSH_REGISTRY } from '../../services/source-uploads/messages.ts';
import { mintAccessToken } from '../../../lib/deployment-token.ts';
import { liveLogEventId, type DeploymentService } from '../../services/deployments/index.ts';
import type { Principal } from '../../api-keys/keys.ts';
import { DeploymentCreate, DeploymentPatch } from '../../../api/schemas/deployments.ts';
import {
  AccessToken,
  BulkDeleteResult,
  Deployment,
  DeploymentErrorBody,
  DeploymentList,
  LogPage,
  Revision,
  RevisionList,
} from '../../../api/schemas/deployment-views.ts';
import {
  BulkDeleteQuery,
  DeploymentParams,
  ListDeploymentsQuery,
  ListRevisionsQuery,
  LiveLogsQuery,
  LogsQuery,
  RevisionParams,
} from '../../../api/schemas/deployment-queries.ts';

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
  }
}

const tenantOf = (req: FastifyRequest): string => req.principal!.tenant;

const security = [{ apiKey: [], tenantId: [] }];
const errors = {
  400: DeploymentErrorBody,
  401: DeploymentErrorBody,
  403: DeploymentErrorBody,
  404: DeploymentErrorBody,
  409: DeploymentErrorBody,
  422: DeploymentErrorBody,
  429: DeploymentErrorBody,
};

export const deploymentRoutes =
  (service: DeploymentService, deploymentTokenKey?: Buffer, pushTokens = false): FastifyPluginAsyncZod =>
  async (app) => {
    // A short-lived credential for calling this one deployment (the console's playground uses it): whoever may read
    // the deployment gets one, and it works on no other deployment, on no other workspace, and not here.
    app.post(
      '/deployments/:deployment_id/access-tokens',
      {
        schema: {
          tags: ['deployments'],
          security,
          params: DeploymentParams,
          response: { 200: AccessToken, ...errors, 503: DeploymentErrorBody },
        },
      },
      async (req) => {
        const dep = await service.get(tenantOf(req), req.params.deployment_id);
        if (!deploymentTokenKey) {
          throw new AppError(
            'This control plane has no deployment token key (--deployment-token-key, AGENTPLANE_DEPLOYMENT_TOKEN_KEY): it cannot make access tokens for agents.',
            503,
          );
        }
        const { token, expiresAt } = mintAccessToken(deploymentTokenKey, tenantOf(req), dep.id);
        return { token, expires_at: expiresAt.toISOString(), deployment_id: dep.id };
      },
    );

    app.post(
      '/deployments',
      {
        schema: { tags: ['deployments'], security, body: DeploymentCreate, response: { 201: Deployment, ...errors } },
        // `langgraph deploy` with a local docker build creates an internal_docker deployment and then asks for a push
        // token: where none are handed out, say at once, in one line, why that cannot work here.
        preValidation: async (req) => {
          if (!pushTokens && (req.body as { source?: unknown } | null)?.source === 'internal_docker') {
            throw new BadRequestError(NO_PUSH_REGISTRY);
          }
        },
      },
      async (req, reply) => reply.code(201).send(await service.create(tenantOf(req), req.body)),
    );

    app.get(
      '/deployments',
      {
        schema: {
          tags: ['deployments'],
          security,
          querystring: ListDeploymentsQuery,
          response: { 200: DeploymentList, ...errors },
        },
      },
      async (req) => service.list(tenantOf(req), req.query),
    );

    app.delete(
      '/deployments',
      {
        schema: {
          tags: ['deployments'],
          security,
          querystring: BulkDeleteQuery,
          response: { 200: BulkDeleteResult, 207: BulkDeleteResult, ...errors },
        },
      },
      async (req, reply) => {
        const result: z.infer<typeof BulkDeleteResult> = { deleted: [], errors: [] };
        for (const id of req.query.deployment_ids) {
          try {
            await service.delete(tenantOf(req), id);
            result.deleted.push(id);
          } catch (err) {
            const e = err as { status?: number; message: string };
            if (!e.status || e.status >= 500) throw err;
            result.errors.push({ id, detail: e.message });
          }
        }
        return reply.code(result.errors.length ? 207 : 200).send(result);
      },
    );

    app.get(
      '/deployments/:deployment_id',
      {
        schema: { tags: ['deployments'], security, params: DeploymentParams, response: { 200: Deployment, ...errors } },
      },
      async (req) => service.get(tenantOf(req), req.params.deployment_id),
    );

    app.patch(
      '/deployments/:deployment_id',
      {
        schema: {
          tags: ['deployments'],
          security,
          params: DeploymentParams,
          body: DeploymentPatch,
          response: { 200: Deployment, ...errors },
        },
      },
      async (req) => service.patch(tenantOf(req), req.params.deployment_id, req.body),
    );

    app.delete(
      '/deployments/:deployment_id',
      { schema: { tags: ['deployments'], security, params: DeploymentParams, response: { 204: z.null(), ...errors } } },
      async (req, reply) => {
        await service.delete(tenantOf(req), req.params.deployment_id);
        return reply.code(204).send(null);
      },
    );

    app.get(
      '/deployments/:deployment_id/revisions',
      {
        schema: {
          tags: ['revisions'],
          security,
          params: DeploymentParams,
          querystring: ListRevisionsQuery,
          response: { 200: RevisionList, ...errors },
        },
      },
      async (req) => service.listRevisions(tenantOf(req), req.params.deployment_id, req.query),
    );

    app.post(
      '/deployments/:deployment_id/revisions',
      { schema: { tags: ['revisions'], security, params: DeploymentParams, response: { 201: Revision, ...errors } } },
      async (req, reply) => reply.code(201).send(await service.createRevision(tenantOf(req), req.params.deployment_id)),
    );

    app.get(
      '/deployments/:deployment_id/revisions/:revision_id',
      { schema: { tags: ['revisions'], security, params: RevisionParams, response: { 200: Revision, ...errors } } },
      async (req) => service.getRevision(tenantOf(req), req.params.deployment_id, req.params.revision_id),
    );

    app.post(
      '/deployments/:deployment_id/revisions/:revision_id/redeploy',
      { schema: { tags: ['revisions'], security, params: RevisionParams, response: { 200: Deployment, ...errors } } },
      async (req) => service.redeploy(tenantOf(req), req.params.deployment_id, req.params.revision_id),
    );

    app.get(
      '/deployments/:deployment_id/revisions/:revision_id/logs',
      {
        schema: {
          tags: ['revisions'],
          security,
          params: RevisionParams,
          querystring: LogsQuery,
          response: { 200: LogPage, ...errors },
        },
      },
      async (req) => service.logs(tenantOf(req), req.params.deployment_id, req.params.revision_id, req.query),
    );

    // The serving agent's log lines as server-sent events (`event: log`, data: the line with its revision), the last
    // `tail` first; it follows the traffic to each new revision and ends when the deployment is deleted.
    app.get(
      '/deployments/:deployment_id/logs/stream',
      {
        schema: {
          tags: ['deployments'],
          security,
          params: DeploymentParams,
          querystring: LiveLogsQuery,
          response: { ...errors },
        },
      },
      async (req, reply) => {
        const gone = new AbortController();
        // Before the stream opens: a missing deployment is a 404 like any other, a malformed Last-Event-ID a 400.
        const after = req.headers['last-event-id'];
        const lines = await service.liveLogs(tenantOf(req), req.params.deployment_id, {
          tail: req.query.tail,
          ...(typeof after === 'string' ? { after } : {}),
          signal: gone.signal,
        });
        reply.hijack();
        const res = reply.raw;
        res.on('close', () => gone.abort());
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        res.flushHeaders();
        // Proxies close a connection that says nothing for long: a comment line every 15 s.
        const beat = setInterval(() => res.write(': heartbeat\n\n'), 15_000);
        beat.unref();
        try {
          for await (const line of lines) {
            // The id lets a client that lost the connection resume after this line (Last-Event-ID), as EventSource does.
            if (!res.write(`id: ${liveLogEventId(line)}\nevent: log\ndata: ${JSON.stringify(line)}\n\n`)) {
              await Promise.race([once(res, 'drain'), once(gone.signal, 'abort')]);
            }
          }
          // Said so a client can tell the deployment's end from a dropped connection (which it resumes).
          if (!gone.signal.aborted) res.write('event: end\ndata: {}\n\n');
        } catch (err) {
          if (!gone.signal.aborted) req.log.warn({ err }, 'live log stream ended by an error');
        } finally {
          clearInterval(beat);
          res.end();
        }
      },
    );
  };
