// The API-server double behaves like the real one where our clients depend on it; driven through client-node.
import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeRevision, type AgentDeployment } from '../../../src/resources/index.ts';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { builtinKind, structuralProblems } from './registry.ts';
import { makeDeployment } from '../../control-plane/helpers/fixtures.ts';
import { startKube } from '../../control-plane/helpers/kube.ts';

let kube: Awaited<ReturnType<typeof startKube>>;
let custom: CustomObjectsApi;
let core: CoreV1Api;
let kc: KubeConfig;
const ns = 'double';
const deps = { group: 'agentplane.dev', version: 'v1alpha1', namespace: ns, plural: 'agentdeployments' };
const revs = { ...deps, plural: 'agentrevisions' };

async function failure(p: Promise<unknown>): Promise<{ code: number; body: any }> {
  try {
    await p;
  } catch (err) {
    if (err instanceof ApiException)
      return { code: err.code, body: typeof err.body === 'string' ? JSON.parse(err.body) : err.body };
    throw err;
  }
  throw new Error('expected the API server to refuse');
}

beforeAll(async () => {
  kube = await startKube();
  kc = new KubeConfig();
  kc.loadFromFile(kube.kubeconfig);
  custom = kc.makeApiClient(CustomObjectsApi);
  core = kc.makeApiClient(CoreV1Api);
});
afterAll(async () => {
  await kube.stop();
});

