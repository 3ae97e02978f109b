import { describe, expect, it } from 'vitest';
import type { V1Container, V1EnvVar } from '@kubernetes/client-node';
import { kubernetesRuntimeConfigSchema } from '../../../../src/operator/runtimes/kubernetes/config.ts';
import { agentDockerfile, safeConfigPath } from '../../../../src/operator/runtimes/kubernetes/dockerfile.ts';
import {
  buildJobName,
  makeBuildJob,
  parseBuildResult,
} from '../../../../src/operator/runtimes/kubernetes/build-job.ts';
import {
  databaseFor,
  makeDeployment,
  makeActivitySecret,
  makeAutoscaler,
  makeSecret,
} from '../../../../src/operator/runtimes/kubernetes/server.ts';
import {
  deploymentUrl,
  ingressHost,
  makeIngress,
  makeService,
} from '../../../../src/operator/runtimes/kubernetes/routing.ts';
import {
  makePostgresSecret,
  makePostgresService,
  makePostgresStatefulSet,
} from '../../../../src/operator/runtimes/kubernetes/postgres.ts';
import { validateK8s } from '../../../support/kubernetes/k8s-schema.ts';
import { deploymentTarget } from '../../../support/kubernetes/target.ts';

const config = kubernetesRuntimeConfigSchema.parse({
  registry: 'registry.example.com/agents/',
  pushSecretName: 'registry-push',
  gitImage: 'ghcr.io/agentplane/agentplane:0.1.0',
  baseImage: 'ghcr.io/agentplane/agentplane:0.1.0',
  ingress: { className: 'nginx', baseDomain: 'agents.example.com', allowedCustomDomains: ['acme.io'] },
});
const id = '0b6c8f1e-5d0a-4f7b-9d7e-2a7c1f0e9b11';
const target = deploymentTarget(id, 'team-a', 'tenant-1', 'uid-1');
const rev = `ag-${id}-r3`;

function env(c: V1Container, name: string): V1EnvVar | undefined {
  return c.env?.find((e) => e.name === name);
}

function expectOwned(obj: {
  metadata?: { ownerReferences?: unknown[]; labels?: Record<string, string>; namespace?: string };
}) {
  expect(obj.metadata?.ownerReferences).toEqual([target.owner]);
  expect(obj.metadata?.namespace).toBe('team-a');
  expect(obj.metadata?.labels).toMatchObject({
    'app.kubernetes.io/part-of': 'agentplane',
    'app.kubernetes.io/managed-by': 'agentplane-operator',
    'app.kubernetes.io/instance': target.name,
    'agentplane.dev/deployment': target.name,
    'agentplane.dev/deployment-id': id,
    'agentplane.dev/tenant': 'tenant-1',
  });
}

describe('agent Dockerfile', () => {
  it('builds onto the base image, installs and runs agent-server on the graph config', () => {
    const text = agentDockerfile({
      baseImage: 'base:1',
      graphConfigPath: './agents/langgraph.json',
      buildCommand: 'npm run build',
    });
    const lines = text.split('\n');
    expect(lines[1]).toBe('FROM base:1');
    expect(text).toContain('COPY --chown=node:node . .');
    expect(text).toContain('npm ci --include=dev --no-audit --no-fund');
    expect(text).toMatch(/RUN cd .*\/deps\/app\/agents.* && npm run build/);
    // devDependencies are there for the build, pruned after it.
    const build = lines.findIndex((l) => l.endsWith('&& npm run build'));
    expect(lines[build + 1]).toMatch(/^RUN cd .* && if \[ -f package.json \]; then npm prune --omit=dev/);
    expect(text).toContain('ENV AGENTPLANE_GRAPH_CONFIG="/deps/app/agents/langgraph.json" HOST=0.0.0.0 PORT=8000');
    expect(lines.at(-2)).toBe('CMD ["agent-server"]');
  });

  it('uses the install command when given', () => {
    const text = agentDockerfile({
      baseImage: 'b',
      graphConfigPath: 'langgraph.json',
      installCommand: 'yarn install --frozen-lockfile',
    });
    expect(text).toContain('&& yarn install --frozen-lockfile');
    expect(text).not.toContain('npm ci');
    expect(text).not.toContain('npm prune');
  });

  it.each(['../x/langgraph.json', '/etc/langgraph.json', 'a"b.json', 'a\nRUN evil', '.', ''])(
    'refuses config path %j',
    (p) => {
      expect(() => safeConfigPath(p)).toThrow(/graph config path/);
    },
  );

  it('refuses multi-line commands (they would inject Dockerfile instructions)', () => {
    expect(() =>
      agentDockerfile({ baseImage: 'b', graphConfigPath: 'langgraph.json', buildCommand: 'a\nUSER root' }),
    ).toThrow(/build_command must be a single line/);
  });
});

