// The local runtime: each revision is built in a directory of its own under the data dir and runs as an
// `agentplane agent-server` child process; a deployment's data (threads, runs, checkpoints) lives beside its
// revisions, so every revision of a deployment sees the same threads. Traffic reaches the routed revision through
// the proxy (proxy.ts): on an origin of the deployment's own (agent-origins.ts) or under a listener's
// /deployments/<id>/.
import { withDeadline } from '../../../lib/deadline.ts';
import { deploymentAuthEnv } from '../../../lib/deployment-token.ts';
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Logger } from '../../../lib/logger.ts';
import { PACKAGE_ROOT, packagePath } from '../../../lib/package-root.ts';
import type {
  BuildSpec,
  BuildStatus,
  RevisionLogSink,
  RevisionRef,
  Runtime,
  ServerSpec,
  ServerStatus,
  GitCredential,
} from '../types.ts';
import {
  checkoutDir,
  insideReal,
  isRealDir,
  projectDir,
  readBuildMarker,
  resetCacheDir,
  revisionMounts,
  runBuild,
  type InstallCache,
} from './build.ts';
import { childEnv, envProblem } from './env.ts';
import { FairBuildQueue } from './build-queue.ts';
import { prepareLimits, removeServerCgroup, superviseLimits, type LimitsOptions } from './limits.ts';
import { killRunningSteps } from './exec.ts';
import { buildsToRemove, trimInstallCache } from './housekeeping.ts';
import { DEFAULT_LOG_LIMITS, LogBudget, LogWriter, type LogLimits } from './logs.ts';
import { databaseNameFor, dropDeploymentDatabase, ensureDeploymentDatabase } from './postgres.ts';
import type { Backend, Unavailable } from './proxy.ts';
import type { AgentOrigins } from './agent-origins.ts';
import { redactText } from './redact.ts';
import { NO_SANDBOX, type Sandbox } from './sandbox.ts';
import { spawnServer, type ServerProcess } from './server-process.ts';
import { isTransientStart, restartStatus } from './start-failures.ts';
import { RestartSupervisor } from './supervisor.ts';
import type { RestartPolicy } from './restart-policy.ts';

export { databaseNameFor };

type DeploymentRef = Omit<RevisionRef, 'revision'>;

/** agentplane's own package: agent servers run its bin/agentplane.mjs (mounted read-only in the sandbox). */
export const PACKAGE_DIR = PACKAGE_ROOT;
const AGENTPLANE_BIN = packagePath('bin/agentplane.mjs');
const PARENT_WATCH = pathToFileURL(packagePath('src/operator/runtimes/local/parent-watch.mjs')).href;

export type LocalRuntimeOptions = {
  dataDir: string;
  logs: RevisionLogSink;
  logger: Logger;
  /** Postgres server for deployments' data; each deployment gets its own database. Embedded store otherwise. */
  databaseUrl?: string;
  /** Signs the deployment tokens agents get (with this runtime's base URL as the control plane's). */
  deploymentTokenKey?: Buffer;
  /** How long a new server may take to answer /ok. */
  healthTimeoutMs?: number;
  /** How long a stopping server gets after SIGTERM, and how long traffic to a replaced one may drain. */
  stopGraceMs?: number;
  maxConcurrentBuilds?: number;
  /** Builds one workspace may run at once (default: half of maxConcurrentBuilds, at least 1); see build-queue.ts. */
  maxBuildsPerWorkspace?: number;
  /** Reuse node_modules across builds of a deployment with the same package-lock.json (default true). */
  installCache?: boolean;
  /** Size bound of the install cache; least recently used entries go first (default 2 GiB). */
  installCacheMaxBytes?: number;
  /** Confinement of build steps and agent servers (default none: everything runs as plain child processes). */
  sandbox?: Sandbox;
  /** Real paths local repo_url values may come from (default: none, only remote URLs). */
  allowLocalRepos?: string[];
  /** Never cloned from (default: the data dir); the dev process adds its whole data dir. */
  protectedDirs?: string[];
  /** The environment build steps and servers pick allow-listed variables from (default process.env). */
  baseEnv?: NodeJS.ProcessEnv;
  /** Build folders kept per deployment, newest first; the routed, serving and newest ones always stay (default 5). */
  keepBuilds?: number;
  /** A build still running after this long fails (default 30 min). */
  buildTimeoutMs?: number;
  /** A build step printing more than this is killed (default 64 MiB). */
  maxStepOutputBytes?: number;
  /** Stored log per revision and type (default 20 000 lines / 5 MiB). */
  logLimits?: LogLimits;
  /** The git credential of a tenant's integration (undefined: none, the clone runs without one). */
  gitCredential?: (tenantId: string, integrationId: string, repoUrl: string) => Promise<GitCredential | undefined>;
  /** resource_spec limits on this machine: default memory limit, cgroup v2 parent (limits.ts). */
  limits?: LimitsOptions;
  /** Where a tenant's API key hashes are kept current (a folder of its own per tenant: the sandbox shows only it). */
  authKeysFile?: (tenantId: string) => string;
  /** Serves each deployment on an origin of its own (`agentplane dev`); without it: <base URL>/deployments/<id>. */
  origins?: AgentOrigins;
  /** Backoff of agent servers started again after they ended or could not start (restart-policy.ts has the default). */
  restartPolicy?: RestartPolicy;
};

