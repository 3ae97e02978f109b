// Tenant isolation at the control plane's door (issue 9): what one tenant sends must not reach a process, a path, a
// Kubernetes object or another tenant. Written as an attacker would: plain HTTP against the app, on both stores. A
// refused request writes nothing at all (every store write is recorded), so nothing is half-written.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createControlPlane } from '../../src/control-plane/app.ts';
import { DEFAULT_INPUT_POLICY, type InputPolicy } from '../../src/api/input-rules.ts';
import { openEmbeddedPlatformState } from '../../src/state/embedded/index.ts';
import { loadKubeConfig, openKubernetesPlatformState } from '../../src/state/kubernetes/index.ts';
import type { PlatformState } from '../../src/state/types.ts';
import { claimHostsOfOlderDeployments } from '../../src/state/older-host-claims.ts';
import { silentLogger } from '../../src/lib/logger.ts';
import {
  API_VERSION,
  LABEL_TENANT,
  deploymentName,
  makeRevision,
  revisionName,
  type AgentDeployment,
} from '../../src/resources/index.ts';
import { githubBody } from './helpers/harness.ts';
import { startKube } from './helpers/kube.ts';

const KEY = 'tenant-input-admin-key-0123456789';
type Res = { statusCode: number; body: string; json: () => any };
type Detail = { loc: (string | number)[]; msg: string; type: string };

const POLICY: InputPolicy = {
  ...DEFAULT_INPUT_POLICY,
  allowedCustomDomains: ['agents.example.com'],
  publicHost: 'api.agents.example.com',
};

type Opened = {
  store: PlatformState;
  ns: string;
  core?: CoreV1Api;
  second?: () => PlatformState;
  close: () => Promise<void>;
};

