// Authorization flows on behalf of an agent's end user: started by the agent (authenticate), completed by the
// provider's redirect to the user's browser (callback), awaited by the agent (wait).
import { randomBytes, randomUUID } from 'node:crypto';
import { NotFoundError } from '../../../lib/errors.ts';
import { isUuid } from '../../../resources/index.ts';
import { StaleResourceVersionError } from '../../../state/errors.ts';
import { type AuthObject } from '../../../state/auth-objects.ts';
import {
  bindingOf,
  getOwned,
  oauthClient,
  providerObject,
  publicBase,
  seal,
  sha256,
  uniq,
  type AuthDeps,
} from './core.ts';
import { flowCookie, flowCookieName, type FlowRecord, type FlowSecret } from './flow-binding.ts';
import { ProviderError } from './oauth.ts';
import { saveToken, usableToken } from './tokens.ts';
import {
  TooManyRequestsError,
  type AuthenticateInput,
  type AuthenticateOut,
  type CallbackResult,
  type ProviderRecord,
  type WaitOut,
} from './types.ts';

/** How long a user has to finish a flow (the state is refused afterwards). */
const FLOW_TTL_MS = 10 * 60_000;
const WAIT_POLL_MS = 250;
/** Authorizations in progress per workspace (each is a record; a looping agent must not fill the store). */
const MAX_OPEN_FLOWS = 200;

export async function authenticate(deps: AuthDeps, tenant: string, input: AuthenticateInput): Promise<AuthenticateOut> {
  const publicUrl = publicBase(deps);
  const redirectUri = `${publicUrl}/v2/auth/callback/${encodeURIComponent(input.provider)}`;
  const provider = await providerObject(deps, tenant, input.provider);
  const scopes = uniq(input.scopes);
  const usable = await usableToken(deps, tenant, provider, input.user_id, scopes);
  if (usable)
    return { status: 'completed', token: usable.token, expires_at: usable.expiresAt, url: null, auth_id: null };

  if ((await sweepFlows(deps, tenant)) >= MAX_OPEN_FLOWS) {
    throw new TooManyRequestsError(
      `This workspace has ${MAX_OPEN_FLOWS} authorizations in progress; wait for them to finish or expire (10 minutes).`,
    );
  }
  const authId = randomUUID();
  const state = `${authId}.${randomBytes(32).toString('base64url')}`;
  const c = await oauthClient(deps, provider.obj, provider.record);
  const allScopes = uniq([...provider.record.scopes, ...scopes]);
  const { url, codeVerifier } = await deps.oauth.authorizationUrl(c, { redirectUri, scopes: allScopes, state });
  const record: FlowRecord = {
    auth_id: authId,
    provider_id: input.provider,
    user_id: input.user_id,
    scopes: allScopes,
    redirect_uri: redirectUri,
    expires_at: new Date(deps.now() + FLOW_TTL_MS).toISOString(),
    status: 'pending',
    created_at: new Date(deps.now()).toISOString(),
  };
  const names = { kind: 'flow' as const, tenant, name: authId };
  const secret: FlowSecret = {
    state_hash: sha256(state).toString('base64'),
    code_verifier: codeVerifier,
    authorization_url: url,
  };
  await deps.store.createAuthObject({ ...names, record: JSON.stringify(record), sealed: seal(deps, names, secret) });
  deps.logger.info({ provider: input.provider, auth_id: authId }, 'auth flow started');
  // The user opens the start link, which binds the flow to their browser and sends them on to the provider.
  const link = `${publicUrl}/v2/auth/start?state=${encodeURIComponent(state)}`;
  return { status: 'pending', url: link, auth_id: authId, token: null };
}

/**
 * The provider's redirect. Reached by the end user's browser, so it carries no API key: the state alone says
 * which workspace, user and provider the flow is for. The state is single-use (the flow is taken with a
 * compare-and-swap before the exchange) and expires with the flow.
 */
