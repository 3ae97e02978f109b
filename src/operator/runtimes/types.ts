// The runtime port: what the controllers need from whatever runs agents (child processes here, Kubernetes Jobs and
// Deployments in a cluster). Every method is idempotent and returns quickly: builds and rollouts are started by
// one call and observed by later calls; the runtime calls `notify` when something worth a look changed.

import type { ResourceSpec } from '../../resources/agent-deployment.ts';
import type { AgentDeployment, AgentRevision } from '../../resources/index.ts';

/** Identifies one revision of one deployment. Names are the resource names (`<deployment>-r<n>`). */
export type RevisionRef = {
  namespace: string;
  deployment: string;
  /** Stable id of the deployment; the runtime keys files and databases by it. */
  deploymentId: string;
  revision: string;
};

/**
 * The custom resources the controller read for this reconcile: a runtime that needs more than the spec (owner
 * references, admission of the tenant's settings) takes it from here instead of reading the API again.
 */
export type HeldResources = {
  deployment: AgentDeployment;
  revision: AgentRevision;
  /**
   * The revision's environment (its secrets), as its server gets it; read only by a runtime whose build imports the
   * graphs (the local one), so a graph that constructs its clients from them at import is not refused for lacking them.
   */
  serverEnv?: () => Promise<Record<string, string>>;
};

export type BuildSpec = RevisionRef & {
  repoUrl: string;
  /** Branch, tag, full ref or commit. */
  repoRef: string;
  graphConfigPath: string;
  installCommand?: string | null;
  buildCommand?: string | null;
  /**
   * internal_source: the uploaded tarball to extract instead of a clone (its SHA-256; the runtime finds the bytes in
   * the tenant's source archives). repoUrl and repoRef are then empty.
   */
  sourceArchive?: { sha256: string };
  /** The deployment's tenant and integration: the runtime looks the git credential up itself (never in the spec). */
  tenantId?: string;
  integrationId?: string | null;
};

export type BuildStatus =
  | { phase: 'Running' }
  | { phase: 'Succeeded'; commitSha: string; image?: string }
  | { phase: 'Failed'; message: string };

export type ServerSpec = RevisionRef & {
  graphConfigPath: string;
  /** Environment of the agent server (the deployment's secrets). */
  env: Record<string, string>;
  /** The deployment's tenant: requests to the agent need one of this tenant's API keys (unless `access` is public). */
  tenantId: string;
  access: 'api_key' | 'public';
  /** The revision has served before (DEPLOYED): a runtime may skip re-proving that it boots. */
  proven?: boolean;
  /** The revision's resource_spec: the local runtime applies its memory and CPU limits (limits.ts). */
  resourceSpec?: ResourceSpec | null;
  /** Minutes without traffic, runs or due work after which the server may sleep until needed (0 or unset: never). */
  idleTimeoutMinutes?: number;
  /**
   * Absolute path of a JSON file of API-key hashes that the runtime's host keeps current; the server gets
   * `--auth-keys-file <path>`. The local runtime mounts the file's folder read-only into the sandbox, so that folder
   * should hold nothing else.
   */
  authKeysFile?: string;
  /**
   * What the revision was built from, as its resource records it (its source and the commit its build resolved):
   * a runtime whose build is gone (a restored data folder) builds that commit again instead of failing.
   */
  builtFrom?: { spec: BuildSpec; commitSha: string };
};

/**
 * Why a server that should serve does not, while the runtime keeps trying: a restart after a crash
 * (`Restarting`, `CrashLoopBackOff`), an unreachable database, or what a cluster reports (`OOMKilled`,
 * `ImagePullBackOff`, `Unavailable`, ...).
 */
export type ServerTrouble = { reason: string; message: string; restarts?: number };

/**
 * A server stopped by the idle policy: it takes traffic all the same (the first request starts it), so it is Ready,
 * and says since when it sleeps and when due work (a cron tick, a scheduled run) will wake it.
 */
export type SleepInfo = { since: string; wakeAt?: string };

export type ServerStatus =
  | { phase: 'Starting'; trouble?: ServerTrouble }
  | { phase: 'Ready'; sleeping?: SleepInfo }
  | { phase: 'Failed'; message: string };

export type LogType = 'build' | 'deploy';

/** Where the runtime writes build and deploy output (the store's revision log port). */
export interface RevisionLogSink {
  append(ref: RevisionRef, type: LogType, lines: string[]): Promise<void>;
}

export interface Runtime {
  /** Which sources this runtime can run; others fail at creation with `message`. */
  supports(source: string): { ok: true } | { ok: false; message: string };
  /** Starts the build if it is neither running nor done; reports its state. Survives restarts. */
  build(spec: BuildSpec, held: HeldResources): Promise<BuildStatus>;
  /** True when a finished build of this revision is still available (redeploy without rebuilding). */
  hasBuild(ref: RevisionRef): Promise<boolean>;
  /** Starts the revision's server if it is not running; reports its state. */
  deploy(spec: ServerSpec, held: HeldResources): Promise<ServerStatus>;
  /** What the revision's server is doing now, without starting anything (undefined: not running). */
  serverStatus(ref: RevisionRef): ServerStatus | undefined;
  /** Sends the deployment's traffic to `revision` (which must be Ready), then stops the others. */
  route(deployment: Omit<RevisionRef, 'revision'>, revision: string): Promise<void>;
  /** The revision currently taking traffic, if any. */
  routedRevision(deployment: Omit<RevisionRef, 'revision'>): string | undefined;
  /** The stable URL of a deployment (a runtime may first have to open it). */
  url(deployment: Omit<RevisionRef, 'revision'>): string | Promise<string>;
  /** Stops one revision's server (no-op when it is not running). */
  stop(ref: RevisionRef, held: HeldResources): Promise<void>;
  /** Stops everything of a deployment and removes its files and data. */
  cleanup(ref: Omit<RevisionRef, 'revision'>, deployment: AgentDeployment): Promise<void>;
  /** Registers the callback used to say "look at this deployment/revision again". */
  onChange(notify: (ref: RevisionRef) => void): void;
  /** Stops all processes (process shutdown); keeps files. */
  shutdown(): Promise<void>;
}
