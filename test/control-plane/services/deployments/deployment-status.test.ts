// status_summary on /v2/deployments (list and get): serving / building / failed / deleting with the serving and the
// newest revision and why, derived from the revisions the operator reports on (the test writes those statuses).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FINALIZER_RUNTIME, deploymentName } from '../../../../src/resources/index.ts';
import { apiHarness, githubBody, type ApiHarness } from '../../helpers/harness.ts';
import { serve, setRevision } from '../../helpers/operator-role.ts';

let h: ApiHarness;
const headers = () => ({ 'x-api-key': h.key, 'x-tenant-id': 'tenant-a' });

async function call(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, body?: object) {
  const res = await h.app.inject({ method, url, headers: headers(), ...(body ? { payload: body } : {}) });
  return { status: res.statusCode, body: (res.body ? res.json() : undefined) as any };
}

async function create(name: string): Promise<string> {
  const res = await call('POST', '/v2/deployments', githubBody(name));
  expect(res.status).toBe(201);
  return res.body.id as string;
}

const summary = async (id: string) => (await call('GET', `/v2/deployments/${id}`)).body.status_summary;
const listed = async (query: string) =>
  ((await call('GET', `/v2/deployments?limit=100&${query}`)).body.resources as { name: string }[]).map((d) => d.name);

beforeAll(async () => {
  h = await apiHarness();
});
afterAll(async () => {
  await h.close();
});