describe('makeBuildJob', () => {
  const job = makeBuildJob(
    target,
    { revision: rev, repoUrl: 'https://github.com/acme/agent.git', repoRef: 'v1.2', graphConfigPath: 'langgraph.json' },
    config,
  );
  const pod = job.spec!.template.spec!;
  const clone = pod.initContainers![0]!;
  const build = pod.initContainers![1]!;
  const push = pod.containers[0]!;
  const all = [...pod.initContainers!, ...pod.containers];

  it('is schema-valid, owned and labelled with the revision', () => {
    validateK8s(job);
    expectOwned(job);
    expect(job.metadata!.name).toBe(buildJobName(rev));
    expect(job.metadata!.labels!['agentplane.dev/revision']).toBe(rev);
    expect(job.spec!.template.metadata!.labels!['agentplane.dev/revision']).toBe(rev);
  });

  it('fails once instead of retrying, within a deadline', () => {
    expect(job.spec!.backoffLimit).toBe(0);
    expect(job.spec!.activeDeadlineSeconds).toBe(1800);
    expect(pod.restartPolicy).toBe('Never');
  });

  it('clones repo_url at repo_ref in an init container and writes the generated Dockerfile', () => {
    expect(clone.image).toBe(config.gitImage);
    expect(env(clone, 'REPO_URL')!.value).toBe('https://github.com/acme/agent.git');
    expect(env(clone, 'REPO_REF')!.value).toBe('v1.2');
    expect(env(clone, 'DOCKERFILE')!.value).toContain(`FROM ${config.baseImage}`);
    const script = clone.command!.join(' ');
    expect(script).toContain('git clone');
    expect(script).toContain('refs/tags/$REPO_REF');
    expect(script).toContain('> /workspace/Dockerfile');
  });

  it('builds with rootless daemonless BuildKit into an OCI layout, then pushes it in a separate step', () => {
    expect(pod.initContainers!.map((c) => c.name)).toEqual(['clone', 'build']);
    expect(pod.containers.map((c) => c.name)).toEqual(['push']);
    expect(build.image).toBe('moby/buildkit:v0.16.0-rootless');
    const script = build.command!.join(' ');
    expect(script).toContain('buildctl-daemonless.sh build');
    expect(script).toContain('type=oci,dest=/image/layout');
    expect(script).not.toContain('push=true');
    expect(env(build, 'IMAGE')!.value).toBe(`registry.example.com/agents/${target.name}:${rev}`);
    expect(env(build, 'BUILDKITD_FLAGS')!.value).toBe('--oci-worker-no-process-sandbox');
    expect(build.securityContext!.seccompProfile!.type).toBe('Unconfined');
    expect(build.securityContext!.runAsUser).toBe(1000);
    expect(push.image).toBe(config.pushImage);
    expect(push.command!.join(' ')).toContain('skopeo copy');
    expect(push.command!.join(' ')).toContain('oci:/image/layout "docker://$IMAGE"');
    expect(env(push, 'IMAGE')!.value).toBe(env(build, 'IMAGE')!.value);
  });

  // RUN steps execute inside the build container (BuildKit without a process sandbox shares its PID namespace):
  // whatever that container mounts or holds, the repository's code can read.
  it('mounts the push secret only in the push container, which runs after the build has exited', () => {
    expect(push.volumeMounts).toContainEqual({
      name: 'push-secret',
      mountPath: '/var/run/agentplane/push',
      readOnly: true,
    });
    expect(env(push, 'REGISTRY_AUTH_FILE')!.value).toBe('/var/run/agentplane/push/config.json');
    for (const c of [clone, build]) {
      expect(
        c.volumeMounts!.map((m) => m.name),
        c.name,
      ).not.toContain('push-secret');
      expect(JSON.stringify(c.env), c.name).not.toContain('/var/run/agentplane/push');
      expect(c.envFrom, c.name).toBeUndefined();
    }
    expect(pod.shareProcessNamespace).toBeUndefined();
    expect(pod.volumes!.find((v) => v.name === 'push-secret')!.secret).toEqual({
      secretName: 'registry-push',
      items: [{ key: '.dockerconfigjson', path: 'config.json' }],
    });
    // The build cannot rewrite the commit the push step reports.
    expect(build.volumeMounts).toContainEqual({ name: 'workspace', mountPath: '/workspace', readOnly: true });
  });

  it('gives the build step a pull-only credential when one is configured, never the push one', () => {
    const j = makeBuildJob(
      target,
      { revision: rev, repoUrl: 'https://x/y.git', repoRef: 'main', graphConfigPath: 'langgraph.json' },
      { ...config, buildPullSecretName: 'registry-pull' },
    );
    validateK8s(j);
    const b = j.spec!.template.spec!.initContainers![1]!;
    expect(b.volumeMounts).toContainEqual({ name: 'pull-secret', mountPath: '/home/user/.docker', readOnly: true });
    expect(j.spec!.template.spec!.volumes!.find((v) => v.name === 'pull-secret')!.secret!.secretName).toBe(
      'registry-pull',
    );
    expect(b.volumeMounts!.map((m) => m.name)).not.toContain('push-secret');
  });

  it('bounds every container and every emptyDir, and mounts no API token', () => {
    for (const c of all) {
      expect(c.resources, c.name).toEqual({
        requests: { cpu: '500m', memory: '1Gi' },
        limits: { cpu: '2', memory: '4Gi' },
      });
    }
    const dirs = pod.volumes!.filter((v) => v.emptyDir);
    expect(dirs.map((v) => [v.name, v.emptyDir!.sizeLimit])).toEqual([
      ['workspace', '4Gi'],
      ['image', '4Gi'],
      ['buildkitd', '10Gi'],
    ]);
    expect(pod.automountServiceAccountToken).toBe(false);
    // No *_SERVICE_HOST variables naming the namespace's other Services to the repository's RUN steps.
    expect(pod.enableServiceLinks).toBe(false);
    expect(job.spec!.activeDeadlineSeconds).toBe(1800);
    const custom = makeBuildJob(
      target,
      { revision: rev, repoUrl: 'https://x/y.git', repoRef: 'main', graphConfigPath: 'langgraph.json' },
      {
        ...config,
        buildResources: { requests: { cpu: '1', memory: '2Gi' }, limits: { cpu: '3', memory: '6Gi' } },
        buildWorkspaceSize: '8Gi',
        buildCacheSize: '20Gi',
      },
    );
    validateK8s(custom);
    expect(custom.spec!.template.spec!.containers[0]!.resources!.limits).toEqual({ cpu: '3', memory: '6Gi' });
    expect(custom.spec!.template.spec!.volumes!.map((v) => v.emptyDir?.sizeLimit)).toEqual([
      '8Gi',
      '8Gi',
      '20Gi',
      undefined,
    ]);
  });

  it('records commit and digest in the termination message', () => {
    expect(push.terminationMessagePath).toBe('/dev/termination-log');
    expect(push.command!.join(' ')).toContain('> /dev/termination-log');
    const digest = `sha256:${'a'.repeat(64)}`;
    expect(parseBuildResult(JSON.stringify({ commit: 'abc1234', digest }))).toEqual({ commit: 'abc1234', digest });
    expect(parseBuildResult('not json')).toBeUndefined();
    expect(parseBuildResult(JSON.stringify({ commit: 'abc1234', digest: 'latest' }))).toBeUndefined();
    expect(parseBuildResult(undefined)).toBeUndefined();
  });

  it('mounts no push secret when none is configured', () => {
    const anon = makeBuildJob(
      target,
      { revision: rev, repoUrl: 'https://x/y.git', repoRef: 'main', graphConfigPath: 'langgraph.json' },
      { ...config, pushSecretName: undefined },
    );
    validateK8s(anon);
    expect(anon.spec!.template.spec!.volumes!.map((v) => v.name)).toEqual(['workspace', 'image', 'buildkitd']);
    expect(env(anon.spec!.template.spec!.containers[0]!, 'REGISTRY_AUTH_FILE')).toBeUndefined();
  });
});

