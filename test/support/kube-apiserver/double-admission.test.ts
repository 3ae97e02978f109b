// The API-server double admits what a real API server admits and changes what it changes: names per kind, label,
// annotation and data-key rules, canonical quantities (and the decoder's 400 for bad ones), server-side defaults,
// omitted empty fields, unknown fields dropped with a Warning (or refused with fieldValidation=Strict), and the
// fields a Job, a PVC and a Pod keep for good. Each case sends what a real server refuses or rewrites and expects
// the real server's answer.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { startCluster, type TestCluster } from '../kubernetes/cluster.ts';
import { rawApi } from '../kubernetes/raw-api.ts';

const NS = 'agents';
let cluster: TestCluster;
let api: ReturnType<typeof rawApi>;
const core = `/api/v1/namespaces/${NS}`;
const apps = `/apis/apps/v1/namespaces/${NS}`;
const batch = `/apis/batch/v1/namespaces/${NS}`;

beforeAll(async () => {
  cluster = await startCluster(NS);
  api = rawApi(cluster.api);
});
afterAll(async () => {
  await cluster?.close();
});

const cm = (name: string, extra: Record<string, unknown> = {}) => ({ metadata: { name }, ...extra });
const fields = (body: Record<string, any>) => (body.details?.causes ?? []).map((c: { field: string }) => c.field);
const deployment = (name: string, container: Record<string, unknown> = {}, spec: Record<string, unknown> = {}) => ({
  metadata: { name },
  spec: {
    selector: { matchLabels: { app: name } },
    template: {
      metadata: { labels: { app: name } },
      spec: { containers: [{ name: 'c', image: 'img:1', ...container }] },
    },
    ...spec,
  },
});

