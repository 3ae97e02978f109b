// A real Kubernetes control plane for the kube tier (test/kube/): etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok, built by scripts/kube-binaries.mjs, started as processes on free loopback ports in a
// temporary folder that stop() removes. No kubelet and no container runtime: kwok plays the nodes, so pods the real
// scheduler places are marked Running and Ready, and deleted pods go, but no container ever runs.
// The API server enforces what a cluster admin's does: RBAC, the default admission chain plus PodSecurity and
// OwnerReferencesPermissionEnforcement, ServiceAccount tokens signed with a key pair made here. The administrator
// is a static token in system:masters; as(namespace, account) gives a kubeconfig with a real TokenRequest token
// of that ServiceAccount, so a process runs with exactly the rights RBAC grants it.
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { loadKubeConfig } from '../../src/lib/kube-config.ts';
import { parseAllDocuments, stringify } from 'yaml';

type Json = Record<string, any>;

/**
 * kwok 0.8's known crash at start: two of its goroutines build CEL environments at once (the stages' lifecycle and
 * the metrics endpoint), and easycel 0.6 caches types in maps without a lock, so Go's runtime may end the process
 * ("fatal error: concurrent map ...", the stack in easycel) before it has done anything. Nothing of the cluster is
 * lost and, started again, kwok comes up (the race is rare). Any other exit of a component fails the test as before.
 */
export function kwokStartRace(output: string): boolean {
  return /^(fatal error: concurrent map|panic: )/m.test(output) && output.includes('github.com/wzshiming/easycel');
}

/**
 * No container runs on kwok's nodes, so a test plays the container of a Job's pod: it sets these annotations on
 * the pod (the exit code, and what the container wrote to its termination message) and kwok then reports the pod
 * as the kubelet would: the containers terminated with that code and message, the pod Succeeded or Failed.
 */
export const EXIT_CODE_ANNOTATION = 'kwok.agentplane.dev/exit-code';
export const TERMINATION_MESSAGE_ANNOTATION = 'kwok.agentplane.dev/termination-message';

/**
 * kwok's stages with its "pod-complete" stage (every Running pod of a Job Succeeded at once, no termination
 * message) replaced by one that waits for the test's exit code (above).
 */
function kwokStages(source: string): string {
  const docs = parseAllDocuments(readFileSync(source, 'utf8')).map((d) => d.toJSON() as Json);
  const complete = docs.find((d) => d.metadata?.name === 'pod-complete');
  if (!complete) throw new Error(`${source} has no pod-complete stage`);
  complete.spec.selector.matchExpressions.push({
    key: `.metadata.annotations["${EXIT_CODE_ANNOTATION}"]`,
    operator: 'Exists',
  });
  complete.spec.next.statusTemplate = `{{ $now := Now }}
{{ $code := index .metadata.annotations "${EXIT_CODE_ANNOTATION}" }}
{{ $message := or (index .metadata.annotations "${TERMINATION_MESSAGE_ANNOTATION}") "" }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: {{ $code }}
      message: {{ $message | Quote }}
      reason: {{ if eq $code "0" }}Completed{{ else }}Error{{ end }}
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
{{ end }}
phase: {{ if eq $code "0" }}Succeeded{{ else }}Failed{{ end }}
`;
  return docs.map((d) => stringify(d)).join('---\n');
}

export type Identity = { kubeConfig: KubeConfig; kubeconfigPath: string; token: string };

export type KubeControlPlane = {
  /** https://127.0.0.1:<port> */
  server: string;
  dir: string;
  admin: Identity;
  /** A kubeconfig holding a fresh token of ServiceAccount `namespace/name` (TokenRequest, one hour). */
  as(namespace: string, serviceAccount: string): Promise<Identity>;
  /** The administrator's request to the API (JSON in and out), for what a client library would hide. */
  request(method: string, path: string, body?: unknown, contentType?: string): Promise<{ status: number; body: Json }>;
  /** The first event of a watch (`path` with ?watch=1), as the administrator. */
  watchFirst(path: string): Promise<Json>;
  /** The last lines a component wrote (its log file), for a failure's message. */
  logTail(component: string, lines?: number): string;
  stop(): Promise<void>;
};