type Server = {
  ref: RevisionRef;
  spec: ServerSpec;
  /** Started on scratch data to prove it boots, while another revision owns the deployment's embedded data. */
  preflight: boolean;
  /** Resolves true once /ok answers, false when it exits, fails or is stopped first. */
  healthy: Promise<boolean>;
  port: number;
  child: ChildProcess;
  /** Sends a signal to the agent server itself (inside the sandbox, bwrap does not forward signals). */
  signal(sig: NodeJS.Signals): void;
  phase: 'Starting' | 'Ready';
  inflight: number;
  exited: Promise<void>;
  stopping: boolean;
  stopped?: Promise<void>;
};

type Build = { status: BuildStatus; abort: AbortController };

/** Enough to build a revision again after its folder was removed (kept beside it, mode 0600: repo_url may hold a token). */
type SavedBuild = { spec: BuildSpec; commitSha: string };

const revKey = (r: RevisionRef) => `${r.deploymentId}/${r.revision}`;

/** Ids become directory and database names: keep them to a safe alphabet. */
function safeId(id: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(id) || id.includes('..')) throw new Error(`unsafe id for a path: ${id}`);
  return id;
}

async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.once('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => res(port));
    });
  });
}

/** One line explaining why a server failed, from its last output lines (pino JSON or plain text). */
export function summarizeFailure(lines: string[]): string {
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i]!.trim();
    if (!line) continue;
    try {
      const rec = JSON.parse(line) as { level?: string | number; msg?: string; err?: { message?: string } };
      if (rec.level === 'error' || rec.level === 'fatal' || (typeof rec.level === 'number' && rec.level >= 50)) {
        return [rec.msg, rec.err?.message].filter(Boolean).join(': ').slice(0, 300);
      }
      continue;
    } catch {
      // plain text
    }
    if (/error/i.test(line) && !line.startsWith('at ')) return line.slice(0, 300);
  }
  return '';
}

export class LocalRuntime implements Runtime {
  private readonly builds = new Map<string, Build>();
  private readonly servers = new Map<string, Server>();
  private readonly failed = new Map<string, string>();
  /** Servers that ended or could not start and are started again with backoff (supervisor.ts). */
  private readonly restarts: RestartSupervisor<RevisionRef>;
  private readonly routes = new Map<string, string>();
  /** Proven revisions waiting to take over embedded data: started by route(), not before (saves a boot). */
  private readonly parked = new Map<string, ServerSpec>();
  /** Per deployment: a traffic switch in progress; the proxy holds requests until it settles. */
  private readonly holds = new Map<string, Promise<void>>();
  /** Deployments cleaned up: a reconcile that read them just before deletion must not start anything again. */
  private readonly gone = new Set<string>();
  private readonly listeners: ((ref: RevisionRef) => void)[] = [];
  private readonly background = new Set<Promise<unknown>>();
  private readonly budgets = new Map<string, LogBudget>();
  private readonly buildQueue: FairBuildQueue;
  private baseUrl = 'http://127.0.0.1:8080';
  private closed = false;

  constructor(private readonly opts: LocalRuntimeOptions) {
    this.buildQueue = new FairBuildQueue({
      slots: opts.maxConcurrentBuilds ?? 2,
      perWorkspace: opts.maxBuildsPerWorkspace,
    });
    this.restarts = new RestartSupervisor((ref) => this.notify(ref), opts.restartPolicy);
  }

  /** The dev server's public address, known once it listens. */
  setBaseUrl(url: string): void {
    this.baseUrl = url.replace(/\/$/, '');
  }

  onChange(notify: (ref: RevisionRef) => void): void {
    this.listeners.push(notify);
  }

  supports(source: string): { ok: true } | { ok: false; message: string } {
    if (source === 'external_docker') {
      return {
        ok: false,
        message: 'source external_docker needs a container runtime; the local runtime builds from git only',
      };
    }
    return { ok: true };
  }

  url(d: DeploymentRef): string | Promise<string> {
    if (this.opts.origins) return this.opts.origins.open(d.deploymentId);
    return `${this.baseUrl}/deployments/${d.deploymentId}`;
  }

  private deploymentDir(deploymentId: string): string {
    return join(this.opts.dataDir, 'deployments', safeId(deploymentId));
  }