describe('deployment status_summary', () => {
  it('follows a deployment from its first build to serving, a failed second build and a rollback', async () => {
    const id = await create('lifecycle');
    const created = await call('POST', '/v2/deployments', githubBody('lifecycle-2'));
    expect(created.body.status_summary).toMatchObject({ state: 'building', latest_revision_number: 1 });

    expect(await summary(id)).toEqual({
      state: 'building',
      serving_revision_id: null,
      serving_revision_number: null,
      target_revision_id: expect.any(String),
      target_revision_number: 1,
      latest_revision_id: expect.any(String),
      latest_revision_number: 1,
      reason: 'CREATING',
      message: 'Revision 1 is on its way (CREATING).',
    });
    await setRevision(h.store, id, 1, 'BUILDING', 'Building from main.');
    expect(await summary(id)).toMatchObject({ state: 'building', reason: 'BUILDING', message: 'Building from main.' });

    // Built but not routed yet: still on its way, not serving.
    await setRevision(h.store, id, 1, 'DEPLOYED', 'Serving traffic.');
    expect(await summary(id)).toMatchObject({ state: 'building', reason: 'Starting', serving_revision_id: null });
    await serve(h.store, id, 1);
    const serving = await summary(id);
    expect(serving).toMatchObject({ state: 'serving', serving_revision_number: 1, latest_revision_number: 1 });
    expect(serving.serving_revision_id).toBe(serving.latest_revision_id);

    // A second revision builds while the first serves, then fails: the deployment says so, and what still serves.
    const patched = await call('PATCH', `/v2/deployments/${id}`, { source_revision_config: { repo_ref: 'broken' } });
    expect(patched.body.status_summary).toMatchObject({
      state: 'building',
      serving_revision_number: 1,
      latest_revision_number: 2,
    });
    await setRevision(h.store, id, 2, 'BUILD_FAILED', 'npm ci exited with code 1');
    const failed = await summary(id);
    expect(failed).toMatchObject({
      state: 'failed',
      reason: 'BUILD_FAILED',
      message: 'npm ci exited with code 1',
      serving_revision_number: 1,
      latest_revision_number: 2,
    });
    expect(failed.serving_revision_id).toBe(serving.serving_revision_id);

    // Pointing traffic at the revision that never built is refused, naming it and why; nothing changes.
    const rev2 = failed.latest_revision_id as string;
    const before = (await call('GET', `/v2/deployments/${id}`)).body;
    const refused = await call('POST', `/v2/deployments/${id}/revisions/${rev2}/redeploy`);
    expect(refused.status).toBe(409);
    expect(refused.body.detail ?? refused.body.message).toMatch(
      /^revision 2 never built \(BUILD_FAILED: npm ci exited with code 1\), so there is nothing to roll back to/,
    );
    expect((await call('GET', `/v2/deployments/${id}`)).body).toEqual(before);

    // Rolling back to the serving revision settles it: serving again, rev 2 stays the newest.
    const rev1 = serving.serving_revision_id as string;
    expect((await call('POST', `/v2/deployments/${id}/revisions/${rev1}/redeploy`)).status).toBe(200);
    expect(await summary(id)).toMatchObject({
      state: 'serving',
      serving_revision_number: 1,
      latest_revision_number: 2,
    });
  });

  it('a first revision that failed: failed, nothing serving; a served revision whose server crashed: failed', async () => {
    const never = await create('never-built');
    await setRevision(h.store, never, 1, 'DEPLOY_FAILED', 'the agent server exited before answering');
    expect(await summary(never)).toMatchObject({
      state: 'failed',
      reason: 'DEPLOY_FAILED',
      message: 'the agent server exited before answering',
      serving_revision_id: null,
    });

    const crashed = await create('crashed');
    await setRevision(h.store, crashed, 1, 'DEPLOYED');
    await serve(h.store, crashed, 1, { status: 'False', reason: 'CrashLoopBackOff', message: 'restarted 5 times' });
    expect(await summary(crashed)).toMatchObject({
      state: 'failed',
      reason: 'CrashLoopBackOff',
      message: 'restarted 5 times',
      serving_revision_id: null,
      latest_revision_number: 1,
    });
  });

  it('a deployment asleep under the idle policy: serving, reason Sleeping, health ready with the reason', async () => {
    const id = await create('sleepy');
    await setRevision(h.store, id, 1, 'DEPLOYED', 'Serving traffic.');
    const why = 'Revision sleepy-r1: Idle: the agent server is stopped; the first request starts it.';
    await serve(h.store, id, 1, { status: 'True', reason: 'Sleeping', message: why });
    const dep = (await call('GET', `/v2/deployments/${id}`)).body;
    expect(dep.status_summary).toMatchObject({ state: 'serving', reason: 'Sleeping', message: why });
    expect(dep.status_summary.serving_revision_number).toBe(1);
    expect(dep.health).toMatchObject({ ready: true, reason: 'Sleeping', message: why });
  });

  it('deleting while the runtime lets go', async () => {
    const id = await create('going');
    const obj = await h.store.get('AgentDeployment', 'default', deploymentName(id));
    await h.store.update('AgentDeployment', { ...obj, metadata: { ...obj.metadata, finalizers: [FINALIZER_RUNTIME] } });
    expect((await call('DELETE', `/v2/deployments/${id}`)).status).toBe(204);
    expect(await summary(id)).toMatchObject({ state: 'deleting', reason: 'Deleting' });
  });

  it('the list filters by state, several at once; an unknown state is a 422 naming it', async () => {
    const names = (q: string) => listed(q).then((l) => l.filter((n) => n.startsWith('f-')).sort());
    const serving = await create('f-serving');
    await setRevision(h.store, serving, 1, 'DEPLOYED');
    await serve(h.store, serving, 1);
    const failed = await create('f-failed');
    await setRevision(h.store, failed, 1, 'BUILD_FAILED', 'no langgraph.json');
    await create('f-building');
    expect(await names('state=failed')).toEqual(['f-failed']);
    expect(await names('state=serving')).toEqual(['f-serving']);
    expect(await names('state=building,failed')).toEqual(['f-building', 'f-failed']);
    const listedOnes = (await call('GET', '/v2/deployments?limit=100&name_contains=f-')).body.resources as any[];
    expect(Object.fromEntries(listedOnes.map((d) => [d.name, d.status_summary.state]))).toEqual({
      'f-serving': 'serving',
      'f-failed': 'failed',
      'f-building': 'building',
    });
    const bad = await call('GET', '/v2/deployments?state=broken');
    expect(bad.status).toBe(422);
    expect(JSON.stringify(bad.body.detail)).toContain('state');
  });
});