describe('makeSecret', () => {
  it('holds the revision environment, immutable and owned', () => {
    const s = makeSecret(target, rev, { OPENAI_API_KEY: 'sk-1', AGENT_GREETING: 'hi' });
    validateK8s(s);
    expectOwned(s);
    expect(s.metadata!.name).toBe(`${rev}-env`);
    expect(s.immutable).toBe(true);
    expect(s.stringData).toEqual({ OPENAI_API_KEY: 'sk-1', AGENT_GREETING: 'hi' });
  });
});

describe('makeDeployment', () => {
  const image = `registry.example.com/agents/${target.name}@sha256:${'b'.repeat(64)}`;
  const dep = makeDeployment(
    target,
    {
      revision: rev,
      image,
      envNames: ['OPENAI_API_KEY'],
      secretReferences: [{ name: 'ANTHROPIC_API_KEY', secretName: 'llm-keys', secretKey: 'anthropic' }],
      resourceSpec: {
        minScale: 2,
        cpu: 1.5,
        memoryMb: 1024,
        memoryLimitMb: 2048,
        labels: { team: 'a', 'app.kubernetes.io/instance': 'hijack' },
        annotations: { 'prometheus.io/scrape': 'true' },
        serviceAccountName: 'agent-sa',
        imagePullSecrets: ['pull-1'],
        nodeSelector: { pool: 'agents' },
      },
      serviceAccount: { name: 'agent-sa', automountToken: false },
    },
    config,
  );
  const pod = dep.spec!.template.spec!;
  const c = pod.containers[0]!;

  it('is schema-valid and owned', () => {
    validateK8s(dep);
    expectOwned(dep);
    expect(dep.metadata!.name).toBe(target.name);
    expect(
      makeDeployment(target, { revision: rev, image, envNames: [], url: 'https://bot.acme.io' }, config).metadata!
        .annotations,
    ).toMatchObject({
      'agentplane.dev/url': 'https://bot.acme.io',
    });
  });

  it("mounts the deployment's activity token (and no other's) only when the operator asks its pods for activity", () => {
    expect(pod.volumes!.some((v) => v.name === 'activity')).toBe(false);
    expect(env(c, 'AGENTPLANE_ACTIVITY_TOKEN_FILE')).toBeUndefined();
    // A workspace secret of the same name: `env` wins over envFrom, so the token file stays the platform's.
    const asked = makeDeployment(
      target,
      { revision: rev, image, envNames: ['AGENTPLANE_ACTIVITY_TOKEN_FILE'], activityToken: true },
      config,
    );
    validateK8s(asked);
    const spec = asked.spec!.template.spec!;
    expect(spec.volumes!.find((v) => v.name === 'activity')).toEqual({
      name: 'activity',
      secret: { secretName: `${target.name}-activity` },
    });
    expect(spec.containers[0]!.volumeMounts).toContainEqual({
      name: 'activity',
      mountPath: '/var/run/agentplane/activity',
      readOnly: true,
    });
    expect(env(spec.containers[0]!, 'AGENTPLANE_ACTIVITY_TOKEN_FILE')!.value).toBe(
      '/var/run/agentplane/activity/token',
    );
    const secret = makeActivitySecret(target, 'tok');
    validateK8s(secret);
    expectOwned(secret);
    expect(secret.metadata!.name).toBe(`${target.name}-activity`);
    expect(secret.stringData).toEqual({ token: 'tok' });
  });

  it('runs the image on 8000 with /ok readiness and liveness probes', () => {
    expect(c.image).toBe(image);
    expect(c.ports).toEqual([{ name: 'http', containerPort: 8000, protocol: 'TCP' }]);
    expect(c.readinessProbe!.httpGet).toEqual({ path: '/ok', port: 'http' });
    expect(c.livenessProbe!.httpGet).toEqual({ path: '/ok', port: 'http' });
    expect(env(c, 'HOST')!.value).toBe('0.0.0.0');
  });

  it('takes replicas, resources, labels, annotations, service account, pull secrets from resource_spec', () => {
    expect(dep.spec!.replicas).toBe(2);
    expect(c.resources).toEqual({ requests: { cpu: '1500m', memory: '1Gi' }, limits: { memory: '2Gi' } });
    expect(dep.spec!.template.metadata!.labels).toMatchObject({ team: 'a', 'app.kubernetes.io/instance': target.name });
    expect(dep.spec!.template.metadata!.annotations).toMatchObject({
      'prometheus.io/scrape': 'true',
      'agentplane.dev/revision': rev,
    });
    expect(pod.serviceAccountName).toBe('agent-sa');
    expect(pod.imagePullSecrets).toEqual([{ name: 'pull-1' }]);
    expect(pod.nodeSelector).toEqual({ pool: 'agents' });
  });

  it('selects by stable labels only, which the pod template carries', () => {
    const sel = dep.spec!.selector.matchLabels!;
    expect(sel).toEqual({ 'app.kubernetes.io/instance': target.name, 'app.kubernetes.io/component': 'server' });
    expect(dep.spec!.template.metadata!.labels).toMatchObject(sel);
  });

  it('rolls out without downtime within the progress deadline', () => {
    expect(dep.spec!.strategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } });
    expect(dep.spec!.progressDeadlineSeconds).toBe(600);
  });

  it('gets env from the revision Secret and secret_references, and the internal DATABASE_URI', () => {
    expect(c.envFrom).toEqual([{ secretRef: { name: `${rev}-env` } }]);
    expect(env(c, 'ANTHROPIC_API_KEY')!.valueFrom).toEqual({ secretKeyRef: { name: 'llm-keys', key: 'anthropic' } });
    expect(env(c, 'DATABASE_URI')!.valueFrom).toEqual({
      secretKeyRef: { name: `${target.name}-postgres`, key: 'uri' },
    });
  });

  it('never shadows an external DATABASE_URI from a secret reference', () => {
    const d = makeDeployment(
      target,
      {
        revision: rev,
        image,
        envNames: [],
        secretReferences: [{ name: 'DATABASE_URI', secretName: 'pg', secretKey: 'url' }],
      },
      config,
    );
    validateK8s(d);
    const dbEnv = d.spec!.template.spec!.containers[0]!.env!.filter((e) => e.name === 'DATABASE_URI');
    expect(dbEnv).toEqual([{ name: 'DATABASE_URI', valueFrom: { secretKeyRef: { name: 'pg', key: 'url' } } }]);
    expect(d.spec!.template.spec!.containers[0]!.envFrom).toBeUndefined();
  });

  it('never shadows an external DATABASE_URI among the secrets', () => {
    const d = makeDeployment(target, { revision: rev, image, envNames: ['DATABASE_URI'] }, config);
    expect(env(d.spec!.template.spec!.containers[0]!, 'DATABASE_URI')).toBeUndefined();
  });

  it('uses default resources and one replica when resource_spec is empty', () => {
    const d = makeDeployment(target, { revision: rev, image, envNames: [] }, config);
    validateK8s(d);
    expect(d.spec!.replicas).toBe(1);
    expect(d.spec!.template.spec!.containers[0]!.resources).toEqual({ requests: { cpu: '500m', memory: '512Mi' } });
  });

  it('refuses min_scale above max_scale', () => {
    expect(() =>
      makeDeployment(
        target,
        { revision: rev, image, envNames: [], resourceSpec: { minScale: 3, maxScale: 1 } },
        config,
      ),
    ).toThrow(/min_scale/);
  });

  it('is deterministic (applying it twice is a no-op)', () => {
    const a = makeDeployment(target, { revision: rev, image, envNames: ['A'] }, config);
    const b = makeDeployment(target, { revision: rev, image, envNames: ['A'] }, config);
    expect(a).toEqual(b);
  });
});