  private revisionDir(ref: RevisionRef): string {
    return join(this.deploymentDir(ref.deploymentId), 'revisions', safeId(ref.revision));
  }

  private homeDir(deploymentId: string): string {
    return join(this.deploymentDir(deploymentId), 'home');
  }

  private savedBuildFile(ref: RevisionRef): string {
    return join(this.deploymentDir(ref.deploymentId), 'builds', `${safeId(ref.revision)}.json`);
  }

  /** One revision's log of one type, capped across all the writers it gets (restarts, handovers). */
  private logWriter(ref: RevisionRef, type: 'build' | 'deploy'): LogWriter {
    const key = `${revKey(ref)}/${type}`;
    let budget = this.budgets.get(key);
    if (!budget) {
      budget = new LogBudget(this.opts.logLimits ?? DEFAULT_LOG_LIMITS);
      this.budgets.set(key, budget);
    }
    return new LogWriter(this.opts.logs, ref, type, budget);
  }

  private notify(ref: RevisionRef): void {
    if (this.closed) return;
    for (const l of this.listeners) l(ref);
  }

  private track<T>(p: Promise<T>): Promise<T> {
    this.background.add(p);
    void p.finally(() => this.background.delete(p)).catch(() => undefined);
    return p;
  }

  // ---- builds ----

  async hasBuild(ref: RevisionRef): Promise<boolean> {
    return (await readBuildMarker(this.revisionDir(ref))) !== undefined;
  }

  async build(spec: BuildSpec): Promise<BuildStatus> {
    if (this.gone.has(spec.deploymentId)) return { phase: 'Failed', message: 'the deployment was deleted' };
    const key = revKey(spec);
    const current = this.builds.get(key);
    if (current) return current.status;
    const done = await readBuildMarker(this.revisionDir(spec));
    if (done) return { phase: 'Succeeded', commitSha: done.commitSha };
    const build: Build = { status: { phase: 'Running' }, abort: new AbortController() };
    this.builds.set(key, build);
    void this.track(this.runBuild(spec, build));
    return build.status;
  }

  private async runBuild(spec: BuildSpec, build: Build): Promise<void> {
    const log = this.logWriter(spec, 'build');
    const logger = this.opts.logger.child({ deployment: spec.deployment, revision: spec.revision });
    const releaseSlot = await this.buildQueue.acquire(spec.tenantId ?? spec.deploymentId);
    let deadline: ReturnType<typeof withDeadline> | undefined;
    try {
      if (build.abort.signal.aborted) return;
      logger.info('build started');
      const cacheDir = join(this.opts.dataDir, 'install-cache');
      const maxBytes = this.opts.installCacheMaxBytes ?? 2048 * 1024 * 1024;
      const cache: InstallCache | undefined =
        this.opts.installCache === false
          ? undefined
          : {
              dir: cacheDir,
              maxBytes,
              onPublished: async (entry) => {
                const evicted = await trimInstallCache(cacheDir, entry, maxBytes);
                if (evicted.length) logger.info({ evicted: evicted.length }, 'install cache trimmed');
              },
            };
      deadline = withDeadline(this.opts.buildTimeoutMs ?? 30 * 60_000, build.abort.signal);
      const result = await runBuild(spec, {
        dir: this.revisionDir(spec),
        home: this.homeDir(spec.deploymentId),
        log,
        signal: deadline.signal,
        sandbox: this.opts.sandbox ?? NO_SANDBOX,
        repoPolicy: {
          allowedRoots: this.opts.allowLocalRepos ?? [],
          forbiddenRoots: this.opts.protectedDirs ?? [this.opts.dataDir],
        },
        baseEnv: this.opts.baseEnv ?? process.env,
        cache,
        maxStepOutputBytes: this.opts.maxStepOutputBytes,
        credential:
          spec.tenantId && spec.integrationId && this.opts.gitCredential
            ? await this.opts.gitCredential(spec.tenantId, spec.integrationId, spec.repoUrl)
            : undefined,
      });
      await this.saveBuild(spec, result.commitSha);
      // Before reporting success: whoever sees Succeeded also sees the old folders gone.
      await this.pruneBuilds(spec).catch((err: Error) =>
        logger.warn({ err: redactText(err.message) }, 'removing old builds failed'),
      );
      build.status = { phase: 'Succeeded', commitSha: result.commitSha };
      logger.info({ commit: result.commitSha }, 'build succeeded');
    } catch (err) {
      const message = redactText(err instanceof Error ? err.message : String(err));
      log.line(`build failed: ${message}`);
      build.status = { phase: 'Failed', message: message.split('\n')[0]! };
      logger.info({ reason: message }, 'build failed');
    } finally {
      deadline?.clear();
      releaseSlot();
      await log.flush();
      // A finished build is remembered by its marker; a failed one stays in memory (its revision is terminal).
      if (build.status.phase === 'Succeeded') this.builds.delete(revKey(spec));
      if (!build.abort.signal.aborted) this.notify(spec);
    }
  }

