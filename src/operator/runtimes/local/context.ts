// What every concern of the local runtime shares: its options, the state of builds, servers and routes, where a
// revision's files live, and the few helpers all of them use (logs, change notices, background work, failures).
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '../../../lib/logger.ts';
import type { GitCredential } from '../../../git/credentials.ts';
import type { BuildSpec, BuildStatus, RevisionLogSink, RevisionRef, ServerSpec, ServerStatus } from '../types.ts';
import type { AgentOrigins } from './agent-origins.ts';
import { FairBuildQueue } from './build-queue.ts';
import type { LimitsOptions } from './limits.ts';
import { DEFAULT_LOG_LIMITS, LogBudget, LogWriter, type LogLimits } from './logs.ts';
import type { RestartPolicy } from './restart-policy.ts';
import type { Sandbox } from './sandbox.ts';
import type { SourceArchives } from '../../../state/source-archives.ts';
import { RestartSupervisor } from './supervisor.ts';

export type DeploymentRef = Omit<RevisionRef, 'revision'>;

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
  /** Stored source tarballs (internal_source builds extract them); without it such builds fail with a reason. */
  sourceArchives?: Pick<SourceArchives, 'objectPath'>;
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
  /**
   * Executor threads of every agent server this runtime starts (their --executor-threads; 0: graphs run on each
   * server's main thread). Undefined: each server's own default, 1 when it may use 2 or more CPUs.
   */
  agentExecutorThreads?: number;
  /** Where a tenant's API key hashes are kept current (a folder of its own per tenant: the sandbox shows only it). */
  authKeysFile?: (tenantId: string) => string;
  /** Serves each deployment on an origin of its own (`agentplane dev`); without it: <base URL>/deployments/<id>. */
  origins?: AgentOrigins;
  /** Backoff of agent servers started again after they ended or could not start (restart-policy.ts has the default). */
  restartPolicy?: RestartPolicy;
  /**
   * The variables that give a deployment's agent server its data keys (LANGGRAPH_AES_KEY: encryption at rest of its
   * threads, checkpoints, store items and run inputs); without it agent data is stored in clear.
   */
  dataKeys?: (ref: DeploymentRef) => Promise<Record<string, string>>;
  /** Idle policy timing (idle.ts); the defaults are for production, tests shorten them. */
  idle?: IdleOptions;
};

export type IdleOptions = {
  /** How long one minute of a deployment's idle_timeout_minutes lasts (default 60 s; tests use less). */
  minuteMs?: number;
  /** How often idle servers are looked for (default 15 s). */
  checkMs?: number;
  /** How long a request to a sleeping deployment is held while it starts, before a 503 with Retry-After (30 s). */
  wakeWaitMs?: number;
};

/** A deployment whose agent server was stopped for being idle; its next request, or its due work, starts it. */
export type Sleep = {
  /** The routed revision's spec, kept current by deploy() (secrets may change while it sleeps). */
  spec: ServerSpec;
  since: number;
  /** Resolves once the server has stopped (a request during the stop waits for it, then wakes the server). */
  stopped: Promise<void>;
  /** When its store's next work is due (known once it stopped); a timer wakes it then. */
  wakeAt?: number;
  timer?: NodeJS.Timeout;
  /** Its wake has begun: the sleep is no longer written down. */
  woken?: boolean;
};

export type Server = {
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
  /** When it answered /ok (ms), for the idle policy. */
  readyAt?: number;
  inflight: number;
  exited: Promise<void>;
  stopping: boolean;
  stopped?: Promise<void>;
};

export type Build = { status: BuildStatus; abort: AbortController };

/** Enough to build a revision again after its folder was removed (kept beside it, mode 0600: repo_url may hold a token). */
export type SavedBuild = { spec: BuildSpec; commitSha: string };

export const revKey = (r: RevisionRef) => `${r.deploymentId}/${r.revision}`;

/** Ids become directory and database names: keep them to a safe alphabet. */
export function safeId(id: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(id) || id.includes('..')) throw new Error(`unsafe id for a path: ${id}`);
  return id;
}