describe('makeAutoscaler', () => {
  it('scales between min_scale and max_scale on CPU and leaves replicas to it', () => {
    const hpa = makeAutoscaler(target, { minScale: 2, maxScale: 5 })!;
    validateK8s(hpa);
    expectOwned(hpa);
    expect(hpa.spec!.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: target.name });
    expect([hpa.spec!.minReplicas, hpa.spec!.maxReplicas]).toEqual([2, 5]);
    const d = makeDeployment(
      target,
      { revision: rev, image: 'i', envNames: [], resourceSpec: { minScale: 2, maxScale: 5 } },
      config,
    );
    validateK8s(d);
    expect(d.spec!.replicas).toBeUndefined();
  });

  it.each([[{}], [{ minScale: 3 }], [{ minScale: 2, maxScale: 2 }], [{ maxScale: 1 }]])(
    'is not made for %j',
    (spec) => {
      expect(makeAutoscaler(target, spec)).toBeUndefined();
    },
  );
});

describe('databaseFor', () => {
  it.each([
    [[], [], { kind: 'internal' }],
    [['DATABASE_URI'], [], { kind: 'external', from: 'secret', name: 'DATABASE_URI' }],
    [['POSTGRES_URI'], [], { kind: 'external', from: 'secret', name: 'POSTGRES_URI' }],
    [
      [],
      [{ name: 'DATABASE_URI', secretName: 's', secretKey: 'k' }],
      { kind: 'external', from: 'secret_reference', name: 'DATABASE_URI' },
    ],
    [['OTHER'], [{ name: 'OTHER_REF', secretName: 's', secretKey: 'k' }], { kind: 'internal' }],
  ])('env %j refs %j -> %j', (names, refs, expected) => {
    expect(databaseFor(names, refs)).toEqual(expected);
  });
});