  private async saveBuild(spec: BuildSpec, commitSha: string): Promise<void> {
    const file = this.savedBuildFile(spec);
    await mkdir(dirname(file), { recursive: true, mode: 0o700 });
    const saved: SavedBuild = { spec, commitSha };
    await writeFile(file, JSON.stringify(saved), { mode: 0o600 });
    await chmod(file, 0o600);
  }

  /**
   * Keeps the `keepBuilds` most recent build folders of a deployment, plus the routed revision, the newest one and
   * any with a server or a build running. A removed revision is built again (same commit) when it is redeployed.
   */
  private async pruneBuilds(latest: RevisionRef): Promise<void> {
    const revisionsDir = join(this.deploymentDir(latest.deploymentId), 'revisions');
    const built = [];
    for (const name of await readdir(revisionsDir).catch(() => [] as string[])) {
      const marker = await stat(join(revisionsDir, name, 'build.json')).catch(() => undefined);
      if (marker) built.push({ revision: name, builtAt: marker.mtimeMs });
    }
    const keep = new Set<string>([latest.revision]);
    const routed = this.routes.get(latest.deploymentId);
    if (routed) keep.add(routed);
    for (const key of [...this.servers.keys(), ...this.builds.keys(), ...this.parked.keys()]) {
      const [id, revision] = key.split('/');
      if (id === latest.deploymentId && revision) keep.add(revision);
    }
    for (const revision of buildsToRemove(built, this.opts.keepBuilds ?? 5, keep)) {
      await rm(join(revisionsDir, revision), { recursive: true, force: true, maxRetries: 3 });
      this.opts.logger.info({ deployment: latest.deployment, revision }, 'old build folder removed');
    }
  }

  // ---- servers ----

  async deploy(spec: ServerSpec): Promise<ServerStatus> {
    const key = revKey(spec);
    const failure = this.failed.get(key);
    if (failure) return { phase: 'Failed', message: failure };
    const running = this.servers.get(key);
    if (running && !running.stopping) return this.statusOf(running);
    if (this.parked.has(key)) return { phase: 'Ready' };
    if (this.gone.has(spec.deploymentId)) return { phase: 'Failed', message: 'the deployment was deleted' };
    // Started again only once its backoff is over (the supervisor's timer asks for this reconcile then).
    if (this.restarts.waiting(key)) return restartStatus(this.restarts.pending(key)!);
    // A switch in progress starts and stops this deployment's servers itself.
    if (this.closed || this.holds.has(spec.deploymentId)) return { phase: 'Starting' };
    // A value spawn() cannot pass (NUL, over 128 KiB) is the secret's fault, whether or not the build is on disk.
    const secretsProblem = envProblem(spec.env);
    if (secretsProblem) return this.fail(spec, `agent server could not start: ${secretsProblem}`);
    const dir = this.revisionDir(spec);
    const marker = await readBuildMarker(dir);
    if (!marker) return this.rebuild(spec);
    // The embedded store admits one process per data dir: while another revision serves, prove this one boots
    // on scratch data; route() then hands the real data over.
    const othersLive = [...this.servers.values()].some(
      (s) => s.ref.deploymentId === spec.deploymentId && s.ref.revision !== spec.revision && !s.stopping,
    );
    const exclusive = !this.opts.databaseUrl && othersLive;
    if (exclusive && spec.proven) {
      this.parked.set(key, spec);
      // Nothing else will change for this revision until route(): tell the controllers it can take traffic.
      queueMicrotask(() => this.notify(spec));
      return { phase: 'Ready' };
    }
    try {
      await this.startServer(spec, dir, exclusive);
    } catch (err) {
      const message = redactText(err instanceof Error ? err.message : String(err)).split('\n')[0]!;
      const log = { deployment: spec.deployment, revision: spec.revision, reason: message };
      // A reason that passes (its database unreachable, a port taken meanwhile) is retried with backoff.
      if (isTransientStart(err) && !this.gone.has(spec.deploymentId) && !this.closed) {
        const next = this.restarts.failed(key, spec, `agent server could not start: ${message}`, true);
        this.opts.logger.warn({ ...log, retry_in_ms: next.at - Date.now() }, 'agent server could not start; retrying');
        return restartStatus(next);
      }
      // Anything else (bad secrets, a checkout leading outside itself, ...) ends this revision's deploy.
      this.opts.logger.warn(log, 'agent server could not start');
      return this.fail(spec, `agent server could not start: ${message}`);
    }
    const started = this.servers.get(key);
    return started
      ? this.statusOf(started)
      : this.failed.has(key)
        ? { phase: 'Failed', message: this.failed.get(key)! }
        : { phase: 'Starting' };
  }