describe('names as each kind takes them', () => {
  it('Services take DNS-1035 labels, Namespaces DNS-1123 labels, most kinds subdomains, RBAC kinds path segments', async () => {
    const svc = (name: string) => ({ metadata: { name }, spec: { ports: [{ port: 80 }] } });
    const digit = await api('POST', `${core}/services`, svc('1svc'));
    expect(digit.status).toBe(422);
    expect(digit.body.reason).toBe('Invalid');
    expect(digit.body.details.causes[0]).toMatchObject({ field: 'metadata.name', reason: 'FieldValueInvalid' });
    expect(digit.body.message).toContain('a DNS-1035 label must consist of lower case alphanumeric characters');
    expect((await api('POST', `${core}/services`, svc(`s${'x'.repeat(63)}`))).status).toBe(422);
    expect((await api('POST', `${core}/services`, svc('a.b'))).status).toBe(422);
    expect((await api('POST', `${core}/configmaps`, cm('1cm.with.dots'))).status).toBe(201);
    expect((await api('POST', '/api/v1/namespaces', { metadata: { name: 'a.b' } })).status).toBe(422);
    expect((await api('POST', `${core}/configmaps`, cm(`c${'x'.repeat(253)}`))).status).toBe(422);
    expect((await api('POST', `${core}/configmaps`, cm('system:x'))).status).toBe(422);
    const role = { metadata: { name: 'system:agent' }, rules: [] };
    expect((await api('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/roles`, role)).status).toBe(201);
    expect(
      (await api('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/roles`, { metadata: { name: 'a/b' } }))
        .status,
    ).toBe(422);
  });
});

describe('metadata and data keys', () => {
  it('refuses bad label keys and values, bad annotation keys and annotations over 256 KiB', async () => {
    const bad = await api(
      'POST',
      `${core}/configmaps`,
      cm('l1', { metadata: { name: 'l1', labels: { 'x/_y': 'v' } } }),
    );
    expect(bad.status).toBe(422);
    expect(bad.body.details.causes[0].message).toContain('name part must consist of alphanumeric characters');
    const long = await api('POST', `${core}/configmaps`, { metadata: { name: 'l2', labels: { a: 'v'.repeat(64) } } });
    expect(long.status).toBe(422);
    expect(long.body.details.causes[0].message).toContain('must be no more than 63 characters');
    const prefix = await api('POST', `${core}/configmaps`, { metadata: { name: 'l3', labels: { 'Ex.com/a': 'v' } } });
    expect(prefix.status).toBe(422);
    const key = await api('POST', `${core}/configmaps`, { metadata: { name: 'a1', annotations: { 'a b': 'x' } } });
    expect(key.status).toBe(422);
    const big = await api('POST', `${core}/configmaps`, {
      metadata: { name: 'a2', annotations: { a: 'x'.repeat(200 * 1024), b: 'y'.repeat(60 * 1024) } },
    });
    expect(big.status).toBe(422);
    expect(big.body.details.causes).toContainEqual(
      expect.objectContaining({ field: 'metadata.annotations', reason: 'FieldValueTooLong' }),
    );
    expect(
      (
        await api('POST', `${core}/configmaps`, {
          metadata: { name: 'a3', labels: { 'app.kubernetes.io/name': 'x' }, annotations: { a: 'x'.repeat(1000) } },
        })
      ).status,
    ).toBe(201);
  });

  it('refuses Secret and ConfigMap keys outside [-._a-zA-Z0-9]+ or longer than 253', async () => {
    const slash = await api('POST', `${core}/configmaps`, cm('k1', { data: { 'a/b': '1' } }));
    expect(slash.status).toBe(422);
    expect(fields(slash.body)).toContain('data[a/b]');
    expect((await api('POST', `${core}/secrets`, cm('k2', { stringData: { '..': '1' } }))).status).toBe(422);
    expect((await api('POST', `${core}/secrets`, cm('k3', { data: { ['k'.repeat(254)]: 'MQ==' } }))).status).toBe(422);
    expect((await api('POST', `${core}/configmaps`, cm('k4', { data: { 'A-b_c.d': '1' } }))).status).toBe(201);
  });
});

describe('quantities', () => {
  it('stores quantities in canonical form and refuses malformed ones with the decoder 400', async () => {
    const made = await api(
      'POST',
      `${apps}/deployments`,
      deployment('q1', {
        resources: { requests: { cpu: '0.5', memory: '1024Mi' }, limits: { cpu: 2, memory: '1.5Gi' } },
      }),
    );
    expect(made.status).toBe(201);
    expect(made.body.spec.template.spec.containers[0].resources).toEqual({
      requests: { cpu: '500m', memory: '1Gi' },
      limits: { cpu: '2', memory: '1536Mi' },
    });
    const bad = await api(
      'POST',
      `${apps}/deployments`,
      deployment('q2', { resources: { limits: { memory: '1Gb' } } }),
    );
    expect(bad.status).toBe(400);
    expect(bad.body.reason).toBe('BadRequest');
    expect(bad.body.message).toContain('quantities must match the regular expression');
    const over = await api(
      'POST',
      `${apps}/deployments`,
      deployment('q3', { resources: { requests: { memory: '2Gi' }, limits: { memory: '1Gi' } } }),
    );
    expect(over.status).toBe(422);
    expect(over.body.message).toContain('must be less than or equal to memory limit');
    const pvc = await api('POST', `${core}/persistentvolumeclaims`, {
      metadata: { name: 'data' },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '2048Mi' } } },
    });
    expect(pvc.body.spec).toEqual({
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: '2Gi' } },
      volumeMode: 'Filesystem',
    });
  });
});