describe('makeService and makeIngress', () => {
  it('exposes the server port through a ClusterIP Service selecting the server pods', () => {
    const svc = makeService(target);
    validateK8s(svc);
    expectOwned(svc);
    expect(svc.spec!.selector).toEqual({
      'app.kubernetes.io/instance': target.name,
      'app.kubernetes.io/component': 'server',
    });
    expect(svc.spec!.ports).toEqual([{ name: 'http', port: 80, targetPort: 'http', protocol: 'TCP' }]);
  });

  it('routes custom_url host, else <name>.<base domain>, else nothing', () => {
    expect(ingressHost(target, 'https://bot.acme.io/path', config)).toBe('bot.acme.io');
    expect(ingressHost(target, 'bot.acme.io', config)).toBe('bot.acme.io');
    expect(ingressHost(target, null, config)).toBe(`${target.name}.agents.example.com`);
    expect(
      ingressHost(target, null, { ...config, ingress: { ...config.ingress, baseDomain: undefined } }),
    ).toBeUndefined();
    expect(() => ingressHost(target, 'https://bad_host!', config)).toThrow(/custom_url/);
  });

  it('builds a schema-valid Ingress with the class and TLS', () => {
    const ing = makeIngress(target, 'bot.acme.io', {
      ...config,
      ingress: { ...config.ingress, tlsSecretName: 'wild' },
    });
    validateK8s(ing);
    expectOwned(ing);
    expect(ing.spec!.ingressClassName).toBe('nginx');
    expect(ing.spec!.tls).toEqual([{ hosts: ['bot.acme.io'], secretName: 'wild' }]);
    expect(ing.spec!.rules![0]!.host).toBe('bot.acme.io');
    expect(ing.spec!.rules![0]!.http!.paths[0]!.backend.service).toEqual({ name: target.name, port: { name: 'http' } });
  });

  it('annotates the Ingress and, asked to, names a TLS Secret of its own for cert-manager to issue', () => {
    const annotations = {
      'cert-manager.io/cluster-issuer': 'letsencrypt',
      'nginx.ingress.kubernetes.io/proxy-body-size': '8m',
    };
    const ing = makeIngress(target, 'bot.acme.io', {
      ...config,
      ingress: { ...config.ingress, annotations, tlsSecretPerIngress: true },
    });
    validateK8s(ing);
    expect(ing.metadata!.annotations).toEqual(annotations);
    expect(ing.spec!.tls).toEqual([{ hosts: ['bot.acme.io'], secretName: `${target.name}-tls` }]);
    expect(
      deploymentUrl(target, 'bot.acme.io', { ...config, ingress: { ...config.ingress, tlsSecretPerIngress: true } }),
    ).toBe('https://bot.acme.io');
    // Without either: no annotations, no TLS.
    const plain = makeIngress(target, 'bot.acme.io', config);
    expect(plain.metadata!.annotations).toBeUndefined();
    expect(plain.spec!.tls).toBeUndefined();
  });

  it('gives the ingress URL or the cluster DNS name', () => {
    expect(deploymentUrl(target, 'bot.acme.io', config)).toBe('http://bot.acme.io');
    expect(deploymentUrl(target, undefined, config)).toBe(`http://${target.name}.team-a.svc`);
    expect(deploymentUrl(target, undefined, { ...config, clusterDomain: 'cluster.local' })).toBe(
      `http://${target.name}.team-a.svc.cluster.local`,
    );
  });
});