describe('kube-apiserver double', () => {
  it('refuses non-structural CRD schemas like the real server (ours pass)', () => {
    expect(
      structuralProblems({
        type: 'object',
        properties: { a: { properties: {} }, b: { type: 'object', additionalProperties: false } },
      }),
    ).toEqual(['.a: type is required', '.b: additionalProperties: false is not allowed']);
    expect(kube.server.registry.all().map((k) => k.kind)).toEqual(
      expect.arrayContaining(['AgentDeployment', 'AgentRevision']),
    );
  });

  it('validates custom resources against the CRD schema: 422 Invalid with causes', async () => {
    const bad = makeDeployment(ns) as any;
    bad.spec.source = 'svn';
    delete bad.spec.tenantId;
    const res = await failure(custom.createNamespacedCustomObject({ ...deps, body: bad }));
    expect(res.code).toBe(422);
    expect(res.body).toMatchObject({ kind: 'Status', status: 'Failure', reason: 'Invalid', code: 422 });
    const fields = res.body.details.causes.map((c: { field: string }) => c.field);
    expect(fields).toEqual(expect.arrayContaining(['spec.source', 'spec.tenantId']));
    const badName = makeDeployment(ns) as any;
    badName.metadata.name = 'Not_A_Name';
    expect(
      (await failure(custom.createNamespacedCustomObject({ ...deps, body: badName }))).body.details.causes[0].field,
    ).toBe('metadata.name');
  });

  it('prunes unknown fields, drops status on create, 409 AlreadyExists, 404 NotFound Status', async () => {
    const body = { ...makeDeployment(ns), status: { phase: 'READY' } } as any;
    body.spec.surprise = 'x';
    const created = (await custom.createNamespacedCustomObject({ ...deps, body })) as AgentDeployment;
    expect(created.spec).not.toHaveProperty('surprise');
    expect(created.status).toBeUndefined();
    expect(created.metadata.generation).toBe(1);
    const dup = await failure(custom.createNamespacedCustomObject({ ...deps, body }));
    expect(dup).toMatchObject({ code: 409, body: { reason: 'AlreadyExists' } });
    const missing = await failure(custom.getNamespacedCustomObject({ ...deps, name: 'nope' }));
    expect(missing).toMatchObject({
      code: 404,
      body: { kind: 'Status', reason: 'NotFound', details: { name: 'nope' } },
    });
  });

  it('update needs a current resourceVersion; generation moves with spec only; /status writes only status', async () => {
    const created = (await custom.createNamespacedCustomObject({
      ...deps,
      body: makeDeployment(ns),
    })) as AgentDeployment;
    const name = created.metadata.name;
    const noRv = { ...created, metadata: { ...created.metadata, resourceVersion: undefined } };
    expect((await failure(custom.replaceNamespacedCustomObject({ ...deps, name, body: noRv }))).code).toBe(422);
    const labeled = (await custom.replaceNamespacedCustomObject({
      ...deps,
      name,
      body: { ...created, metadata: { ...created.metadata, labels: { ...created.metadata.labels, a: 'b' } } },
    })) as AgentDeployment;
    expect(labeled.metadata.generation).toBe(1);
    expect((await failure(custom.replaceNamespacedCustomObject({ ...deps, name, body: created }))).body.reason).toBe(
      'Conflict',
    );
    const st = (await custom.replaceNamespacedCustomObjectStatus({
      ...deps,
      name,
      body: { ...labeled, spec: { ...labeled.spec, displayName: 'ignored' }, status: { phase: 'READY' } },
    })) as AgentDeployment;
    expect(st.status?.phase).toBe('READY');
    expect(st.spec.displayName).toBe(created.spec.displayName);
    expect(st.metadata.generation).toBe(1);
    const patched = (await custom.patchNamespacedCustomObject(
      { ...deps, name, body: { spec: { displayName: 'merged' } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    )) as AgentDeployment;
    expect(patched.spec.displayName).toBe('merged');
    expect(patched.metadata.generation).toBe(2);
    expect(patched.status?.phase).toBe('READY');
    const jp = (await custom.patchNamespacedCustomObject(
      { ...deps, name, body: [{ op: 'replace', path: '/spec/displayName', value: 'json-patched' }] },
      setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
    )) as AgentDeployment;
    expect(jp.spec.displayName).toBe('json-patched');
    expect(jp.metadata.generation).toBe(3);
    const invalidPatch = await failure(
      custom.patchNamespacedCustomObject(
        { ...deps, name, body: { spec: { revisionCounter: 0 } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      ),
    );
    expect(invalidPatch.code).toBe(422);
  });

  it('enforces the immutable revision spec (x-kubernetes-validations self == oldSelf)', async () => {
    const dep = (await custom.createNamespacedCustomObject({ ...deps, body: makeDeployment(ns) })) as AgentDeployment;
    const rev = (await custom.createNamespacedCustomObject({ ...revs, body: makeRevision(dep) })) as any;
    const res = await failure(
      custom.replaceNamespacedCustomObject({
        ...revs,
        name: rev.metadata.name,
        body: { ...rev, spec: { ...rev.spec, revisionNumber: 9 } },
      }),
    );
    expect(res.code).toBe(422);
    expect(res.body.message).toContain('spec is immutable');
  });

  it('deleting an owner garbage-collects dependents; finalizers hold an object until removed', async () => {
    const dep = (await custom.createNamespacedCustomObject({
      ...deps,
      body: {
        ...makeDeployment(ns),
        metadata: { ...makeDeployment(ns).metadata, finalizers: ['agentplane.dev/runtime'] },
      },
    })) as AgentDeployment;
    const rev = (await custom.createNamespacedCustomObject({ ...revs, body: makeRevision(dep) })) as any;
    await custom.deleteNamespacedCustomObject({ ...deps, name: dep.metadata.name });
    const marked = (await custom.getNamespacedCustomObject({ ...deps, name: dep.metadata.name })) as AgentDeployment;
    expect(marked.metadata.deletionTimestamp).toBeTruthy();
    expect(await custom.getNamespacedCustomObject({ ...revs, name: rev.metadata.name })).toBeTruthy();
    await custom.patchNamespacedCustomObject(
      { ...deps, name: dep.metadata.name, body: [{ op: 'remove', path: '/metadata/finalizers' }] },
      setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
    );
    expect((await failure(custom.getNamespacedCustomObject({ ...deps, name: dep.metadata.name }))).code).toBe(404);
    // The revision is the garbage collector's: it goes after its owner, not with it.
    await kube.server.gcIdle();
    expect((await failure(custom.getNamespacedCustomObject({ ...revs, name: rev.metadata.name }))).code).toBe(404);
  });

  it('validates built-in Secrets, and refuses clients without the token', async () => {
    const bad = await failure(
      core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 's1' }, data: { A: 'not base64!' } } }),
    );
    expect(bad.code).toBe(422);
    const ok = await core.createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: 's2' }, stringData: { A: 'plain' } },
    });
    expect(ok.data).toEqual({ A: Buffer.from('plain').toString('base64') });
    const anon = new KubeConfig();
    anon.loadFromOptions({
      clusters: [{ name: 'c', server: kube.server.url, skipTLSVerify: true }],
      users: [{ name: 'u' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    expect(
      (await failure(anon.makeApiClient(CoreV1Api).readNamespacedSecret({ namespace: ns, name: 's2' }))).code,
    ).toBe(401);
  });

  it('lets tests register more built-in kinds (how H5 adds apps/v1 Deployments and friends)', async () => {
    kube.server.registry.register(
      builtinKind(
        {
          group: 'apps',
          version: 'v1',
          plural: 'deployments',
          kind: 'Deployment',
          namespaced: true,
          statusSubresource: true,
          tracksGeneration: true,
        },
        Deployment,
      ),
    );
    const apps = kc.makeApiClient(AppsV1Api);
    const invalid = await failure(
      apps.createNamespacedDeployment({
        namespace: ns,
        body: { metadata: { name: 'web' }, spec: { selector: {} } as any },
      }),
    );
    expect(invalid.code).toBe(422);
    expect(invalid.body.details.causes).toContainEqual(
      expect.objectContaining({ field: 'spec.template', reason: 'FieldValueRequired' }),
    );
    const made = await apps.createNamespacedDeployment({
      namespace: ns,
      body: {
        metadata: { name: 'web' },
        spec: {
          selector: { matchLabels: { a: 'b' } },
          template: { metadata: { labels: { a: 'b' } }, spec: { containers: [{ name: 'c', image: 'i' }] } },
        },
      },
    });
    expect(made.metadata?.generation).toBe(1);
    expect((await apps.listNamespacedDeployment({ namespace: ns })).items.map((d) => d.metadata?.name)).toEqual([
      'web',
    ]);
  });

  it('delete preconditions: a uid or resourceVersion that no longer matches is 409 Conflict and deletes nothing', async () => {
    const cm = await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'pre' }, data: { a: '1' } },
    });
    const uid = cm.metadata!.uid!;
    const stale = await failure(
      core.deleteNamespacedConfigMap({
        namespace: ns,
        name: 'pre',
        body: { preconditions: { uid: '00000000-0000-4000-8000-000000000000' } },
      }),
    );
    expect(stale.code).toBe(409);
    expect(stale.body).toMatchObject({ reason: 'Conflict' });
    expect(stale.body.message).toContain('Precondition failed: UID in precondition');
    await core.replaceNamespacedConfigMap({ namespace: ns, name: 'pre', body: { ...cm, data: { a: '2' } } });
    const old = await failure(
      core.deleteNamespacedConfigMap({
        namespace: ns,
        name: 'pre',
        body: { preconditions: { uid, resourceVersion: cm.metadata!.resourceVersion } },
      }),
    );
    expect(old.code).toBe(409);
    expect((await core.readNamespacedConfigMap({ namespace: ns, name: 'pre' })).data).toEqual({ a: '2' });
    const cur = await core.readNamespacedConfigMap({ namespace: ns, name: 'pre' });
    await core.deleteNamespacedConfigMap({
      namespace: ns,
      name: 'pre',
      body: { preconditions: { uid, resourceVersion: cur.metadata!.resourceVersion } },
    });
    expect((await failure(core.readNamespacedConfigMap({ namespace: ns, name: 'pre' }))).code).toBe(404);
  });
});