const stores: Record<string, () => Promise<Opened>> = {
  embedded: async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-cp-tenant-'));
    const store = openEmbeddedPlatformState({ dataDir: dir });
    const others: PlatformState[] = [];
    return {
      store,
      ns: 'default',
      // A second process on the same data dir.
      second: () => {
        const s = openEmbeddedPlatformState({ dataDir: dir });
        others.push(s);
        return s;
      },
      close: async () => {
        for (const s of others) await s.close();
        await store.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  },
  kubernetes: async () => {
    const kube = await startKube();
    const kc = loadKubeConfig(kube.kubeconfig);
    const open = () =>
      openKubernetesPlatformState({
        kubeConfig: loadKubeConfig(kube.kubeconfig),
        namespace: 'tenants',
        logger: silentLogger(),
      });
    const store = open();
    const others: PlatformState[] = [];
    return {
      store,
      ns: 'tenants',
      core: kc.makeApiClient(CoreV1Api),
      // A second control plane replica on the same cluster.
      second: () => {
        const s = open();
        others.push(s);
        return s;
      },
      close: async () => {
        for (const s of others) await s.close();
        await store.close();
        await kube.stop();
      },
    };
  },
};

const WRITES = new Set([
  'create',
  'update',
  'updateStatus',
  'delete',
  'putSecrets',
  'deleteSecrets',
  'claimName',
  'releaseName',
  'claimHost',
  'releaseHost',
  'putApiKey',
  'appendLogs',
]);

/** The store, recording the name of every write made through it. */
function recording(store: PlatformState, writes: string[]): PlatformState {
  return new Proxy(store, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        if (WRITES.has(String(prop))) writes.push(String(prop));
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

const locs = (res: Res) => (res.json().detail as Detail[]).map((d) => d.loc.join('.'));
const msgs = (res: Res) => (res.json().detail as Detail[]).map((d) => d.msg).join(' | ');

for (const [kind, open] of Object.entries(stores)) {
  describe(`tenant input: ${kind} store`, () => {
    let s: Opened;
    let app: FastifyInstance;
    const writes: string[] = [];
    beforeAll(async () => {
      s = await open();
      app = await createControlPlane({
        store: recording(s.store, writes),
        logger: silentLogger(),
        bootstrapKeys: [{ key: KEY, tenants: ['*'] }],
        policy: POLICY,
      });
    });
    afterAll(async () => {
      await app?.close();
      await s?.close();
    });

    const call = (
      method: string,
      url: string,
      body?: unknown,
      tenant = 'tenant-a',
      a: FastifyInstance = app,
    ): Promise<Res> =>
      a.inject({
        method: method as 'GET',
        url,
        headers: { 'x-api-key': KEY, 'x-tenant-id': tenant },
        ...(body !== undefined ? { payload: body as object } : {}),
      }) as Promise<Res>;

    /** A refused request: 422 (or `status`) with `loc` among the details, a message matching `msg`, and no store write. */
    async function refused(
      method: string,
      url: string,
      body: unknown,
      loc: string,
      msg: RegExp,
      status = 422,
      tenant = 'tenant-a',
    ): Promise<Res> {
      writes.length = 0;
      const res = await call(method, url, body, tenant);
      expect(res.statusCode, `${loc}: ${res.body}`).toBe(status);
      if (status === 422) {
        expect(locs(res), res.body).toContain(loc);
        expect(msgs(res), res.body).toMatch(msg);
      } else {
        expect(res.json().detail, res.body).toMatch(msg);
      }
      expect(writes, `${loc}: a refused request wrote to the store`).toEqual([]);
      return res;
    }

    const create = async (name: string, extra: Record<string, unknown> = {}, tenant = 'tenant-a') => {
      const res = await call('POST', '/v2/deployments', githubBody(name, extra), tenant);
      expect(res.statusCode, res.body).toBe(201);
      return res.json();
    };
    const sourceConfig = (extra: Record<string, unknown>) => ({
      source_config: { ...githubBody('x').source_config, ...extra },
    });
    const withSpec = (spec: Record<string, unknown>) => sourceConfig({ resource_spec: spec });

    it('repo_url with credentials is refused, pointing at integrations; account names without a password are fine', async () => {
      for (const url of [
        'https://user:ghp_token123@github.com/acme/agent.git',
        'https://ghp_token123@github.com/acme/agent.git',
        'http://u:p@git.internal/acme/agent',
        'ssh://git:hunter2@github.com/acme/agent.git',
        'git:hunter2@github.com:acme/agent.git',
      ]) {
        const res = await refused(
          'POST',
          '/v2/deployments',
          githubBody('creds', sourceConfig({ repo_url: url })),
          'body.source_config.repo_url',
          /integration/i,
        );
        expect(res.body).not.toContain('hunter2');
      }
      for (const url of ['-uhack', 'ext::sh -c touch% /tmp/pwned', 'https://github.com/a/b\n--upload-pack=x']) {
        await refused(
          'POST',
          '/v2/deployments',
          githubBody('creds', sourceConfig({ repo_url: url })),
          'body.source_config.repo_url',
          /./,
        );
      }
      expect((await s.store.list('AgentDeployment', s.ns)).items.filter((d) => d.spec.displayName === 'creds')).toEqual(
        [],
      );
      expect((await s.store.listNameClaims(s.ns)).filter((c) => c.name === 'creds')).toEqual([]);
      let i = 0;
      for (const url of [
        'git@github.com:acme/agent.git',
        'ssh://git@github.com/acme/agent.git',
        'https://github.com/acme/agent.git',
      ]) {
        const dep = await create(`account-${i++}`, sourceConfig({ repo_url: url }));
        expect(dep.source_config.repo_url).toBe(url);
      }
      // PATCH cannot sneak credentials in either (repo_url is immutable, and credentials are refused before that).
      const dep = await create('patch-creds');
      await refused(
        'PATCH',
        `/v2/deployments/${dep.id}`,
        { source_config: { repo_url: 'https://x:y@github.com/example/agent' } },
        'body.source_config.repo_url',
        /integration/i,
      );
    });

    it('credentials stored before the rule are redacted on read: record, revision status message, logs', async () => {
      const id = '6b1d3c1e-0000-4000-8000-00000000c0de';
      const name = deploymentName(id);
      const legacy: AgentDeployment = {
        apiVersion: API_VERSION,
        kind: 'AgentDeployment',
        metadata: { name, namespace: s.ns, labels: { [LABEL_TENANT]: 'tenant-a', 'agentplane.dev/deployment-id': id } },
        spec: {
          deploymentId: id,
          tenantId: 'tenant-a',
          displayName: 'legacy-creds',
          source: 'github',
          sourceConfig: {
            repoUrl: 'https://bob:s3cr3t-token@github.com/acme/private.git',
            deploymentType: 'dev',
            buildOnPush: false,
          },
          sourceRevisionConfig: { repoRef: 'main', graphConfigPath: 'langgraph.json', imageUri: null },
          secretsName: null,
          // Also stored before the rules: still rendered, not a 500.
          secretReferences: [{ name: 'old-style-name', secretName: 'Old_Secret', secretKey: 'k' }],
          revisionCounter: 1,
          targetRevisionName: revisionName(name, 1),
        },
      };
      const dep = await s.store.create('AgentDeployment', legacy);
      const rev = await s.store.create('AgentRevision', makeRevision(dep));
      await s.store.updateStatus('AgentRevision', {
        ...rev,
        status: {
          phase: 'BUILD_FAILED',
          statusMessage: 'repo_ref "main" is not a branch of https://bob:s3cr3t-token@github.com/acme/private.git',
        },
      });
      await s.store.appendLogs(s.ns, rev.metadata.name, 'build', [
        "fatal: unable to access 'https://bob:s3cr3t-token@github.com/acme/private.git/'",
      ]);
      const got = await call('GET', `/v2/deployments/${id}`);
      expect(got.statusCode, got.body).toBe(200);
      expect(got.json().source_config.repo_url).toBe('https://***@github.com/acme/private.git');
      expect(got.json().secret_references).toEqual([
        { name: 'old-style-name', secret_name: 'Old_Secret', secret_key: 'k' },
      ]);
      const listed = await call('GET', '/v2/deployments?name_contains=legacy-creds');
      const revs = await call('GET', `/v2/deployments/${id}/revisions`);
      const one = await call('GET', `/v2/deployments/${id}/revisions/${rev.metadata.uid}`);
      const logs = await call('GET', `/v2/deployments/${id}/revisions/${rev.metadata.uid}/logs?type=build`);
      expect(one.json().status_message).toBe(
        'repo_ref "main" is not a branch of https://***@github.com/acme/private.git',
      );
      expect(logs.json().logs[0].message).toContain('https://***@github.com/acme/private.git/');
      for (const r of [got, listed, revs, one, logs]) expect(r.body).not.toContain('s3cr3t-token');
    });

    it('secrets: environment variable names, unique, values without NUL, 64 KiB each, 1 MiB in all', async () => {
      const secretsCase = (secrets: unknown) => githubBody('bad-secrets', { secrets });
      await refused(
        'POST',
        '/v2/deployments',
        secretsCase([{ name: 'A-B', value: 'v' }]),
        'body.secrets.0.name',
        /environment variable name/,
      );
      await refused(
        'POST',
        '/v2/deployments',
        secretsCase([{ name: 'LD_PRELOAD\nX', value: 'v' }]),
        'body.secrets.0.name',
        /environment variable name/,
      );
      await refused(
        'POST',
        '/v2/deployments',
        secretsCase([{ name: `A${'B'.repeat(256)}`, value: 'v' }]),
        'body.secrets.0.name',
        /253/,
      );
      // 254 characters: no longer a valid key of the Secret holding the environment in a cluster.
      await refused(
        'POST',
        '/v2/deployments',
        secretsCase([{ name: `A${'B'.repeat(253)}`, value: 'v' }]),
        'body.secrets.0.name',
        /253/,
      );
      await refused(
        'POST',
        '/v2/deployments',
        secretsCase([
          { name: 'TOKEN', value: 'a' },
          { name: 'TOKEN', value: 'b' },
        ]),
        'body.secrets.1.name',
        /duplicate name "TOKEN"/,
      );
      await refused(
        'POST',
        '/v2/deployments',
        secretsCase([
          { name: 'OK', value: 'v' },
          { name: 'NUL_VALUE', value: 'a\u0000b' },
        ]),
        'body.secrets.1.value',
        /secret "NUL_VALUE".*NUL/,
      );
      await refused(
        'POST',
        '/v2/deployments',
        secretsCase([{ name: 'BIG', value: 'x'.repeat(64 * 1024 + 1) }]),
        'body.secrets.0.value',
        /secret "BIG".*65537 bytes.*65536/,
      );
      // Names the loader, shells or Node obey before the agent's code runs: the attack on the launch chain.
      for (const name of [
        'LD_PRELOAD',
        'LD_LIBRARY_PATH',
        'LD_AUDIT',
        'GCONV_PATH',
        'BASH_ENV',
        'ENV',
        'IFS',
        'NODE_OPTIONS',
      ]) {
        await refused(
          'POST',
          '/v2/deployments',
          secretsCase([
            { name: 'OK', value: 'v' },
            { name, value: '/home/agent/evil.so' },
          ]),
          'body.secrets.1.name',
          new RegExp(`secret ${name} is reserved`),
        );
      }
      await refused(
        'POST',
        '/v2/deployments',
        githubBody('bad-refs', { secret_references: [{ name: 'LD_PRELOAD', secret_name: 's', secret_key: 'k' }] }),
        'body.secret_references.0.name',
        /secret LD_PRELOAD is reserved/,
      );
      // PATH is the agent's own: the runtimes start their programs by absolute path.
      await create('secret-path', { secrets: [{ name: 'PATH', value: '/home/agent/bin:/usr/bin' }] });
      // 64 KiB exactly is fine.
      await create('secret-64k', { secrets: [{ name: 'EXACT', value: 'x'.repeat(64 * 1024) }] });
      const many = Array.from({ length: 17 }, (_, i) => ({ name: `PART_${i}`, value: 'y'.repeat(63 * 1024) }));
      await refused(
        'POST',
        '/v2/deployments',
        secretsCase(many),
        'body.secrets.16.value',
        /secret "PART_16".*1048576 bytes in all/,
      );
      await refused(
        'POST',
        '/v2/deployments',
        githubBody('bad-refs', { secret_references: [{ name: '1X', secret_name: 's', secret_key: 'k' }] }),
        'body.secret_references.0.name',
        /environment variable name/,
      );
      await refused(
        'POST',
        '/v2/deployments',
        githubBody('bad-refs', { secret_references: [{ name: 'X', secret_name: '../s', secret_key: 'k' }] }),
        'body.secret_references.0.secret_name',
        /DNS subdomain/,
      );
      await refused(
        'POST',
        '/v2/deployments',
        githubBody('bad-refs', {
          secrets: [{ name: 'DB', value: 'v' }],
          secret_references: [{ name: 'DB', secret_name: 's', secret_key: 'k' }],
        }),
        'body.secret_references.0.name',
        /"DB" is also in secrets/,
      );
      // The same rules on PATCH, with the deployment unchanged afterwards.
      const dep = await create('secret-patch');
      const before = await s.store.get('AgentDeployment', s.ns, deploymentName(dep.id));
      await refused(
        'PATCH',
        `/v2/deployments/${dep.id}`,
        {
          secrets: [
            { name: 'OK', value: 'v' },
            { name: 'NUL', value: '\u0000' },
          ],
        },
        'body.secrets.1.value',
        /secret "NUL"/,
      );
      await refused(
        'PATCH',
        `/v2/deployments/${dep.id}`,
        {
          secrets: [
            { name: 'A', value: '1' },
            { name: 'A', value: '2' },
          ],
        },
        'body.secrets.1.name',
        /duplicate/,
      );
      await refused(
        'PATCH',
        `/v2/deployments/${dep.id}`,
        { secrets: [{ name: 'NODE_OPTIONS', value: '--require /tmp/x.js' }] },
        'body.secrets.0.name',
        /secret NODE_OPTIONS is reserved/,
      );
      expect((await s.store.get('AgentDeployment', s.ns, deploymentName(dep.id))).metadata.resourceVersion).toBe(
        before.metadata.resourceVersion,
      );
      expect((await call('GET', `/v2/deployments/${dep.id}/revisions`)).json().resources).toHaveLength(1);
    });

    it('names, refs, paths, images and URLs: no control characters, no NUL anywhere, no option or path injection', async () => {
      const src = (extra: Record<string, unknown>) => ({
        source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json', ...extra },
      });
      await refused('POST', '/v2/deployments', githubBody('bell\u0007name'), 'body.name', /control characters/);
      await refused('POST', '/v2/deployments', githubBody('line\nbreak'), 'body.name', /control characters/);
      for (const ref of [
        '--upload-pack=touch /tmp/pwned',
        '-b',
        'main..evil',
        'refs/heads/a b',
        'main\u0000',
        'HEAD@{1}',
        'a:b',
        '.hidden',
      ]) {
        await refused(
          'POST',
          '/v2/deployments',
          githubBody('bad-ref', src({ repo_ref: ref })),
          'body.source_revision_config.repo_ref',
          /./,
        );
      }
      for (const p of [
        '../../etc/passwd',
        'agents/../../../x.json',
        '/etc/passwd',
        'C:\\x\\langgraph.json',
        'a\u0000.json',
        'a\nb.json',
      ]) {
        await refused(
          'POST',
          '/v2/deployments',
          githubBody('bad-path', src({ graph_config_path: p })),
          'body.source_revision_config.graph_config_path',
          /./,
        );
      }
      await refused(
        'POST',
        '/v2/deployments',
        githubBody('bad-path', src({ langgraph_config_path: '../x.json' })),
        'body.source_revision_config.langgraph_config_path',
        /\.\./,
      );
      await refused(
        'POST',
        '/v2/deployments',
        {
          name: 'bad-image',
          source: 'external_docker',
          source_revision_config: { image_uri: 'registry.example.com/a:1\n--privileged' },
        },
        'body.source_revision_config.image_uri',
        /control characters/,
      );
      // NUL in any string, commands included; newlines in commands are fine (they are shell scripts).
      await refused(
        'POST',
        '/v2/deployments',
        githubBody('nul-cmd', sourceConfig({ install_command: 'npm ci\u0000; rm -rf /' })),
        'body.source_config.install_command',
        /NUL/,
      );
      await refused(
        'POST',
        '/v2/deployments',
        githubBody('nul-cmd', sourceConfig({ listener_config: { k8s_namespace: 'a\u0000' } })),
        'body.source_config.listener_config.k8s_namespace',
        /NUL/,
      );
      const ok = await create(
        'multi-line-commands',
        sourceConfig({ install_command: 'npm ci\nnpm run prepare', build_command: 'npm run build\n' }),
      );
      expect(ok.source_config.install_command).toBe('npm ci\nnpm run prepare');
      for (const ref of ['main', 'refs/heads/feature/x-1', 'v1.2.3', '0123456789abcdef0123456789abcdef01234567']) {
        await create(
          `good-ref-${ref.replace(/[^a-z0-9]/gi, '')}`,
          src({ repo_ref: ref, graph_config_path: 'agents/chat/langgraph.json' }),
        );
      }
      // PATCH too.
      const dep = await create('patch-ref');
      await refused(
        'PATCH',
        `/v2/deployments/${dep.id}`,
        { source_revision_config: { repo_ref: '--upload-pack=x' } },
        'body.source_revision_config.repo_ref',
        /"-"/,
      );
      await refused('PATCH', `/v2/deployments/${dep.id}`, { name: 'tab\tname' }, 'body.name', /control/);
    });

    it('resource bounds: scale, CPU and memory within the control plane settings; requests within limits', async () => {
      const cases: [Record<string, unknown>, string, RegExp][] = [
        [
          { min_scale: 100000, max_scale: 100000 },
          'body.source_config.resource_spec.min_scale',
          /at most 10 replicas.*--max-scale/,
        ],
        [{ min_scale: 1, max_scale: 11 }, 'body.source_config.resource_spec.max_scale', /at most 10/],
        [{ cpu: 1e9 }, 'body.source_config.resource_spec.cpu', /at most 4 CPU cores.*--max-cpu/],
        [{ cpu: 1, cpu_limit: 64 }, 'body.source_config.resource_spec.cpu_limit', /at most 4/],
        [{ memory_mb: 1_000_000 }, 'body.source_config.resource_spec.memory_mb', /at most 8192 MB.*--max-memory-mb/],
        [{ memory_mb: 512, memory_limit_mb: 9000 }, 'body.source_config.resource_spec.memory_limit_mb', /at most 8192/],
        // Below what an agent server holds by itself: it would be killed for its memory again and again.
        [
          { memory_mb: 128, memory_limit_mb: 256 },
          'body.source_config.resource_spec.memory_limit_mb',
          /memory_limit_mb must be at least 512 MB .*got 256/,
        ],
        [
          { min_scale: 3, max_scale: 2 },
          'body.source_config.resource_spec.max_scale',
          /min_scale \(3\) must not exceed max_scale \(2\)/,
        ],
        [
          { cpu: 2, cpu_limit: 1 },
          'body.source_config.resource_spec.cpu_limit',
          /cpu \(2\) must not exceed cpu_limit \(1\)/,
        ],
        [
          { memory_mb: 2048, memory_limit_mb: 1024 },
          'body.source_config.resource_spec.memory_limit_mb',
          /must not exceed/,
        ],
        [{ cpu: 0.0001 }, 'body.source_config.resource_spec.cpu', /./],
        // The idle policy: whole minutes up to a week, and not beside a replica kept up on purpose.
        [{ idle_timeout_minutes: -1 }, 'body.source_config.resource_spec.idle_timeout_minutes', /./],
        [{ idle_timeout_minutes: 1.5 }, 'body.source_config.resource_spec.idle_timeout_minutes', /./],
        [{ idle_timeout_minutes: 20_000 }, 'body.source_config.resource_spec.idle_timeout_minutes', /10080/],
        [
          { min_scale: 1, idle_timeout_minutes: 5 },
          'body.source_config.resource_spec.idle_timeout_minutes',
          /needs min_scale 0 or unset: min_scale 1 keeps the agent server running/,
        ],
        // Map issues sit on the map and name the key (keys may contain "/", which a loc cannot carry).
        [
          { labels: { 'bad key': 'x' } },
          'body.source_config.resource_spec.labels',
          /label key "bad key" is not a valid key/,
        ],
        [
          { labels: { app: 'has space' } },
          'body.source_config.resource_spec.labels',
          /label "app": value must be a valid label value/,
        ],
        [{ labels: { app: 'x'.repeat(64) } }, 'body.source_config.resource_spec.labels', /63/],
        [
          { labels: { 'agentplane.dev/tenant': 'tenant-b' } },
          'body.source_config.resource_spec.labels',
          /"agentplane.dev\/tenant" uses the reserved prefix/,
        ],
        [
          { annotations: { 'bad/key/x': 'v' } },
          'body.source_config.resource_spec.annotations',
          /annotation key "bad\/key\/x" is not a valid key/,
        ],
        [
          { annotations: { a: 'x'.repeat(40_000), b: 'y'.repeat(40_000) } },
          'body.source_config.resource_spec.annotations',
          /65536 bytes/,
        ],
        [
          { node_selector: { 'kubernetes.io/hostname': 'node\n1' } },
          'body.source_config.resource_spec.node_selector',
          /node_selector "kubernetes.io\/hostname": value/,
        ],
      ];
      for (const [spec, loc, msg] of cases)
        await refused('POST', '/v2/deployments', githubBody('bounds', withSpec(spec)), loc, msg);
      expect(
        (await s.store.list('AgentDeployment', s.ns)).items.filter((d) => d.spec.displayName === 'bounds'),
      ).toEqual([]);
      const dep = await create(
        'in-bounds',
        withSpec({
          min_scale: 10,
          max_scale: 10,
          cpu: 4,
          cpu_limit: 4,
          memory_mb: 8192,
          memory_limit_mb: 8192,
          labels: { 'team.example.com/owner': 'a-b_c.d' },
          annotations: { 'prometheus.io/scrape': 'true' },
        }),
      );
      const before = await s.store.get('AgentDeployment', s.ns, deploymentName(dep.id));
      await refused(
        'PATCH',
        `/v2/deployments/${dep.id}`,
        withSpec({ min_scale: 100000 }),
        'body.source_config.resource_spec.min_scale',
        /at most 10/,
      );
      await refused(
        'PATCH',
        `/v2/deployments/${dep.id}`,
        withSpec({ cpu: 1e9 }),
        'body.source_config.resource_spec.cpu',
        /at most 4/,
      );
      expect((await s.store.get('AgentDeployment', s.ns, deploymentName(dep.id))).metadata.resourceVersion).toBe(
        before.metadata.resourceVersion,
      );
      expect((await call('GET', `/v2/deployments/${dep.id}/revisions`)).json().resources).toHaveLength(1);
    });

    it('bounds are settings: a control plane with larger ones accepts what the default refuses', async () => {
      const big = await createControlPlane({
        store: s.store,
        logger: silentLogger(),
        bootstrapKeys: [{ key: KEY, tenants: ['*'] }],
        policy: { ...POLICY, maxScale: 50, maxCpu: 16, maxMemoryMb: 65536 },
      });
      try {
        const res = await call(
          'POST',
          '/v2/deployments',
          githubBody('big-bounds', withSpec({ min_scale: 20, max_scale: 50, cpu: 16, memory_mb: 32768 })),
          'tenant-a',
          big,
        );
        expect(res.statusCode, res.body).toBe(201);
        const over = await call(
          'POST',
          '/v2/deployments',
          githubBody('big-bounds-2', withSpec({ max_scale: 51 })),
          'tenant-a',
          big,
        );
        expect(over.statusCode).toBe(422);
        expect(msgs(over)).toMatch(/at most 50/);
      } finally {
        await big.close();
      }
    });

    it('custom_url: an http(s) URL or bare host under an allowed domain, never the control plane host, one deployment per host', async () => {
      const cu = (url: string) => sourceConfig({ custom_url: url });
      const loc = 'body.source_config.custom_url';
      await refused(
        'POST',
        '/v2/deployments',
        githubBody('cu', cu('https://evil.example.org')),
        loc,
        /not under an allowed custom domain \(agents\.example\.com\)/,
      );
      await refused(
        'POST',
        '/v2/deployments',
        githubBody('cu', cu('agents.example.com')),
        loc,
        /not under an allowed custom domain/,
      );
      await refused(
        'POST',
        '/v2/deployments',
        githubBody('cu', cu('https://api.agents.example.com/v2')),
        loc,
        /control plane's own host/,
      );
      await refused(
        'POST',
        '/v2/deployments',
        githubBody('cu', cu('ftp://bot.agents.example.com')),
        loc,
        /http\(s\) URL/,
      );
      await refused(
        'POST',
        '/v2/deployments',
        githubBody('cu', cu('https://u:p@bot.agents.example.com')),
        loc,
        /credentials/,
      );
      await refused(
        'POST',
        '/v2/deployments',
        githubBody('cu', cu('bot.agents.example.com\r\nX-Injected: 1')),
        loc,
        /control characters/,
      );
      await refused(
        'POST',
        '/v2/deployments',
        githubBody('cu', cu('https://bot.agents.example.com:8443')),
        loc,
        /port/,
      );

      const a = await create('host-owner', cu('https://Bot.Agents.Example.com/'));
      // Another tenant (and the same one) cannot take the host, however it is spelled.
      for (const [tenant, spelled] of [
        ['tenant-b', 'bot.agents.example.com'],
        ['tenant-a', 'http://BOT.agents.example.com.'],
      ] as const) {
        await refused(
          'POST',
          '/v2/deployments',
          githubBody(`thief-${tenant}`, cu(spelled)),
          '',
          /custom host "bot\.agents\.example\.com" is already used/,
          409,
          tenant,
        );
      }
      const b = await create('host-mover', cu('https://other.agents.example.com'), 'tenant-b');
      await refused(
        'PATCH',
        `/v2/deployments/${b.id}`,
        cu('bot.agents.example.com'),
        '',
        /"bot\.agents\.example\.com" is already used/,
        409,
        'tenant-b',
      );
      expect(
        (await call('GET', `/v2/deployments/${b.id}`, undefined, 'tenant-b')).json().source_config.custom_url,
      ).toBe('https://other.agents.example.com');
      // Moving a's host frees the old one; deleting b frees b's.
      expect((await call('PATCH', `/v2/deployments/${a.id}`, cu('https://bot2.agents.example.com'))).statusCode).toBe(
        200,
      );
      expect(
        (await call('PATCH', `/v2/deployments/${b.id}`, cu('bot.agents.example.com'), 'tenant-b')).statusCode,
      ).toBe(200);
      const claims = await s.store.listHostClaims(s.ns);
      expect(claims.map((c) => c.host).sort()).toEqual(['bot.agents.example.com', 'bot2.agents.example.com']);
      expect(claims.find((c) => c.host === 'bot.agents.example.com')!.owner.name).toBe(deploymentName(b.id));
      expect((await call('DELETE', `/v2/deployments/${b.id}`, undefined, 'tenant-b')).statusCode).toBe(204);
      await create('host-heir', cu('bot.agents.example.com'), 'tenant-c');
      // custom_url null releases the claim.
      expect((await call('PATCH', `/v2/deployments/${a.id}`, cu(null as unknown as string))).statusCode).toBe(200);
      expect((await s.store.listHostClaims(s.ns)).map((c) => c.host)).not.toContain('bot2.agents.example.com');
      await create('host-heir-2', cu('bot2.agents.example.com'), 'tenant-b');
    });

    it('custom_url: a deployment written before host claims gets its claim once at start, and holds its host', async () => {
      const id = '6b1d3c1e-0000-4000-8000-00000000face';
      const name = deploymentName(id);
      await s.store.create('AgentDeployment', {
        apiVersion: API_VERSION,
        kind: 'AgentDeployment',
        metadata: { name, namespace: s.ns, labels: { [LABEL_TENANT]: 'tenant-z', 'agentplane.dev/deployment-id': id } },
        spec: {
          deploymentId: id,
          tenantId: 'tenant-z',
          displayName: 'pre-claims',
          source: 'github',
          sourceConfig: { repoUrl: 'https://github.com/a/b', customUrl: 'https://old.agents.example.com' },
          sourceRevisionConfig: { repoRef: 'main', graphConfigPath: 'langgraph.json' },
          revisionCounter: 1,
          targetRevisionName: revisionName(name, 1),
        },
      });
      // What the start of a control plane does (the embedded store in its schema step 2, see migrations.test.ts).
      expect(await claimHostsOfOlderDeployments(s.store, silentLogger())).toBe(1);
      expect(await claimHostsOfOlderDeployments(s.store, silentLogger())).toBe(0);
      await refused(
        'POST',
        '/v2/deployments',
        githubBody('late', sourceConfig({ custom_url: 'old.agents.example.com' })),
        '',
        /already used/,
        409,
      );
    });

    it('custom domains off (the default) or * (one-team installs)', async () => {
      const off = await createControlPlane({
        store: s.store,
        logger: silentLogger(),
        bootstrapKeys: [{ key: KEY, tenants: ['*'] }],
      });
      const any = await createControlPlane({
        store: s.store,
        logger: silentLogger(),
        bootstrapKeys: [{ key: KEY, tenants: ['*'] }],
        policy: { ...POLICY, allowedCustomDomains: ['*'] },
      });
      try {
        const res = await call(
          'POST',
          '/v2/deployments',
          githubBody('cd-off', sourceConfig({ custom_url: 'https://bot.agents.example.com' })),
          'tenant-a',
          off,
        );
        expect(res.statusCode).toBe(422);
        expect(msgs(res)).toMatch(/custom domains are not enabled/);
        const ok = await call(
          'POST',
          '/v2/deployments',
          githubBody('cd-any', sourceConfig({ custom_url: 'https://my-agent.acme.io' })),
          'tenant-a',
          any,
        );
        expect(ok.statusCode, ok.body).toBe(201);
        const own = await call(
          'POST',
          '/v2/deployments',
          githubBody('cd-own', sourceConfig({ custom_url: 'api.agents.example.com' })),
          'tenant-a',
          any,
        );
        expect(own.statusCode).toBe(422);
      } finally {
        await off.close();
        await any.close();
      }
    });

    it('custom_url: racing creates of one host from two processes and two tenants, exactly one wins', async () => {
      const other = await createControlPlane({
        store: s.second!(),
        logger: silentLogger(),
        bootstrapKeys: [{ key: KEY, tenants: ['*'] }],
        policy: POLICY,
      });
      try {
        const body = (i: number) => githubBody(`race-${i}`, sourceConfig({ custom_url: 'race.agents.example.com' }));
        const results = await Promise.all(
          [0, 1, 2, 3, 4, 5].map((i) =>
            call('POST', '/v2/deployments', body(i), `tenant-${'pq'[i % 2]}${i}`, i % 2 ? other : app),
          ),
        );
        expect(results.map((r) => r.statusCode).sort()).toEqual([201, 409, 409, 409, 409, 409]);
        const holders = (await s.store.list('AgentDeployment', s.ns)).items.filter(
          (d) => d.spec.sourceConfig.customUrl === 'race.agents.example.com' && !d.metadata.deletionTimestamp,
        );
        expect(holders).toHaveLength(1);
        expect(
          (await s.store.listHostClaims(s.ns))
            .filter((c) => c.host === 'race.agents.example.com')
            .map((c) => c.owner.name),
        ).toEqual([holders[0]!.metadata.name]);
      } finally {
        await other.close();
      }
    });

    if (kind === 'embedded') {
      it('service accounts, pull secrets and secret references need the kubernetes store', async () => {
        await refused(
          'POST',
          '/v2/deployments',
          githubBody('sa', withSpec({ service_account_name: 'default' })),
          'body.source_config.resource_spec.service_account_name',
          /need the kubernetes store/,
        );
        await refused(
          'POST',
          '/v2/deployments',
          githubBody('ips', withSpec({ image_pull_secrets: ['regcred'] })),
          'body.source_config.resource_spec.image_pull_secrets.0',
          /need the kubernetes store/,
        );
        await refused(
          'POST',
          '/v2/deployments',
          githubBody('ref', { secret_references: [{ name: 'DB', secret_name: 'db', secret_key: 'url' }] }),
          'body.secret_references.0.secret_name',
          /Secret "db".*need the kubernetes store/,
        );
        const dep = await create('ref-patch');
        await refused(
          'PATCH',
          `/v2/deployments/${dep.id}`,
          { secret_references: [{ name: 'DB', secret_name: 'db', secret_key: 'url' }] },
          'body.secret_references.0.secret_name',
          /kubernetes store/,
        );
      });
    } else {
      it("service accounts and Secrets: only the tenant's own (labelled agentplane.dev/tenant), never another's or the platform's", async () => {
        const core = s.core!;
        const label = (tenant: string) => ({ [LABEL_TENANT]: tenant });
        await core.createNamespacedServiceAccount({
          namespace: s.ns,
          body: { metadata: { name: 'a-runner', labels: label('tenant-a') } },
        });
        await core.createNamespacedServiceAccount({
          namespace: s.ns,
          body: { metadata: { name: 'b-runner', labels: label('tenant-b') } },
        });
        await core.createNamespacedServiceAccount({
          namespace: s.ns,
          body: { metadata: { name: 'agentplane-control-plane' } },
        });
        await core.createNamespacedSecret({
          namespace: s.ns,
          body: { metadata: { name: 'a-db', labels: label('tenant-a') }, stringData: { url: 'postgres://a' } },
        });
        await core.createNamespacedSecret({
          namespace: s.ns,
          body: { metadata: { name: 'b-db', labels: label('tenant-b') }, stringData: { url: 'postgres://b' } },
        });
        // Another tenant's deployment environment, made by the platform.
        const victim = await create('victim', {}, 'tenant-b');
        const victimEnv = `${deploymentName(victim.id)}-env-r1`;
        const sa = 'body.source_config.resource_spec.service_account_name';
        await refused(
          'POST',
          '/v2/deployments',
          githubBody('sa', withSpec({ service_account_name: 'b-runner' })),
          sa,
          /ServiceAccount "b-runner" does not exist in namespace tenants with the label agentplane.dev\/tenant=tenant-a/,
        );
        await refused(
          'POST',
          '/v2/deployments',
          githubBody('sa', withSpec({ service_account_name: 'agentplane-control-plane' })),
          sa,
          /agentplane-control-plane/,
        );
        await refused(
          'POST',
          '/v2/deployments',
          githubBody('sa', withSpec({ service_account_name: 'nope' })),
          sa,
          /"nope"/,
        );
        for (const [i, name] of ['b-db', victimEnv, 'missing'].entries()) {
          const refs = [
            { name: 'OWN', secret_name: 'a-db', secret_key: 'url' },
            { name: `STOLEN_${i}`, secret_name: name, secret_key: 'url' },
          ];
          await refused(
            'POST',
            '/v2/deployments',
            githubBody('steal', { secret_references: refs }),
            'body.secret_references.1.secret_name',
            new RegExp(`Secret "${name}" does not exist`),
          );
        }
        await refused(
          'POST',
          '/v2/deployments',
          githubBody('ips', withSpec({ image_pull_secrets: ['a-db', 'b-db'] })),
          'body.source_config.resource_spec.image_pull_secrets.1',
          /Secret "b-db"/,
        );
        const dep = await create('own-refs', {
          ...withSpec({ service_account_name: 'a-runner', image_pull_secrets: ['a-db'] }),
          secret_references: [{ name: 'DATABASE_URI', secret_name: 'a-db', secret_key: 'url' }],
        });
        expect(dep.secret_references).toEqual([{ name: 'DATABASE_URI', secret_name: 'a-db', secret_key: 'url' }]);
        const before = await s.store.get('AgentDeployment', s.ns, deploymentName(dep.id));
        await refused(
          'PATCH',
          `/v2/deployments/${dep.id}`,
          { secret_references: [{ name: 'X', secret_name: 'b-db', secret_key: 'url' }] },
          'body.secret_references.0.secret_name',
          /"b-db"/,
        );
        await refused(
          'PATCH',
          `/v2/deployments/${dep.id}`,
          withSpec({ service_account_name: 'b-runner' }),
          sa,
          /"b-runner"/,
        );
        expect((await s.store.get('AgentDeployment', s.ns, deploymentName(dep.id))).metadata.resourceVersion).toBe(
          before.metadata.resourceVersion,
        );
        // Tenant b may use its own.
        await create('b-own', withSpec({ service_account_name: 'b-runner' }), 'tenant-b');
      });
    }
  });
}