describe('dev Postgres', () => {
  it('is a one-replica StatefulSet with a PVC template, headless Service and a URI Secret', () => {
    const sts = makePostgresStatefulSet(target, config);
    const svc = makePostgresService(target);
    const secret = makePostgresSecret(target, 'p@ss/word', config);
    for (const o of [sts, svc, secret]) {
      validateK8s(o);
      expectOwned(o);
    }
    expect(sts.spec!.replicas).toBe(1);
    expect(sts.spec!.serviceName).toBe(svc.metadata!.name);
    expect(sts.spec!.volumeClaimTemplates![0]!.spec!.resources!.requests).toEqual({ storage: '1Gi' });
    expect(sts.spec!.template.spec!.containers[0]!.volumeMounts).toEqual([
      { name: 'data', mountPath: '/var/lib/postgresql/data' },
    ]);
    expect(svc.spec!.clusterIP).toBe('None');
    expect(sts.spec!.persistentVolumeClaimRetentionPolicy).toEqual({ whenDeleted: 'Delete', whenScaled: 'Retain' });
    expect(svc.spec!.selector).toEqual(sts.spec!.selector.matchLabels);
    expect(secret.stringData!.uri).toBe(
      `postgresql://agent:p%40ss%2Fword@${target.name}-postgres.team-a.svc:5432/agent`,
    );
  });
});

