// The local runtime: each revision is built in a directory of its own under the data dir and runs as an
// `agentplane agent-server` child process; a deployment's data (threads, runs, checkpoints) lives beside its
// revisions, so every revision of a deployment sees the same threads. Traffic reaches the routed revision through
// the dev server's proxy (proxy.ts).
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { Logger } from '../../../lib/logger.ts';
import type {
  BuildSpec,
  BuildStatus,
  RevisionLogSink,
  RevisionRef,
  Runtime,
  ServerSpec,
  ServerStatus,
} from '../types.ts';
import { checkoutDir, projectDir, readBuildMarker, runBuild } from './build.ts';
import { killRunningSteps } from './exec.ts';
import { LogWriter } from './logs.ts';
import type { Backend } from './proxy.ts';

type DeploymentRef = Omit<RevisionRef, 'revision'>;

const HERE = dirname(fileURLToPath(import.meta.url));
const AGENTPLANE_BIN = resolve(HERE, '../../../../bin/agentplane.mjs');
const PARENT_WATCH = new URL('./parent-watch.mjs', import.meta.url).href;

export type LocalRuntimeOptions = {
  dataDir: string;
  logs: RevisionLogSink;
  logger: Logger;
  /** Postgres server for deployments' data; each deployment gets its own database. Embedded store otherwise. */
  databaseUrl?: string;
  /** How long a new server may take to answer /ok. */
  healthTimeoutMs?: number;
  /** How long a stopping server gets after SIGTERM, and how long traffic to a replaced one may drain. */
  stopGraceMs?: number;
  maxConcurrentBuilds?: number;
  /** Reuse node_modules across builds with the same package-lock.json (default true). */
  installCache?: boolean;
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
  phase: 'Starting' | 'Ready';
  inflight: number;
  exited: Promise<void>;
  stopping: boolean;
  stopped?: Promise<void>;
};

type Build = { status: BuildStatus; abort: AbortController };

const revKey = (r: RevisionRef) => `${r.deploymentId}/${r.revision}`;

/** Ids become directory and database names: keep them to a safe alphabet. */
function safeId(id: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(id) || id.includes('..')) throw new Error(`unsafe id for a path: ${id}`);
  return id;
}

