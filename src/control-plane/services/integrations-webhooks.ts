// Build on push. Two signed webhooks make revisions of the deployments that follow the pushed branch with
// build_on_push: true: the GitHub App's (one endpoint for every installation, the App's webhook secret) and a generic
// one per plain git integration (its own secret; GitHub-style X-Hub-Signature-256, as Gitea and Forgejo send it).
// A delivery makes at most one revision per deployment however often it is sent again: it is known by its
// delivery id, by the commit it pushed, and by its exact body (the signature covers the body only, so a captured
// body may come back under any delivery id, with or without `after`).
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { BadRequestError, UnauthorizedError } from '../../lib/errors.ts';
import type { Logger } from '../../lib/logger.ts';
import { LABEL_TENANT, type AgentDeployment } from '../../resources/index.ts';
import type { PlatformState } from '../../state/types.ts';
import type { IntegrationRecord } from '../../state/integrations.ts';
import type { DeploymentService } from './deployments/index.ts';
import { githubRepoOf, type GitHubApp } from '../../git/github-app.ts';
import { repositoryPath } from '../../git/url.ts';
import type { IntegrationService } from './integrations/index.ts';

export type PushResult = { revisions: { deployment_id: string; revision_id: string }[]; repeated: number };

type PushPayload = {
  ref?: unknown;
  after?: unknown;
  deleted?: unknown;
  installation?: { id?: unknown };
  repository?: Record<string, unknown>;
};

const DELIVERY = /^[A-Za-z0-9._:-]{1,100}$/;

/** Constant-time check of "sha256=<hex>" against HMAC-SHA256(secret, body). */
export function signatureMatches(secret: string, body: string, signature: string | undefined): boolean {
  if (!signature || !/^sha256=[0-9a-f]{64}$/i.test(signature)) return false;
  const expected = createHmac('sha256', secret).update(body).digest();
  return timingSafeEqual(expected, Buffer.from(signature.slice(7), 'hex'));
}

function parsePush(body: string): PushPayload {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw new BadRequestError('The webhook payload is not JSON.');
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed))
    throw new BadRequestError('The webhook payload is not a JSON object.');
  return parsed as PushPayload;
}

function deliveryOf(id: string | undefined): string {
  if (!id || !DELIVERY.test(id)) throw new BadRequestError('A delivery id header (X-GitHub-Delivery) is required.');
  return id;
}

/** Branch a deployment follows: repo_ref "main" or "refs/heads/main" both follow pushes to refs/heads/main. */
const follows = (dep: AgentDeployment, ref: string) => {
  const r = dep.spec.sourceRevisionConfig.repoRef ?? '';
  return r === ref || `refs/heads/${r}` === ref;
};