/** A port the kernel had free a moment ago (each component binds it right after; loopback only). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

function writeKubeconfig(path: string, server: string, ca: string, token: string, namespace = 'default'): Identity {
  const doc = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'kube', cluster: { server, 'certificate-authority-data': Buffer.from(ca).toString('base64') } }],
    users: [{ name: 'user', user: { token } }],
    contexts: [{ name: 'kube', context: { cluster: 'kube', user: 'user', namespace } }],
    'current-context': 'kube',
  };
  writeFileSync(path, JSON.stringify(doc, null, 2), { mode: 0o600 });
  // As agentplane's processes load it (their API clients reuse connections).
  const kubeConfig = loadKubeConfig(path);
  return { kubeConfig, kubeconfigPath: path, token };
}

// The controllers the flows need; nodeipam, node lifecycle, cloud and volume controllers stay off (kwok nodes have
// no cloud and no volumes; the node lifecycle controller would taint a node whose lease kwok renews late).
const CONTROLLERS = [
  'garbage-collector-controller',
  'namespace-controller',
  'deployment-controller',
  'replicaset-controller',
  'job-controller',
  'cronjob-controller',
  'ttl-after-finished-controller',
  'statefulset-controller',
  'horizontal-pod-autoscaler-controller',
  'disruption-controller',
  'endpoints-controller',
  'endpointslice-controller',
  'persistentvolume-binder-controller',
  'persistentvolumeclaim-protection-controller',
  'persistentvolume-protection-controller',
  'serviceaccount-controller',
  'serviceaccount-token-controller',
  'root-ca-certificate-publisher-controller',
  'resourcequota-controller',
  'pod-garbage-collector-controller',
];

export async function startKubeControlPlane(opts: { binaries: string; nodes?: number }): Promise<KubeControlPlane> {
  const dir = mkdtempSync(join(tmpdir(), 'ap-kube-'));
  const bin = (name: string) => join(opts.binaries, name);
  const children = new Map<string, ChildProcess>();
  const logs = new Map<string, string>();
  let stopping = false;

  const logTail = (component: string, lines = 30) => {
    const file = logs.get(component);
    if (!file) return '';
    try {
      return readFileSync(file, 'utf8').trim().split('\n').slice(-lines).join('\n');
    } catch {
      return '';
    }
  };
  const exits: string[] = [];
  /** Set once the control plane is up: until then kwok's start-up race (kwokStartRace) is met by starting it again. */
  let up = false;
  let kwokRestarts = 0;
  const start = (name: string, args: string[]) => {
    const file = join(dir, `${name}.log`);
    logs.set(name, file);
    // Where this start's output begins in the log (a restarted component appends to the same file).
    const from = existsSync(file) ? statSync(file).size : 0;
    const fd = openSync(file, 'a');
    // HOME is the temporary folder: no component reads the user's own configuration (kwok's ~/.kwok/kwok.yaml).
    const child = spawn(bin(name), args, {
      cwd: dir,
      stdio: ['ignore', fd, fd],
      env: { PATH: process.env.PATH ?? '', HOME: dir },
    });
    closeSync(fd);
    child.on('exit', (code, signal) => {
      if (stopping) return;
      if (name === 'kwok' && !up && kwokRestarts < 3 && kwokStartRace(readFileSync(file).subarray(from).toString())) {
        kwokRestarts++;
        start(name, args);
        return;
      }
      exits.push(`${name} exited (${code ?? signal}):\n${logTail(name)}`);
    });
    children.set(name, child);
  };
  const stop = async () => {
    stopping = true;
    // Clients first, etcd last: the API server's shutdown needs etcd.
    for (const name of ['kwok', 'kube-scheduler', 'kube-controller-manager', 'kube-apiserver', 'etcd']) {
      const child = children.get(name);
      if (!child || child.exitCode !== null || child.signalCode !== null) continue;
      const gone = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await gone;
      clearTimeout(timer);
    }
    // TEST_KEEP_KUBE=1 keeps the folder (each component's log, etcd's data) to look at after a failure.
    if (process.env.TEST_KEEP_KUBE === '1') process.stderr.write(`kube control plane folder kept: ${dir}\n`);
    else rmSync(dir, { recursive: true, force: true });
  };

  try {
    // etcd, fsync off: the data lives as long as the test file.
    const [etcdPort, peerPort, apiPort, kcmPort, schedPort, kwokPort] = await Promise.all(
      Array.from({ length: 6 }, freePort),
    );
    const etcdUrl = `http://127.0.0.1:${etcdPort}`;
    start('etcd', [
      '--data-dir',
      join(dir, 'etcd'),
      '--listen-client-urls',
      etcdUrl,
      '--advertise-client-urls',
      etcdUrl,
      '--listen-peer-urls',
      `http://127.0.0.1:${peerPort}`,
      '--initial-advertise-peer-urls',
      `http://127.0.0.1:${peerPort}`,
      '--initial-cluster',
      `default=http://127.0.0.1:${peerPort}`,
      '--unsafe-no-fsync',
      '--log-level',
      'warn',
    ]);

    // The ServiceAccount token signing pair, and the administrator's static token.
    const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const saPub = join(dir, 'sa.pub');
    const saKey = join(dir, 'sa.key');
    writeFileSync(saPub, publicKey.export({ type: 'spki', format: 'pem' }));
    writeFileSync(saKey, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    const adminToken = randomBytes(24).toString('hex');
    writeFileSync(join(dir, 'tokens.csv'), `${adminToken},admin,admin-uid,"system:masters"\n`, { mode: 0o600 });
    const certDir = join(dir, 'apiserver');
    mkdirSync(certDir);
    start('kube-apiserver', [
      '--etcd-servers',
      etcdUrl,
      '--bind-address',
      '127.0.0.1',
      '--advertise-address',
      '127.0.0.1',
      '--secure-port',
      String(apiPort),
      '--cert-dir',
      certDir,
      '--service-cluster-ip-range',
      '10.96.0.0/16',
      '--authorization-mode',
      'RBAC',
      '--token-auth-file',
      join(dir, 'tokens.csv'),
      '--service-account-issuer',
      'https://kubernetes.default.svc.cluster.local',
      '--service-account-key-file',
      saPub,
      '--service-account-signing-key-file',
      saKey,
      // PodSecurity is in the default chain already; owner-reference enforcement is what a hardened cluster adds.
      '--enable-admission-plugins',
      'PodSecurity,OwnerReferencesPermissionEnforcement',
      // It taints every new node not-ready until the node lifecycle controller sees it Ready; that controller is
      // off here (kwok's heartbeats are no kubelet's), so the taint would never go and no pod would be scheduled.
      '--disable-admission-plugins',
      'TaintNodesByCondition',
      '--allow-privileged=true',
      // One client (these tests): fairness queues only cost CPU on a 2-core machine.
      '--enable-priority-and-fairness=false',
      '--profiling=false',
    ]);
    const server = `https://127.0.0.1:${apiPort}`;

    // The API server writes its self-signed certificate (with its CA) before it listens: requests verify it.
    const certFile = join(certDir, 'apiserver.crt');
    let ca = '';
    const request = (method: string, path: string, body?: unknown, contentType = 'application/json') =>
      new Promise<{ status: number; body: Json }>((resolve, reject) => {
        const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
        const req = httpsRequest(
          `${server}${path}`,
          {
            method,
            ca,
            headers: {
              authorization: `Bearer ${adminToken}`,
              accept: 'application/json',
              // With a length: node sends a DELETE's body without one, and the server would read it as the next
              // request on the connection (its DeleteOptions unseen).
              ...(payload !== undefined
                ? { 'content-type': contentType, 'content-length': String(Buffer.byteLength(payload)) }
                : {}),
            },
          },
          (res) => {
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (d: string) => (text += d));
            res.on('end', () => {
              let parsed: Json;
              try {
                parsed = text ? (JSON.parse(text) as Json) : {};
              } catch {
                parsed = { text };
              }
              resolve({ status: res.statusCode ?? 0, body: parsed });
            });
          },
        );
        req.on('error', reject);
        req.end(payload);
      });
    const watchFirst = (path: string) =>
      new Promise<Json>((resolve, reject) => {
        const req = httpsRequest(
          `${server}${path}`,
          { ca, headers: { authorization: `Bearer ${adminToken}`, accept: 'application/json' } },
          (res) => {
            let buf = '';
            res.setEncoding('utf8');
            res.on('data', (d: string) => {
              buf += d;
              const nl = buf.indexOf('\n');
              if (nl < 0) return;
              resolve(JSON.parse(buf.slice(0, nl)) as Json);
              req.destroy();
            });
            res.on('end', () => reject(new Error(`watch ${path} ended without an event (${res.statusCode})`)));
          },
        );
        req.on('error', reject);
        req.end();
      });
    const until = async (what: string, check: () => Promise<boolean>, ms = 90_000) => {
      const deadline = Date.now() + ms;
      for (;;) {
        if (exits.length > 0) throw new Error(exits.join('\n'));
        try {
          if (await check()) return;
        } catch {
          // not up yet
        }
        if (Date.now() > deadline) throw new Error(`kube control plane: timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    };
    await until('the API server certificate', async () => existsSync(certFile));
    ca = readFileSync(certFile, 'utf8');
    await until('kube-apiserver /readyz', async () => (await request('GET', '/readyz')).status === 200);
    const admin = writeKubeconfig(join(dir, 'admin.kubeconfig'), server, ca, adminToken);

    const common = ['--kubeconfig', admin.kubeconfigPath, '--bind-address', '127.0.0.1'];
    start('kube-controller-manager', [
      ...common,
      '--secure-port',
      String(kcmPort),
      '--controllers',
      CONTROLLERS.join(','),
      '--service-account-private-key-file',
      saKey,
      '--root-ca-file',
      certFile,
      '--leader-elect=false',
      '--use-service-account-credentials=false',
      // Deleted pods' records go right away (kwok removes them; nothing to wait for).
      '--terminated-pod-gc-threshold',
      '100',
    ]);
    start('kube-scheduler', [...common, '--secure-port', String(schedPort), '--leader-elect=false']);
    const stages = join(dir, 'kwok-stages.yaml');
    writeFileSync(stages, kwokStages(join(opts.binaries, 'kwok-stages.yaml')));
    start('kwok', [
      '--config',
      stages,
      '--kubeconfig',
      admin.kubeconfigPath,
      '--manage-all-nodes=false',
      '--manage-nodes-with-annotation-selector',
      'kwok.x-k8s.io/node=fake',
      '--node-ip',
      '10.244.0.1',
      '--cidr',
      '10.244.0.1/24',
      '--server-address',
      `127.0.0.1:${kwokPort}`,
    ]);

    // Fake nodes with room for every pod the flows create; kwok keeps them Ready.
    for (let i = 0; i < (opts.nodes ?? 2); i++) {
      const name = `kwok-node-${i}`;
      const node = {
        apiVersion: 'v1',
        kind: 'Node',
        metadata: {
          name,
          annotations: { 'kwok.x-k8s.io/node': 'fake', 'node.alpha.kubernetes.io/ttl': '0' },
          labels: { 'kubernetes.io/hostname': name, 'kubernetes.io/os': 'linux', type: 'kwok' },
        },
        status: {
          allocatable: { cpu: '32', memory: '256Gi', pods: '110', 'ephemeral-storage': '1Ti' },
          capacity: { cpu: '32', memory: '256Gi', pods: '110', 'ephemeral-storage': '1Ti' },
        },
      };
      const res = await request('POST', '/api/v1/nodes', node);
      if (res.status !== 201) throw new Error(`creating node ${name}: ${res.status} ${JSON.stringify(res.body)}`);
    }
    await until('the kwok nodes Ready and the default ServiceAccount', async () => {
      const nodes = (await request('GET', '/api/v1/nodes')).body.items as Json[];
      const ready = nodes.filter((n) =>
        (n.status?.conditions ?? []).some((c: Json) => c.type === 'Ready' && c.status === 'True'),
      );
      const sa = await request('GET', '/api/v1/namespaces/default/serviceaccounts/default');
      return ready.length === (opts.nodes ?? 2) && sa.status === 200;
    });
    up = true;

    let accounts = 0;
    return {
      server,
      dir,
      admin,
      request,
      watchFirst,
      logTail,
      stop,
      async as(namespace, serviceAccount) {
        const res = await request('POST', `/api/v1/namespaces/${namespace}/serviceaccounts/${serviceAccount}/token`, {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenRequest',
          spec: { expirationSeconds: 3600 },
        });
        if (res.status !== 201) {
          throw new Error(`token of ${namespace}/${serviceAccount}: ${res.status} ${JSON.stringify(res.body)}`);
        }
        const path = join(dir, `sa-${++accounts}-${serviceAccount}.kubeconfig`);
        return writeKubeconfig(path, server, ca, String(res.body.status.token), namespace);
      },
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