export function databaseNameFor(deploymentId: string): string {
  return `ap_dev_${deploymentId.toLowerCase().replace(/[^a-z0-9]/g, '_')}`.slice(0, 63);
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
  private readonly crashes = new Map<string, number>();
  private readonly routes = new Map<string, string>();
  /** Proven revisions waiting to take over embedded data: started by route(), not before (saves a boot). */
  private readonly parked = new Map<string, ServerSpec>();
  /** Per deployment: a traffic switch in progress; the proxy holds requests until it settles. */
  private readonly holds = new Map<string, Promise<void>>();
  /** Deployments cleaned up: a reconcile that read them just before deletion must not start anything again. */
  private readonly gone = new Set<string>();
  private readonly listeners: ((ref: RevisionRef) => void)[] = [];
  private readonly background = new Set<Promise<unknown>>();
  private runningBuilds = 0;
  private readonly waitingBuilds: (() => void)[] = [];
  private baseUrl = 'http://127.0.0.1:8080';
  private closed = false;

  constructor(private readonly opts: LocalRuntimeOptions) {}

  /** The dev server's public address, known once it listens. */
  setBaseUrl(url: string): void {
    this.baseUrl = url.replace(/\/$/, '');
  }

  onChange(notify: (ref: RevisionRef) => void): void {
    this.listeners.push(notify);
  }

  supports(source: string): { ok: true } | { ok: false; message: string } {
    if (source === 'external_docker') {
      return { ok: false, message: 'source external_docker needs a container runtime; the local runtime builds from git only' };
    }
    return { ok: true };
  }

  url(d: DeploymentRef): string {
    return `${this.baseUrl}/deployments/${d.deploymentId}`;
  }

  private deploymentDir(deploymentId: string): string {
    return join(this.opts.dataDir, 'deployments', safeId(deploymentId));
  }

  private revisionDir(ref: RevisionRef): string {
    return join(this.deploymentDir(ref.deploymentId), 'revisions', safeId(ref.revision));
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
    const log = new LogWriter(this.opts.logs, spec, 'build');
    const logger = this.opts.logger.child({ deployment: spec.deployment, revision: spec.revision });
    await this.acquireBuildSlot();
    try {
      if (build.abort.signal.aborted) return;
      logger.info('build started');
      const cache = this.opts.installCache === false ? undefined : { dir: join(this.opts.dataDir, 'install-cache') };
      const result = await runBuild(spec, this.revisionDir(spec), log, build.abort.signal, cache);
      build.status = { phase: 'Succeeded', commitSha: result.commitSha };
      logger.info({ commit: result.commitSha }, 'build succeeded');
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      log.line(`build failed: ${message}`);
      build.status = { phase: 'Failed', message: message.split('\n')[0]! };
      logger.info({ reason: message }, 'build failed');
    } finally {
      this.releaseBuildSlot();
      await log.flush();
      // A finished build is remembered by its marker; a failed one stays in memory (its revision is terminal).
      if (build.status.phase === 'Succeeded') this.builds.delete(revKey(spec));
      if (!build.abort.signal.aborted) this.notify(spec);
    }
  }

  private async acquireBuildSlot(): Promise<void> {
    if (this.runningBuilds < (this.opts.maxConcurrentBuilds ?? 2)) {
      this.runningBuilds++;
      return;
    }
    await new Promise<void>((r) => this.waitingBuilds.push(r));
  }

  private releaseBuildSlot(): void {
    const next = this.waitingBuilds.shift();
    if (next) next();
    else this.runningBuilds--;
  }

  // ---- servers ----

  async deploy(spec: ServerSpec): Promise<ServerStatus> {
    const key = revKey(spec);
    const failure = this.failed.get(key);
    if (failure) return { phase: 'Failed', message: failure };
    const running = this.servers.get(key);
    if (running && !running.stopping) return { phase: running.phase };
    if (this.parked.has(key)) return { phase: 'Ready' };
    if (this.gone.has(spec.deploymentId)) return { phase: 'Failed', message: 'the deployment was deleted' };
    // A switch in progress starts and stops this deployment's servers itself.
    if (this.closed || this.holds.has(spec.deploymentId)) return { phase: 'Starting' };
    const dir = this.revisionDir(spec);
    if (!(await readBuildMarker(dir))) return this.fail(spec, 'the build of this revision is not on disk');
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
    await this.startServer(spec, dir, exclusive);
    return { phase: 'Starting' };
  }

  serverStatus(ref: RevisionRef): ServerStatus | undefined {
    const failure = this.failed.get(revKey(ref));
    if (failure) return { phase: 'Failed', message: failure };
    if (this.parked.has(revKey(ref))) return { phase: 'Ready' };
    const server = this.servers.get(revKey(ref));
    return server && !server.stopping ? { phase: server.phase } : undefined;
  }

  private fail(ref: RevisionRef, message: string): ServerStatus {
    this.failed.set(revKey(ref), message);
    return { phase: 'Failed', message };
  }

  private async dataArgs(deploymentId: string, preflightDir?: string): Promise<string[]> {
    if (preflightDir) {
      await rm(preflightDir, { recursive: true, force: true });
      await mkdir(preflightDir, { recursive: true });
      return ['--data-dir', preflightDir];
    }
    if (!this.opts.databaseUrl) {
      const dataDir = join(this.deploymentDir(deploymentId), 'data');
      await mkdir(dataDir, { recursive: true });
      return ['--data-dir', dataDir];
    }
    const name = databaseNameFor(deploymentId);
    const client = new pg.Client({ connectionString: this.opts.databaseUrl });
    await client.connect();
    try {
      const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
      if (!rowCount) {
        await client.query(`CREATE DATABASE "${name}"`).catch((err: { code?: string }) => {
          if (err.code !== '42P04') throw err; // created concurrently
        });
      }
    } finally {
      await client.end();
    }
    const url = new URL(this.opts.databaseUrl);
    url.pathname = `/${name}`;
    return ['--database-url', url.toString()];
  }

  private async startServer(spec: ServerSpec, dir: string, preflight = false): Promise<Server> {
    const key = revKey(spec);
    const checkout = checkoutDir(dir);
    const config = join(checkout, spec.graphConfigPath);
    const port = await freePort();
    const dataArgs = await this.dataArgs(spec.deploymentId, preflight ? join(dir, 'preflight-data') : undefined);
    if (this.gone.has(spec.deploymentId) || this.closed) throw new Error(`deployment ${spec.deployment} is gone`);
    const log = new LogWriter(this.opts.logs, spec, 'deploy');
    const logger = this.opts.logger.child({ deployment: spec.deployment, revision: spec.revision });
    const args = ['--import', PARENT_WATCH, AGENTPLANE_BIN, 'agent-server', '--config', config, '--host', '127.0.0.1', '--port', String(port), ...dataArgs];
    log.line(`starting agent server on 127.0.0.1:${port}${preflight ? ' on scratch data (preflight)' : ''}`);
    const child = spawn(process.execPath, args, {
      cwd: projectDir(checkout, spec.graphConfigPath),
      env: { ...process.env, ...spec.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const tail: string[] = [];
    const keep = (l: string) => {
      tail.push(l);
      if (tail.length > 40) tail.shift();
    };
    child.stdout!.on('data', (d: Buffer) => d.toString().split('\n').forEach(keep));
    child.stderr!.on('data', (d: Buffer) => d.toString().split('\n').forEach(keep));
    const output = Promise.all([log.follow(child.stdout), log.follow(child.stderr)]);
    const exited = new Promise<void>((res) => child.once('exit', () => res()));
    let settle!: (ok: boolean) => void;
    const healthy = new Promise<boolean>((r) => (settle = r));
    const server: Server = { ref: spec, spec, preflight, healthy, port, child, phase: 'Starting', inflight: 0, exited, stopping: false };
    this.servers.set(key, server);
    logger.info({ port, pid: child.pid }, 'agent server starting');

    child.once('exit', (code, signal) => {
      void output.then(async () => {
        const why = signal ? `was killed (${signal})` : `exited with code ${code}`;
        log.line(`agent server ${why}`);
        await log.flush();
        if (this.servers.get(key) === server) this.servers.delete(key);
        if (server.stopping || this.closed) return;
        const detail = summarizeFailure(tail);
        if (server.phase === 'Starting') {
          this.fail(spec, `agent server ${why} before becoming healthy${detail ? `: ${detail}` : ''}`);
        } else {
          // A live server crashed: the next reconcile starts it again, unless it keeps crashing.
          const n = (this.crashes.get(key) ?? 0) + 1;
          this.crashes.set(key, n);
          logger.warn({ code, signal, crashes: n }, 'agent server crashed');
          if (n >= 5) this.fail(spec, `agent server crashed ${n} times; last: ${why}${detail ? `: ${detail}` : ''}`);
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
          server.phase = 'Ready';
          this.notify(server.ref);
          return true;
        }
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) {
        const secs = Math.round((this.opts.healthTimeoutMs ?? 60_000) / 1000);
        this.fail(server.ref, `agent server did not answer /ok within ${secs} s`);
        log.line(`agent server did not answer /ok within ${secs} s; stopping it`);
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
        server.child.kill('SIGTERM');
        const timer = setTimeout(() => server.child.kill('SIGKILL'), this.opts.stopGraceMs ?? 5000);
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
    if (!parked && (!server || server.phase !== 'Ready' || server.stopping)) {
      throw new Error(`revision ${revision} is not ready to take traffic`);
    }
    const previous = this.routes.get(d.deploymentId);
    const others = [...this.servers.values()].filter((s) => s.ref.deploymentId === d.deploymentId && s.ref.revision !== revision);
    if (parked || server!.preflight) {
      this.parked.delete(key);
      await this.handover(d, parked ?? server!.spec, parked ? undefined : server, others, previous);
    } else {
      this.routes.set(d.deploymentId, revision);
      // Traffic has moved: the other revisions' servers stop once their open requests finish.
      for (const other of others) void this.stopServer(other, true);
    }
    if (previous !== this.routes.get(d.deploymentId)) {
      this.crashes.delete(key);
      this.notify({ ...d, revision });
      if (previous) this.notify({ ...d, revision: previous });
    }
  }

  /**
   * Embedded data: hold new requests, let the old server finish its open ones and stop, start the new revision on
   * the deployment's data, then release. If the new one does not come up, the old one is started again.
   */
  private async handover(d: DeploymentRef, spec: ServerSpec, preflight: Server | undefined, others: Server[], previous: string | undefined): Promise<void> {
    let release!: () => void;
    this.holds.set(d.deploymentId, new Promise<void>((r) => (release = r)));
    const log = this.opts.logger.child({ deployment: d.deployment, revision: spec.revision });
    try {
      this.routes.set(d.deploymentId, spec.revision);
      const old = others.find((s) => s.ref.revision === previous && !s.stopping);
      await Promise.all([...others.map((o) => this.stopServer(o, true)), preflight && this.stopServer(preflight)]);
      const fresh = await this.startServer(spec, this.revisionDir(spec));
      if (await fresh.healthy) {
        log.info('traffic handed over');
        return;
      }
      if (!this.failed.has(revKey(spec))) this.fail(spec, 'agent server did not start on the deployment data');
      log.warn('new revision failed on the deployment data; restoring the previous one');
      if (old) {
        this.routes.set(d.deploymentId, old.ref.revision);
        await (await this.startServer(old.spec, this.revisionDir(old.ref))).healthy;
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
  async backend(deploymentId: string): Promise<Backend | undefined> {
    const pending = this.holds.get(deploymentId);
    if (pending) await pending;
    const revision = this.routes.get(deploymentId);
    const server = revision ? this.servers.get(`${deploymentId}/${revision}`) : undefined;
    if (!server || server.phase !== 'Ready') return undefined;
    return {
      port: server.port,
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
    for (const key of [...this.failed.keys(), ...this.crashes.keys()]) {
      if (key.startsWith(`${d.deploymentId}/`)) {
        this.failed.delete(key);
        this.crashes.delete(key);
      }
    }
    await rm(this.deploymentDir(d.deploymentId), { recursive: true, force: true, maxRetries: 3 });
    if (this.opts.databaseUrl) {
      const client = new pg.Client({ connectionString: this.opts.databaseUrl });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS "${databaseNameFor(d.deploymentId)}" WITH (FORCE)`);
      } finally {
        await client.end();
      }
    }
  }

  /** Child pids, for tests and diagnostics. */
  pids(): number[] {
    return [...this.servers.values()].map((s) => s.child.pid!).filter(Boolean);
  }

  async shutdown(): Promise<void> {
    this.closed = true;
    for (const b of this.builds.values()) b.abort.abort();
    await Promise.all([...this.servers.values()].map((s) => this.stopServer(s)));
    await Promise.allSettled([...this.background]);
  }

  /** Last resort on process exit: no child outlives the dev process. */
  killAllNow(): void {
    for (const s of this.servers.values()) s.child.kill('SIGKILL');
    for (const b of this.builds.values()) b.abort.abort();
    killRunningSteps();
  }

  exists(deploymentId: string): boolean {
    return existsSync(this.deploymentDir(deploymentId));
  }
}