export function createPushWebhooks(deps: {
  store: PlatformState;
  deployments: DeploymentService;
  integrations: IntegrationService;
  github?: GitHubApp;
  logger: Logger;
}) {
  const { store, deployments, integrations, github, logger } = deps;

  async function revisionsFor(
    integration: IntegrationRecord,
    ref: string,
    sameRepo: (repoUrl: string) => boolean,
    delivery: string,
    after: unknown,
    body: string,
  ): Promise<PushResult> {
    // GitHub signs the body, not the delivery header: a captured body sent again under a new delivery id is
    // recognised by its content and by the commit it pushed.
    const keys = [
      delivery,
      `body-${createHash('sha256').update(body).digest('base64url')}`,
      ...(typeof after === 'string' && /^[0-9a-f]{40,64}$/.test(after) ? [`sha-${after}`] : []),
    ];
    const { items } = await store.list('AgentDeployment', store.namespace, {
      labelSelector: `${LABEL_TENANT}=${integration.tenant}`,
    });
    const result: PushResult = { revisions: [], repeated: 0 };
    for (const dep of items) {
      const sc = dep.spec.sourceConfig;
      if (
        dep.spec.tenantId !== integration.tenant ||
        dep.metadata.deletionTimestamp ||
        sc.integrationId !== integration.id ||
        !sc.buildOnPush ||
        !sc.repoUrl ||
        !sameRepo(sc.repoUrl) ||
        !follows(dep, ref)
      )
        continue;
      const rev = await deployments.createRevisionOnPush(integration.tenant, dep.spec.deploymentId, keys);
      if (rev) result.revisions.push({ deployment_id: dep.spec.deploymentId, revision_id: rev.id });
      else result.repeated += 1;
    }
    logger.info(
      { integration: integration.id, delivery, created: result.revisions.length, repeated: result.repeated },
      'push webhook handled',
    );
    return result;
  }

  return {
    /** POST /v1/integrations/github/webhook: the App's deliveries; only push events make revisions. */
    async github(body: string, headers: Record<string, string | undefined>): Promise<PushResult | { ignored: string }> {
      if (!github?.settings.webhookSecret) throw new UnauthorizedError('No GitHub App webhook secret is configured.');
      if (!(await github.verifyWebhook(body, headers['x-hub-signature-256'])))
        throw new UnauthorizedError('Bad or missing X-Hub-Signature-256.');
      const payload = parsePush(body);
      const event = headers['x-github-event'];
      if (event === 'ping') return { ignored: 'ping' };
      if (event !== 'push') return { ignored: `event ${String(event)}` };
      const delivery = deliveryOf(headers['x-github-delivery']);
      const installationId = payload.installation?.id;
      const fullName = payload.repository?.full_name;
      if (typeof payload.ref !== 'string' || typeof installationId !== 'number' || typeof fullName !== 'string')
        throw new BadRequestError('A push payload needs ref, installation.id and repository.full_name.');
      if (payload.deleted === true) return { ignored: 'branch deleted' };
      const [owner] = await integrations.installationOwners(installationId);
      if (!owner) return { ignored: 'installation is no integration' };
      const same = (repoUrl: string) => {
        const r = githubRepoOf(github.settings.webUrl, repoUrl);
        return !!r && `${r.owner}/${r.name}`.toLowerCase() === fullName.toLowerCase();
      };
      return revisionsFor(owner, payload.ref, same, delivery, payload.after, body);
    },

    /** POST /v1/integrations/{id}/webhook: a plain git integration's push, signed with its own secret. */
    async generic(
      id: string,
      body: string,
      headers: Record<string, string | undefined>,
    ): Promise<PushResult | { ignored: string }> {
      const target = await integrations.webhookTarget(id);
      // Unknown id, no webhook, or a bad signature: all the same 401 (nothing about the id is revealed).
      const signature = headers['x-hub-signature-256'] ?? headers['x-agentplane-signature-256'];
      if (!target || !signatureMatches(target.secret, body, signature))
        throw new UnauthorizedError('Bad or missing X-Hub-Signature-256.');
      const payload = parsePush(body);
      const delivery = deliveryOf(
        headers['x-github-delivery'] ?? headers['x-gitea-delivery'] ?? headers['x-agentplane-delivery'],
      );
      if (typeof payload.ref !== 'string') throw new BadRequestError('A push payload needs ref.');
      if (payload.deleted === true) return { ignored: 'branch deleted' };
      // The pushed repository, when the payload names it (GitHub/Gitea: clone_url, ssh_url, html_url).
      const named = ['clone_url', 'ssh_url', 'html_url', 'git_http_url', 'git_ssh_url']
        .map((k) => payload.repository?.[k])
        .filter((v): v is string => typeof v === 'string')
        .map(repositoryPath)
        .filter((v): v is string => v !== undefined)
        .map((p) => p.split('/').slice(1).join('/').toLowerCase());
      const same = (repoUrl: string) => {
        if (!named.length) return true;
        const p = repositoryPath(repoUrl);
        return !!p && named.includes(p.split('/').slice(1).join('/').toLowerCase());
      };
      return revisionsFor(target.record, payload.ref, same, delivery, payload.after, body);
    },
  };
}

export type PushWebhooks = ReturnType<typeof createPushWebhooks>;