  /** A server's status; while it comes back from a failure, the failure says why it is not serving. */
  private statusOf(server: Server): ServerStatus {
    if (server.phase === 'Ready') return { phase: 'Ready' };
    const pending = this.restarts.pending(revKey(server.ref));
    return pending ? restartStatus(pending) : { phase: 'Starting' };
  }

  /** A revision whose build folder was removed (keepBuilds): build the same commit again, then serve it. */
  private async rebuild(spec: ServerSpec): Promise<ServerStatus> {
    const saved = await readFile(this.savedBuildFile(spec), 'utf8')
      .then((t) => JSON.parse(t) as SavedBuild)
      .catch(() => undefined);
    if (!saved) return this.fail(spec, 'the build of this revision is not on disk');
    // The same commit, from the saved build spec only (the server spec carries secrets, which builds never get).
    const status = await this.build({ ...saved.spec, revision: spec.revision, repoRef: saved.commitSha });
    if (status.phase === 'Failed') return this.fail(spec, `rebuilding this revision failed: ${status.message}`);
    if (status.phase === 'Succeeded') return this.deploy(spec);
    return { phase: 'Starting' };
  }

  serverStatus(ref: RevisionRef): ServerStatus | undefined {
    const failure = this.failed.get(revKey(ref));
    if (failure) return { phase: 'Failed', message: failure };
    if (this.parked.has(revKey(ref))) return { phase: 'Ready' };
    const server = this.servers.get(revKey(ref));
    if (server && !server.stopping) return this.statusOf(server);
    const pending = this.restarts.pending(revKey(ref));
    return pending ? restartStatus(pending) : undefined;
  }

  private fail(ref: RevisionRef, message: string): ServerStatus {
    this.failed.set(revKey(ref), message);
    return { phase: 'Failed', message };
  }

  /**
   * Where the server keeps its data: a scratch folder (preflight), the deployment's embedded store folder, or the
   * deployment's own Postgres database, whose URL (with its password) goes through the environment, not argv.
   */
  private async dataPlace(
    deploymentId: string,
    preflightDir?: string,
  ): Promise<{ args: string[]; env: Record<string, string>; rw: string[] }> {
    if (preflightDir) {
      await rm(preflightDir, { recursive: true, force: true });
      await mkdir(preflightDir, { recursive: true });
      return { args: ['--data-dir', preflightDir], env: {}, rw: [preflightDir] };
    }
    if (!this.opts.databaseUrl) {
      const dataDir = join(this.deploymentDir(deploymentId), 'data');
      await mkdir(dataDir, { recursive: true });
      return { args: ['--data-dir', dataDir], env: {}, rw: [dataDir] };
    }
    await mkdir(this.deploymentDir(deploymentId), { recursive: true });
    const passwordFile = join(this.deploymentDir(deploymentId), 'postgres-password');
    const url = await ensureDeploymentDatabase(this.opts.databaseUrl, deploymentId, passwordFile);
    return { args: [], env: { DATABASE_URI: url }, rw: [] };
  }