describe('defaults and canonical read-back', () => {
  it('defaults a Service: ClusterIP, sessionAffinity None, an allocated clusterIP, TCP and targetPort', async () => {
    const made = await api('POST', `${core}/services`, { metadata: { name: 'web' }, spec: { ports: [{ port: 80 }] } });
    expect(made.status).toBe(201);
    expect(made.body.spec).toMatchObject({
      type: 'ClusterIP',
      sessionAffinity: 'None',
      ipFamilies: ['IPv4'],
      ipFamilyPolicy: 'SingleStack',
      internalTrafficPolicy: 'Cluster',
      ports: [{ port: 80, protocol: 'TCP', targetPort: 80 }],
    });
    expect(made.body.spec.clusterIP).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    expect(made.body.spec.clusterIPs).toEqual([made.body.spec.clusterIP]);
    const two = await api('POST', `${core}/services`, {
      metadata: { name: 'two' },
      spec: { ports: [{ port: 80 }, { port: 81 }] },
    });
    expect(two.status).toBe(422);
    expect(fields(two.body)).toContain('spec.ports[0].name');
  });

  it('defaults a Deployment, its pod template and containers, and omits empty maps and lists', async () => {
    const made = await api(
      'POST',
      `${apps}/deployments`,
      deployment('d1', { image: 'img', env: [], args: [], ports: [{ containerPort: 8080 }] }, { template: undefined }),
    );
    expect(made.status).toBe(422); // no template
    const ok = await api('POST', `${apps}/deployments`, {
      ...deployment('d2', {
        image: 'registry.test/img',
        env: [],
        ports: [{ containerPort: 8080 }],
        readinessProbe: { httpGet: { path: '/ok', port: 8080 } },
      }),
      metadata: { name: 'd2', labels: {}, annotations: {} },
    });
    expect(ok.status).toBe(201);
    const spec = ok.body.spec;
    expect(ok.body.metadata.labels).toBeUndefined();
    expect(ok.body.metadata.annotations).toBeUndefined();
    expect(spec).toMatchObject({
      replicas: 1,
      revisionHistoryLimit: 10,
      progressDeadlineSeconds: 600,
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: '25%', maxSurge: '25%' } },
    });
    expect(spec.template.spec).toMatchObject({
      restartPolicy: 'Always',
      terminationGracePeriodSeconds: 30,
      dnsPolicy: 'ClusterFirst',
      securityContext: {},
      schedulerName: 'default-scheduler',
    });
    const c = spec.template.spec.containers[0];
    expect(c).toMatchObject({
      imagePullPolicy: 'Always',
      terminationMessagePath: '/dev/termination-log',
      terminationMessagePolicy: 'File',
      resources: {},
      ports: [{ containerPort: 8080, protocol: 'TCP' }],
      readinessProbe: { timeoutSeconds: 1, periodSeconds: 10, successThreshold: 1, failureThreshold: 3 },
    });
    expect(c.readinessProbe.httpGet.scheme).toBe('HTTP');
    expect(c.env).toBeUndefined();
    const tagged = await api('POST', `${apps}/deployments`, deployment('d3'));
    expect(tagged.body.spec.template.spec.containers[0].imagePullPolicy).toBe('IfNotPresent');
  });

  it('refuses a Deployment whose selector does not match its template labels', async () => {
    const d = deployment('d4');
    d.spec.selector = { matchLabels: { app: 'other' } };
    const r = await api('POST', `${apps}/deployments`, d);
    expect(r.status).toBe(422);
    expect(fields(r.body)).toContain('spec.template.metadata.labels');
  });

  it('generates a Job selector and pod labels, and refuses restartPolicy Always and names over 63', async () => {
    const job = (name: string, restartPolicy?: string) => ({
      metadata: { name },
      spec: {
        template: {
          spec: { containers: [{ name: 'c', image: 'img:1' }], ...(restartPolicy ? { restartPolicy } : {}) },
        },
      },
    });
    const always = await api('POST', `${batch}/jobs`, job('j1'));
    expect(always.status).toBe(422);
    expect(always.body.details.causes[0]).toMatchObject({ field: 'spec.template.spec.restartPolicy' });
    const made = await api('POST', `${batch}/jobs`, job('j2', 'Never'));
    expect(made.status).toBe(201);
    const uid = made.body.metadata.uid;
    expect(made.body.spec).toMatchObject({
      backoffLimit: 6,
      completions: 1,
      parallelism: 1,
      completionMode: 'NonIndexed',
      suspend: false,
      selector: { matchLabels: { 'batch.kubernetes.io/controller-uid': uid } },
    });
    expect(made.body.spec.template.metadata.labels).toEqual({
      'batch.kubernetes.io/controller-uid': uid,
      'batch.kubernetes.io/job-name': 'j2',
      'controller-uid': uid,
      'job-name': 'j2',
    });
    const long = await api('POST', `${batch}/jobs`, job(`j${'x'.repeat(63)}`, 'Never'));
    expect(long.status).toBe(422);
    expect(fields(long.body)).toContain('spec.template.labels');
  });
});