describe('schema validation helper', () => {
  it('rejects an object the API server would reject', () => {
    const bad = makeService(target) as unknown as { spec: { ports: { port: unknown }[] } };
    bad.spec.ports[0]!.port = 'eighty';
    expect(() => validateK8s(bad)).toThrow(/port/);
    expect(() => validateK8s({ apiVersion: 'v9', kind: 'Nope' })).toThrow(/no schema/);
  });
});

describe('private registries and ordering', () => {
  const withPull = { ...config, imagePullSecrets: ['registry-pull'] };
  const image = `registry.example.com/agents/${target.name}@sha256:${'c'.repeat(64)}`;

  it('gives agent pods the operator pull secrets before the tenant ones, once each', () => {
    const d = makeDeployment(
      target,
      {
        revision: rev,
        image,
        envNames: ['DATABASE_URI'],
        resourceSpec: { imagePullSecrets: ['mine', 'registry-pull'] },
      },
      withPull,
    );
    validateK8s(d);
    expect(d.spec!.template.spec!.imagePullSecrets).toEqual([{ name: 'registry-pull' }, { name: 'mine' }]);
    expect(
      makeDeployment(target, { revision: rev, image, envNames: ['DATABASE_URI'] }, config).spec!.template.spec!
        .imagePullSecrets,
    ).toBeUndefined();
  });

  it('gives build pods the pull secrets', () => {
    const job = makeBuildJob(
      target,
      { revision: rev, repoUrl: 'https://git.example.com/a.git', repoRef: 'main', graphConfigPath: 'langgraph.json' },
      withPull,
    );
    validateK8s(job);
    expect(job.spec!.template.spec!.imagePullSecrets).toEqual([{ name: 'registry-pull' }]);
  });

  it('makes agent pods with their own Postgres wait for it, and only those', () => {
    const own = makeDeployment(
      target,
      { revision: rev, image, envNames: [] },
      { ...config, clusterDomain: 'cluster.local' },
    );
    validateK8s(own);
    const init = own.spec!.template.spec!.initContainers!;
    expect(init.map((c) => c.name)).toEqual(['wait-for-postgres']);
    expect(init[0]!.env).toEqual([{ name: 'PGHOST', value: `${target.name}-postgres.team-a.svc.cluster.local` }]);
    expect(init[0]!.image).toBe(config.postgres.image);
    const external = makeDeployment(target, { revision: rev, image, envNames: ['DATABASE_URI'] }, config);
    expect(external.spec!.template.spec!.initContainers).toBeUndefined();
  });
});