  private async startServer(spec: ServerSpec, dir: string, preflight = false): Promise<Server> {
    const key = revKey(spec);
    const checkout = checkoutDir(dir);
    const config = join(checkout, spec.graphConfigPath);
    const home = this.homeDir(spec.deploymentId);
    const cwd = projectDir(checkout, spec.graphConfigPath);
    // Checked before anything is created: a value spawn() cannot pass (NUL, over 128 KiB) is the secret's fault.
    const secretsProblem = envProblem(spec.env);
    if (secretsProblem) throw new Error(secretsProblem);
    const marker = await readBuildMarker(dir);
    // The server may have changed its checkout while it ran: re-check what the runtime is about to mount.
    if (!(await insideReal(cwd, checkout)))
      throw new Error('the project folder leads out of the checkout through a symbolic link');
    const nodeModules = join(cwd, 'node_modules');
    const sharedNodeModules = marker?.sharedNodeModules && (await isRealDir(nodeModules)) ? nodeModules : undefined;
    if (sharedNodeModules) await resetCacheDir(sharedNodeModules);
    const port = await freePort();
    const data = await this.dataPlace(spec.deploymentId, preflight ? join(dir, 'preflight-data') : undefined);
    if (this.gone.has(spec.deploymentId) || this.closed) throw new Error(`deployment ${spec.deployment} is gone`);
    await mkdir(home, { recursive: true });
    const env = childEnv({
      base: this.opts.baseEnv ?? process.env,
      home,
      npmCache: join(home, '.npm'),
      extra: {
        ...spec.env,
        ...data.env,
        ...deploymentAuthEnv(
          this.opts.deploymentTokenKey && { controlPlaneUrl: this.baseUrl, tokenKey: this.opts.deploymentTokenKey },
          spec.tenantId,
          spec.deploymentId,
        ),
      },
    });
    const problem = envProblem(env);
    if (problem) throw new Error(problem);
    const log = this.logWriter(spec, 'deploy');
    const logger = this.opts.logger.child({ deployment: spec.deployment, revision: spec.revision });
    // Deployments that are not public answer only their tenant's keys; without a key source they do not start.
    const keysFile =
      spec.access === 'public' ? undefined : (spec.authKeysFile ?? this.opts.authKeysFile?.(spec.tenantId));
    if (spec.access !== 'public' && !keysFile)
      throw new Error('this runtime has no API key source: only public deployments can run');
    const keysArgs = keysFile ? ['--auth-keys-file', keysFile] : [];
    // The port makes the cgroup name unique to this start (a preflight's cgroup may still be going away).
    const limits = await prepareLimits(
      spec.resourceSpec,
      this.opts.limits ?? {},
      `agentplane-${safeId(spec.revision)}-${port}`,
    );
    const args = [
      ...limits.nodeArgs,
      '--import',
      PARENT_WATCH,
      AGENTPLANE_BIN,
      'agent-server',
      '--config',
      config,
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      ...data.args,
      ...keysArgs,
    ];
    const mounts = {
      ...revisionMounts(checkout, home, sharedNodeModules, data.rw),
      ro: keysFile ? [dirname(keysFile)] : [],
    };
    log.line(`starting agent server on 127.0.0.1:${port}${preflight ? ' on scratch data (preflight)' : ''}`);
    let proc: ServerProcess;
    try {
      log.line(limits.describe);
      proc = spawnServer(this.opts.sandbox ?? NO_SANDBOX, process.execPath, args, {
        cwd,
        env,
        mounts,
        limit: limits.wrap,
      });
    } catch (err) {
      void removeServerCgroup(limits.cgroup);
      log.line(`agent server could not start: ${(err as Error).message}`);
      await log.flush();
      throw err;
    }
    const { child } = proc;
    const unsupervise = superviseLimits(limits, child.pid, (text) => log.line(text), this.opts.limits?.watchIntervalMs);
    child.once('exit', unsupervise);
    child.once('error', unsupervise);
    const output = Promise.all([log.follow(child.stdout), log.follow(child.stderr)]);
    const exited = new Promise<void>((res) => {
      child.once('exit', () => res());
      child.once('error', () => res());
    });
    let settle!: (ok: boolean) => void;
    const healthy = new Promise<boolean>((r) => (settle = r));
    const server: Server = {
      ref: spec,
      spec,
      preflight,
      healthy,
      port,
      child,
      signal: proc.signal,
      phase: 'Starting',
      inflight: 0,
      exited,
      stopping: false,
    };
    this.servers.set(key, server);
    logger.info({ port, pid: child.pid }, 'agent server starting');
    // spawn() reports E2BIG, ENOENT and the like asynchronously: the server failed to start.
    child.once('error', (err) => {
      if (this.servers.get(key) === server) this.servers.delete(key);
      log.line(`agent server could not start: ${err.message}`);
      void log.flush();
      this.fail(spec, `agent server could not start: ${err.message}`);
      settle(false);
      this.notify(spec);
    });

    child.once('exit', (code, signal) => {
      void output.then(async () => {
        const why = signal ? `was killed (${signal})` : `exited with code ${code}`;
        log.line(`agent server ${why}`);
        await log.flush();
        if (this.servers.get(key) === server) this.servers.delete(key);
        if (server.stopping || this.closed) return;
        const detail = summarizeFailure(log.tail);
        const transient = server.phase === 'Starting' && isTransientStart(detail);
        if (this.failed.has(key)) {
          // already explained (spawn error)
        } else if (server.phase === 'Starting' && !spec.proven && !this.restarts.restarting(key) && !transient) {
          // A revision that never served fails its deploy: its code does not start.
          const message = `agent server ${why} before becoming healthy${detail ? `: ${detail}` : ''}`;
          logger.warn({ code, signal, reason: detail }, 'agent server ended before becoming healthy');
          this.fail(spec, message);
        } else {
          // It served (here or before a restart of the platform), or what ended it passes: start it again, later
          // after each failure in a row; the revision says meanwhile why it is not serving.
          const ended = `agent server ${why}${server.phase === 'Starting' ? ' before becoming healthy' : ''}`;
          const next = this.restarts.failed(key, spec, `${ended}${detail ? `: ${detail}` : ''}`, transient);
          log.line(`${ended}; starting it again in ${Math.round((next.at - Date.now()) / 1000)} s (${next.reason})`);
          await log.flush();
          logger.warn(
            { code, signal, failures: next.failures, reason: next.reason, retry_in_ms: next.at - Date.now() },
            'agent server ended; starting it again after a delay',
          );
        }
        this.notify(spec);
      });
    });
    void this.track(this.waitHealthy(server, log).then(settle, () => settle(false)));
    return server;
  }

