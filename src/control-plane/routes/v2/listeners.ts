// Listeners v2: registered data planes. Workspace keys manage the records; a listener (with its listener key) long
// polls /watch for what to run and posts /report with what happened. Registered under /v2 and /api-host/v2.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ForbiddenError } from '../../../lib/errors.ts';
import {
  Listener,
  ListenerCreate,
  ListenerDeleteQuery,
  ListenerGitCredential,
  ListenerGitCredentialRequest,
  ListenerKeyCreate,
  ListenerKeyCreated,
  ListenerList,
  ListenerParams,
  ListenerPatch,
  ListenerReport,
  ListenerReportResult,
  ListenerWatchHeaders,
  ListenerWatchQuery,
} from '../../../api/schemas/listeners.ts';
import { ErrorBody } from '../../../api/schemas/common.ts';
import type { ListenerService } from '../../services/listeners/index.ts';

const errors = { 400: ErrorBody, 401: ErrorBody, 403: ErrorBody, 404: ErrorBody, 409: ErrorBody, 422: ErrorBody };
const upstream = { 502: ErrorBody, 503: ErrorBody };
const security = [{ apiKey: [], tenantId: [] }];
const tags = ['listeners'];

/** Workspace keys only: a listener key may not manage listeners. */
function requireWorkspaceKey(req: FastifyRequest): string {
  if (req.principal!.listenerId) throw new ForbiddenError('A listener key may only call its own listener endpoints.');
  return req.principal!.tenant;
}

/** The listener itself (its key) or a workspace key. */
function requireListenerOrWorkspace(req: FastifyRequest, id: string): string {
  const p = req.principal!;
  if (p.listenerId && p.listenerId !== id)
    throw new ForbiddenError('A listener key may only call its own listener endpoints.');
  return p.tenant;
}

/**
 * The listener's own key only: a watch answer carries the environment values of its deployments, which no workspace
 * key can read anywhere else in the API.
 */
function requireOwnListenerKey(req: FastifyRequest, id: string): string {
  const p = req.principal!;
  if (p.listenerId !== id)
    throw new ForbiddenError(
      `Only a key of listener ${id} may call this endpoint (create one with POST /v2/listeners/${id}/keys).`,
    );
  return p.tenant;
}

export const listenerRoutes =
  (service: ListenerService): FastifyPluginAsyncZod =>
  async (app) => {
    app.get('/listeners', { schema: { tags, security, response: { 200: ListenerList, ...errors } } }, async (req) =>
      service.list(requireWorkspaceKey(req)),
    );

    app.post(
      '/listeners',
      { schema: { tags, security, body: ListenerCreate, response: { 201: Listener, ...errors } } },
      async (req, reply) => reply.code(201).send(await service.create(requireWorkspaceKey(req), req.body)),
    );

    app.get(
      '/listeners/:listener_id',
      { schema: { tags, security, params: ListenerParams, response: { 200: Listener, ...errors } } },
      async (req) => service.get(requireListenerOrWorkspace(req, req.params.listener_id), req.params.listener_id),
    );

    app.patch(
      '/listeners/:listener_id',
      {
        schema: { tags, security, params: ListenerParams, body: ListenerPatch, response: { 200: Listener, ...errors } },
      },
      async (req) => service.patch(requireWorkspaceKey(req), req.params.listener_id, req.body),
    );

    app.delete(
      '/listeners/:listener_id',
      {
        schema: {
          tags,
          security,
          params: ListenerParams,
          querystring: ListenerDeleteQuery,
          response: { 204: z.null(), ...errors },
        },
      },
      async (req, reply) => {
        await service.delete(requireWorkspaceKey(req), req.params.listener_id, req.query.cascade === 'true');
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/listeners/:listener_id/keys',
      {
        schema: {
          tags,
          summary: 'Create a key for this listener (its workspace, its endpoints only); shown once',
          security,
          params: ListenerParams,
          body: ListenerKeyCreate,
          response: { 201: ListenerKeyCreated, ...errors },
        },
      },
      async (req, reply) =>
        reply.code(201).send(await service.createKey(requireWorkspaceKey(req), req.params.listener_id, req.body.name)),
    );

    app.get(
      '/listeners/:listener_id/watch',
      {
        schema: {
          tags,
          summary: 'Long poll for the deployments this listener runs; answers when they differ from `since`',
          security,
          params: ListenerParams,
          querystring: ListenerWatchQuery,
          headers: ListenerWatchHeaders,
        },
      },
      async (req) => {
        const tenant = requireOwnListenerKey(req, req.params.listener_id);
        let closed = false;
        req.raw.once('close', () => (closed = true));
        return service.watch(tenant, req.params.listener_id, req.query.since, req.query.timeout * 1000, {
          agentVersion: req.headers['x-agentplane-version'],
          closed: () => closed,
        });
      },
    );

    app.post(
      '/listeners/:listener_id/report',
      {
        schema: {
          tags,
          summary: "A data plane's statuses, URLs and log lines for the deployments assigned to it",
          security,
          params: ListenerParams,
          body: ListenerReport,
          response: { 200: ListenerReportResult, ...errors },
        },
      },
      async (req) =>
        service.report(requireOwnListenerKey(req, req.params.listener_id), req.params.listener_id, req.body),
    );

    app.post(
      '/listeners/:listener_id/git-credential',
      {
        schema: {
          tags,
          summary:
            'A fresh GitHub App token to clone the repository of a deployment assigned to this listener (never a stored credential)',
          security,
          params: ListenerParams,
          body: ListenerGitCredentialRequest,
          response: { 200: ListenerGitCredential, ...errors, ...upstream },
        },
      },
      async (req, reply) => {
        const tenant = requireListenerOrWorkspace(req, req.params.listener_id);
        const credential = await service.gitCredential(tenant, req.params.listener_id, req.body);
        return reply.header('cache-control', 'no-store').send(credential);
      },
    );
  };