/** The runtime's state as its concerns see it (the class in index.ts owns it; the concerns only use it). */
export type LocalContext = {
  opts: LocalRuntimeOptions;
  builds: Map<string, Build>;
  servers: Map<string, Server>;
  /** Per revision: the deploy() in progress, which a concurrent call joins (deploy.ts). */
  deploying: Map<string, Promise<ServerStatus>>;
  failed: Map<string, string>;
  /** Servers that ended or could not start and are started again with backoff (supervisor.ts). */
  restarts: RestartSupervisor<RevisionRef>;
  routes: Map<string, string>;
  /** Proven revisions waiting to take over embedded data: started by route(), not before (saves a boot). */
  parked: Map<string, ServerSpec>;
  /** Per deployment: a traffic switch in progress; the proxy holds requests until it settles. */
  holds: Map<string, Promise<void>>;
  /** Per deployment: when a request last began or ended through the proxy (ms). */
  activity: Map<string, number>;
  /** Deployments asleep (idle.ts), and those whose wake is in progress (shared by every request that waits). */
  sleeping: Map<string, Sleep>;
  waking: Map<string, Promise<boolean>>;
  /** Per revision: the one look at a sleep written down before the platform restarted (idle.ts restoreSleep). */
  restoring: Map<string, Promise<void>>;
  /** Deployments cleaned up: a reconcile that read them just before deletion must not start anything again. */
  gone: Set<string>;
  listeners: ((ref: RevisionRef) => void)[];
  background: Set<Promise<unknown>>;
  budgets: Map<string, LogBudget>;
  buildQueue: FairBuildQueue;
  /** The dev server's public address (the control plane's, for deployment tokens). */
  baseUrl: string;
  closed: boolean;
};

export function createContext(opts: LocalRuntimeOptions): LocalContext {
  const ctx: LocalContext = {
    opts,
    builds: new Map(),
    servers: new Map(),
    deploying: new Map(),
    failed: new Map(),
    restarts: new RestartSupervisor((ref) => notify(ctx, ref), opts.restartPolicy),
    routes: new Map(),
    parked: new Map(),
    holds: new Map(),
    activity: new Map(),
    sleeping: new Map(),
    waking: new Map(),
    restoring: new Map(),
    gone: new Set(),
    listeners: [],
    background: new Set(),
    budgets: new Map(),
    buildQueue: new FairBuildQueue({
      slots: opts.maxConcurrentBuilds ?? 2,
      perWorkspace: opts.maxBuildsPerWorkspace,
    }),
    baseUrl: 'http://127.0.0.1:8080',
    closed: false,
  };
  return ctx;
}

export function deploymentDir(ctx: LocalContext, deploymentId: string): string {
  return join(ctx.opts.dataDir, 'deployments', safeId(deploymentId));
}

export function revisionDir(ctx: LocalContext, ref: RevisionRef): string {
  return join(deploymentDir(ctx, ref.deploymentId), 'revisions', safeId(ref.revision));
}

export function homeDir(ctx: LocalContext, deploymentId: string): string {
  return join(deploymentDir(ctx, deploymentId), 'home');
}

export function savedBuildFile(ctx: LocalContext, ref: RevisionRef): string {
  return join(deploymentDir(ctx, ref.deploymentId), 'builds', `${safeId(ref.revision)}.json`);
}

/** One revision's log of one type, capped across all the writers it gets (restarts, handovers). */
export function logWriter(ctx: LocalContext, ref: RevisionRef, type: 'build' | 'deploy'): LogWriter {
  const key = `${revKey(ref)}/${type}`;
  let budget = ctx.budgets.get(key);
  if (!budget) {
    budget = new LogBudget(ctx.opts.logLimits ?? DEFAULT_LOG_LIMITS);
    ctx.budgets.set(key, budget);
  }
  return new LogWriter(ctx.opts.logs, ref, type, budget);
}

export function notify(ctx: LocalContext, ref: RevisionRef): void {
  if (ctx.closed) return;
  for (const l of ctx.listeners) l(ref);
}

export function track<T>(ctx: LocalContext, p: Promise<T>): Promise<T> {
  ctx.background.add(p);
  void p.finally(() => ctx.background.delete(p)).catch(() => undefined);
  return p;
}

export function fail(ctx: LocalContext, ref: RevisionRef, message: string): ServerStatus {
  ctx.failed.set(revKey(ref), message);
  return { phase: 'Failed', message };
}

export function deploymentExists(ctx: LocalContext, deploymentId: string): boolean {
  return existsSync(deploymentDir(ctx, deploymentId));
}