  private async waitHealthy(server: Server, log: LogWriter): Promise<boolean> {
    const deadline = Date.now() + (this.opts.healthTimeoutMs ?? 60_000);
    let exited = false;
    void server.exited.then(() => (exited = true));
    while (!exited && !server.stopping) {
      try {
        const res = await fetch(`http://127.0.0.1:${server.port}/ok`, { signal: AbortSignal.timeout(2000) });
        if (res.ok) {
          log.line('agent server is healthy (/ok)');
          await log.flush();
          this.restarts.healthy(revKey(server.ref));
          server.phase = 'Ready';
          this.notify(server.ref);
          return true;
        }
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) {
        const secs = Math.round((this.opts.healthTimeoutMs ?? 60_000) / 1000);
        const message = `agent server did not answer /ok within ${secs} s`;
        const key = revKey(server.ref);
        // One that served before is started again (with backoff); a new revision fails its deploy.
        const again = server.spec.proven || this.restarts.restarting(key);
        if (again) this.restarts.failed(key, server.ref, message, false);
        else this.fail(server.ref, message);
        log.line(`${message}; stopping it${again ? ' and starting it again later' : ''}`);
        await this.stopServer(server);
        this.notify(server.ref);
        return false;
      }
      await new Promise((r) => setTimeout(r, 150));
    }
    return false;
  }

  /** Stops a server once (later callers wait for the same stop); `drain` lets forwarded requests finish first. */
  private stopServer(server: Server, drain = false): Promise<void> {
    if (server.stopped) return server.stopped;
    server.stopping = true;
    server.stopped = (drain ? this.drain(server) : Promise.resolve()).then(async () => {
      if (server.child.exitCode === null && server.child.signalCode === null) {
        server.signal('SIGTERM');
        const timer = setTimeout(() => server.signal('SIGKILL'), this.opts.stopGraceMs ?? 5000);
        await server.exited;
        clearTimeout(timer);
      }
      if (this.servers.get(revKey(server.ref)) === server) this.servers.delete(revKey(server.ref));
    });
    return this.track(server.stopped);
  }