export async function callback(
  deps: AuthDeps,
  providerId: string,
  params: Record<string, string>,
  cookieHeader?: string,
): Promise<CallbackResult> {
  const { openFlow, sameBrowser } = bindingOf(deps);
  const refused = (message: string): CallbackResult => ({ ok: false, status: 400, message });
  const state = params.state ?? '';
  const found = await openFlow(state, providerId);
  if ('refused' in found) return refused(found.refused);
  const { obj, flow, secret } = found;
  const authId = flow.auth_id;
  // Only the browser that opened the start link completes the flow; the flow stays open for it.
  if (!sameBrowser(flow, cookieHeader))
    return refused(
      'This sign-in was not started in this browser: open the link the agent gave you here and sign in again.',
    );
  const ended = flowCookie(publicBase(deps), flowCookieName(authId), '', 0);
  const taken: FlowRecord = { ...flow, status: 'taken' };
  try {
    await deps.store.replaceAuthObject({ ...obj, record: JSON.stringify(taken) });
  } catch (err) {
    if (err instanceof StaleResourceVersionError || err instanceof NotFoundError) {
      return refused('This link was already used.');
    }
    throw err;
  }
  const takenObj = (await deps.store.getAuthObject('flow', authId))!;
  const finish = async (status: 'completed' | 'failed', error?: string) => {
    const done: FlowRecord = { ...taken, status, ...(error ? { error } : {}) };
    await deps.store.replaceAuthObject({ ...takenObj, record: JSON.stringify(done) });
  };
  const tenant = obj.tenant;
  let provider: { obj: AuthObject; record: ProviderRecord };
  try {
    provider = await providerObject(deps, tenant, providerId);
  } catch (err) {
    if (!(err instanceof NotFoundError)) throw err;
    await finish('failed', `provider ${providerId} was deleted`);
    return { ...refused('The provider of this link no longer exists.'), cookie: ended };
  }
  try {
    const t = await deps.oauth.exchange(await oauthClient(deps, provider.obj, provider.record), {
      redirectUri: flow.redirect_uri,
      params,
      state,
      codeVerifier: secret.code_verifier,
    });
    await saveToken(deps, tenant, flow, t);
  } catch (err) {
    if (!(err instanceof ProviderError)) {
      await finish('failed', 'internal error while storing the token');
      throw err;
    }
    deps.logger.warn({ provider: providerId, auth_id: authId, err: err.message }, 'auth flow failed');
    await finish('failed', err.message);
    const denied = err.oauthError === 'access_denied';
    return {
      ok: false,
      status: denied ? 400 : 502,
      message: denied ? 'Access was not granted.' : `The provider did not complete the sign-in: ${err.message}`,
      cookie: ended,
    };
  }
  await finish('completed');
  deps.logger.info({ provider: providerId, auth_id: authId }, 'auth flow completed');
  return { ok: true, cookie: ended };
}

export async function wait(
  deps: AuthDeps,
  tenant: string,
  authId: string,
  timeoutSeconds: number,
  signal?: AbortSignal,
): Promise<WaitOut> {
  // Real time, not `now`: the injectable clock says when records expire, not how long a request waits.
  const deadline = performance.now() + timeoutSeconds * 1000;
  for (;;) {
    const obj = isUuid(authId) ? await getOwned(deps, 'flow', tenant, authId) : undefined;
    if (!obj) return { status: 'not_found', auth_id: authId };
    const flow = JSON.parse(obj.record) as FlowRecord;
    if (flow.status === 'completed') {
      const provider = await providerObject(deps, tenant, flow.provider_id).catch(() => undefined);
      const usable = provider && (await usableToken(deps, tenant, provider, flow.user_id, []));
      if (!usable) return { status: 'not_found', auth_id: authId };
      return { status: 'completed', auth_id: authId, token: usable.token, expires_at: usable.expiresAt };
    }
    if (flow.status === 'failed') return { status: 'failed', auth_id: authId, error: flow.error ?? 'failed' };
    if (flow.status === 'pending' && Date.parse(flow.expires_at) <= deps.now()) {
      return { status: 'not_found', auth_id: authId };
    }
    if (performance.now() >= deadline || signal?.aborted) {
      return { status: timeoutSeconds > 0 ? 'timeout' : 'pending', auth_id: authId };
    }
    await new Promise((r) => setTimeout(r, Math.min(WAIT_POLL_MS, Math.max(1, deadline - performance.now()))));
  }
}

/**
 * Removes the tenant's flows that expired more than an hour ago (their auth_ids answer not_found either way) and
 * counts the pending ones left.
 */
async function sweepFlows(deps: AuthDeps, tenant: string): Promise<number> {
  const cutoff = deps.now() - 3600_000;
  let open = 0;
  for (const o of await deps.store.listAuthObjects('flow', tenant)) {
    const f = JSON.parse(o.record) as FlowRecord;
    if (Date.parse(f.expires_at) < cutoff) await deps.store.deleteAuthObject('flow', o.name, o.version);
    else if (f.status === 'pending' && Date.parse(f.expires_at) > deps.now()) open++;
  }
  return open;
}