describe('unknown fields', () => {
  it('drops them with the Warning the server gives by default, refuses them with Strict, is silent with Ignore', async () => {
    const body = { metadata: { name: 'u1' }, data: { a: '1' }, spec: { x: 1 } };
    const warn = await api('POST', `${core}/configmaps`, body);
    expect(warn.status).toBe(201);
    expect(warn.warnings).toEqual(['unknown field "spec"']);
    expect(warn.body.spec).toBeUndefined();
    const nested = await api('POST', `${apps}/deployments`, deployment('u2', { imagePullPolicyy: 'Always' }));
    expect(nested.warnings).toEqual(['unknown field "spec.template.spec.containers[0].imagePullPolicyy"']);
    const strict = await api('POST', `${core}/configmaps?fieldValidation=Strict`, {
      ...body,
      metadata: { name: 'u3' },
    });
    expect(strict.status).toBe(400);
    expect(strict.body.message).toBe('strict decoding error: unknown field "spec"');
    const ignore = await api('POST', `${core}/configmaps?fieldValidation=Ignore`, {
      ...body,
      metadata: { name: 'u4' },
    });
    expect(ignore.status).toBe(201);
    expect(ignore.warnings).toEqual([]);
  });

  it('prunes fields a CRD schema does not declare, with the same Warning', async () => {
    const example = parse(
      readFileSync(join(import.meta.dirname, '../../../examples/k8s/agentdeployment.yaml'), 'utf8'),
    ) as Record<string, any>;
    const r = await api('POST', `/apis/agentplane.dev/v1alpha1/namespaces/${NS}/agentdeployments`, {
      ...example,
      spec: { ...example.spec, replicaz: 3 },
    });
    expect(r.status).toBe(201);
    expect(r.warnings).toEqual(['unknown field "spec.replicaz"']);
    expect(r.body.spec.replicaz).toBeUndefined();
  });
});

describe('fields kept for good', () => {
  it('refuses changes to a Job template and completions, a pending PVC spec, and a Pod spec beyond images', async () => {
    const job = await api('POST', `${batch}/jobs`, {
      metadata: { name: 'im1' },
      spec: { template: { spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'img:1' }] } } },
    });
    const changed = structuredClone(job.body);
    changed.spec.template.spec.containers[0].image = 'img:2';
    const r = await api('PUT', `${batch}/jobs/im1`, changed);
    expect(r.status).toBe(422);
    expect(fields(r.body)).toEqual(['spec.template']);
    const completions = structuredClone(job.body);
    completions.spec.completions = 3;
    expect(fields((await api('PUT', `${batch}/jobs/im1`, completions)).body)).toEqual(['spec.completions']);
    const labelled = structuredClone(job.body);
    labelled.metadata.labels = { x: 'y' };
    expect((await api('PUT', `${batch}/jobs/im1`, labelled)).status).toBe(200);

    const pvc = await api('POST', `${core}/persistentvolumeclaims`, {
      metadata: { name: 'im2' },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
    });
    const bigger = structuredClone(pvc.body);
    bigger.spec.resources.requests.storage = '2Gi';
    const grown = await api('PUT', `${core}/persistentvolumeclaims/im2`, bigger);
    expect(grown.status).toBe(422);
    expect(grown.body.message).toContain('spec is immutable after creation except resources.requests');

    const pod = await api('POST', `${core}/pods`, {
      metadata: { name: 'im3' },
      spec: { containers: [{ name: 'c', image: 'img:1' }] },
    });
    expect(pod.body.spec).toMatchObject({
      serviceAccountName: 'default',
      enableServiceLinks: true,
      restartPolicy: 'Always',
    });
    const image = structuredClone(pod.body);
    image.spec.containers[0].image = 'img:2';
    expect((await api('PUT', `${core}/pods/im3`, image)).status).toBe(200);
    const cur = (await api('GET', `${core}/pods/im3`)).body;
    cur.spec.containers[0].args = ['x'];
    expect((await api('PUT', `${core}/pods/im3`, cur)).status).toBe(422);
  });
});