  /** Waits (bounded) until requests forwarded to a replaced server have finished. */
  private async drain(server: Server): Promise<void> {
    const until = Date.now() + (this.opts.stopGraceMs ?? 5000);
    while (server.inflight > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
  }

  // ---- traffic ----

  async route(d: DeploymentRef, revision: string): Promise<void> {
    const pending = this.holds.get(d.deploymentId);
    if (pending) await pending;
    const key = `${d.deploymentId}/${revision}`;
    const server = this.servers.get(key);
    const parked = this.parked.get(key);
    if (!parked && (server?.phase !== 'Ready' || server.stopping)) {
      throw new Error(`revision ${revision} is not ready to take traffic`);
    }
    const previous = this.routes.get(d.deploymentId);
    const others = [...this.servers.values()].filter(
      (s) => s.ref.deploymentId === d.deploymentId && s.ref.revision !== revision,
    );
    if (parked || server!.preflight) {
      this.parked.delete(key);
      await this.handover(d, parked ?? server!.spec, parked ? undefined : server, others, previous);
    } else {
      this.routes.set(d.deploymentId, revision);
      // Traffic has moved: the other revisions' servers stop once their open requests finish.
      for (const other of others) void this.stopServer(other, true);
    }
    if (previous !== this.routes.get(d.deploymentId)) {
      this.notify({ ...d, revision });
      if (previous) this.notify({ ...d, revision: previous });
    }
  }

  /**
   * Embedded data: hold new requests, let the old server finish its open ones and stop, start the new revision on
   * the deployment's data, then release. If the new one does not come up, the old one is started again.
   */
  private async handover(
    d: DeploymentRef,
    spec: ServerSpec,
    preflight: Server | undefined,
    others: Server[],
    previous: string | undefined,
  ): Promise<void> {
    let release!: () => void;
    this.holds.set(d.deploymentId, new Promise<void>((r) => (release = r)));
    const log = this.opts.logger.child({ deployment: d.deployment, revision: spec.revision });
    try {
      this.routes.set(d.deploymentId, spec.revision);
      const old = others.find((s) => s.ref.revision === previous && !s.stopping);
      await Promise.all([...others.map((o) => this.stopServer(o, true)), preflight && this.stopServer(preflight)]);
      const fresh = await this.startServer(spec, this.revisionDir(spec)).catch((err: Error) => {
        this.fail(spec, `agent server could not start: ${redactText(err.message).split('\n')[0]}`);
        return undefined;
      });
      if (fresh && (await fresh.healthy)) {
        log.info('traffic handed over');
        return;
      }
      if (!this.failed.has(revKey(spec))) this.fail(spec, 'agent server did not start on the deployment data');
      log.warn('new revision failed on the deployment data; restoring the previous one');
      if (old) {
        this.routes.set(d.deploymentId, old.ref.revision);
        const again = await this.startServer(old.spec, this.revisionDir(old.ref)).catch(() => undefined);
        if (again) await again.healthy;
      } else {
        this.routes.delete(d.deploymentId);
      }
    } finally {
      this.holds.delete(d.deploymentId);
      release();
    }
  }

  routedRevision(d: DeploymentRef): string | undefined {
    const revision = this.routes.get(d.deploymentId);
    if (!revision) return undefined;
    const server = this.servers.get(`${d.deploymentId}/${revision}`);
    return server && server.phase === 'Ready' && !server.stopping ? revision : undefined;
  }

  /** For the proxy: where a deployment's traffic goes now (waits while a switch is in progress). */
  async backend(deploymentId: string): Promise<Backend | Unavailable | undefined> {
    const pending = this.holds.get(deploymentId);
    if (pending) await pending;
    const revision = this.routes.get(deploymentId);
    if (!revision) return undefined;
    const key = `${deploymentId}/${revision}`;
    const server = this.servers.get(key);
    if (server?.phase !== 'Ready' || server.stopping) {
      // The routed revision is being started again (or waits for its backoff): come back shortly.
      const pending = this.restarts.pending(key);
      if (!pending && !server) return undefined;
      const wait = pending ? Math.ceil((pending.at - Date.now()) / 1000) : 0;
      return {
        unavailable: pending ? `${pending.reason}: ${pending.message}` : 'its agent server is starting',
        retryAfterSecs: Math.min(Math.max(wait, 1), 60),
      };
    }
    return {
      port: server.port,
      tenant: server.spec.tenantId,
      acquire: () => {
        server.inflight++;
        let released = false;
        return () => {
          if (!released) server.inflight--;
          released = true;
        };
      },
    };
  }

  async stop(ref: RevisionRef): Promise<void> {
    // The routed revision is stopped only by a switch or by cleanup, never from outside.
    if (this.routes.get(ref.deploymentId) === ref.revision || this.holds.has(ref.deploymentId)) return;
    const key = revKey(ref);
    const build = this.builds.get(key);
    if (build && build.status.phase === 'Running') {
      build.abort.abort();
      this.builds.delete(key);
    }
    this.parked.delete(key);
    this.restarts.forget(key);
    const server = this.servers.get(key);
    if (server) await this.stopServer(server);
  }

  async cleanup(d: DeploymentRef): Promise<void> {
    this.gone.add(d.deploymentId);
    const pending = this.holds.get(d.deploymentId);
    if (pending) await pending;
    for (const [key, build] of this.builds) {
      if (key.startsWith(`${d.deploymentId}/`)) {
        build.abort.abort();
        this.builds.delete(key);
      }
    }
    this.routes.delete(d.deploymentId);
    for (const key of [...this.parked.keys()]) if (key.startsWith(`${d.deploymentId}/`)) this.parked.delete(key);
    const mine = [...this.servers.values()].filter((s) => s.ref.deploymentId === d.deploymentId);
    await Promise.all(mine.map((s) => this.stopServer(s)));
    for (const key of [...this.failed.keys()]) if (key.startsWith(`${d.deploymentId}/`)) this.failed.delete(key);
    this.restarts.forgetWhere((key) => key.startsWith(`${d.deploymentId}/`));
    for (const key of [...this.budgets.keys()]) if (key.startsWith(`${d.deploymentId}/`)) this.budgets.delete(key);
    await this.opts.origins?.forget(d.deploymentId);
    await rm(this.deploymentDir(d.deploymentId), { recursive: true, force: true, maxRetries: 3 });
    if (this.opts.databaseUrl) await dropDeploymentDatabase(this.opts.databaseUrl, d.deploymentId);
  }

  /** Child pids, for tests and diagnostics. */
  pids(): number[] {
    return [...this.servers.values()].map((s) => s.child.pid!).filter(Boolean);
  }

  async shutdown(): Promise<void> {
    this.closed = true;
    this.restarts.forgetWhere(() => true);
    for (const b of this.builds.values()) b.abort.abort();
    await Promise.all([...this.servers.values()].map((s) => this.stopServer(s)));
    await Promise.allSettled([...this.background]);
  }

  /** Last resort on process exit: no child outlives the dev process. */
  killAllNow(): void {
    for (const s of this.servers.values()) s.signal('SIGKILL');
    for (const b of this.builds.values()) b.abort.abort();
    killRunningSteps();
  }

  exists(deploymentId: string): boolean {
    return existsSync(this.deploymentDir(deploymentId));
  }
}
