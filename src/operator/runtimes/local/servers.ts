// Agent servers: each runs as an `agentplane agent-server` child process (in the sandbox, under its limits) on a
// free port, on its deployment's data or scratch data (preflight); it is ready once /ok answers, and stops once.
import { mkdir, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { dataDirOwner } from '../../../lib/data-dir-lock.ts';
import { pathToFileURL } from 'node:url';
import { deploymentAuthEnv } from '../../../lib/deployment-token.ts';
import { packagePath } from '../../../lib/package-root.ts';
import type { ServerSpec } from '../types.ts';
import { checkoutDir, insideReal, isRealDir, projectDir, resetCacheDir, revisionMounts } from './build-context.ts';
import { readBuildMarker } from './build-steps.ts';
import {
  deploymentDir,
  fail,
  homeDir,
  logWriter,
  notify,
  revKey,
  safeId,
  track,
  type LocalContext,
  type Server,
} from './context.ts';
import { childEnv, envProblem, secretsProblem } from './env.ts';
import { prepareLimits } from './limits.ts';
import { removeServerCgroup } from './limits-cgroup.ts';
import { superviseLimits, usedBytes, type LimitBreach } from './limits-watchdog.ts';
import { databaseAnswers, ensureDeploymentDatabase } from './postgres.ts';
import { NO_SANDBOX, ownFolders } from './sandbox.ts';
import { holdPort, LISTEN_FD, SECRETS_FD, spawnServer, type ServerProcess } from './server-process.ts';
import { summarizeFailure, waitHealthy } from './server-lifecycle.ts';

const AGENTPLANE_BIN = packagePath('bin/agentplane.mjs');
const PARENT_WATCH = pathToFileURL(packagePath('src/operator/runtimes/local/parent-watch.mjs')).href;

/**
 * Where the server keeps its data: a scratch folder (preflight), the deployment's embedded store folder, or the
 * deployment's own Postgres database, whose URL (with its password) goes through the environment, not argv.
 */
async function dataPlace(
  ctx: LocalContext,
  deploymentId: string,
  preflightDir?: string,
): Promise<{ args: string[]; env: Record<string, string>; rw: string[] }> {
  if (preflightDir) {
    await rm(preflightDir, { recursive: true, force: true });
    await mkdir(preflightDir, { recursive: true });
    return { args: ['--data-dir', preflightDir], env: {}, rw: [preflightDir] };
  }
  if (!ctx.opts.databaseUrl) {
    const dataDir = join(deploymentDir(ctx, deploymentId), 'data');
    await mkdir(dataDir, { recursive: true });
    return { args: ['--data-dir', dataDir], env: {}, rw: [dataDir] };
  }
  await mkdir(deploymentDir(ctx, deploymentId), { recursive: true });
  const passwordFile = join(deploymentDir(ctx, deploymentId), 'postgres-password');
  const url = await ensureDeploymentDatabase(ctx.opts.databaseUrl, deploymentId, passwordFile);
  return { args: [], env: { DATABASE_URI: url }, rw: [] };
}

/** The deployment's URL as LocalRuntime.url gives it (its own origin, or the path under the base URL once known). */
async function deploymentUrl(ctx: LocalContext, deploymentId: string): Promise<string | undefined> {
  if (ctx.opts.origins) return ctx.opts.origins.open(deploymentId);
  return ctx.baseUrl ? `${ctx.baseUrl}/deployments/${deploymentId}` : undefined;
}

export async function startServer(
  ctx: LocalContext,
  spec: ServerSpec,
  dir: string,
  preflight = false,
): Promise<Server> {
  const key = revKey(spec);
  const checkout = checkoutDir(dir);
  const config = join(checkout, spec.graphConfigPath);
  const home = homeDir(ctx, spec.deploymentId);
  const cwd = projectDir(checkout, spec.graphConfigPath);
  // Checked before anything is created: a value spawn() cannot pass (NUL, over 128 KiB) or a reserved name is the
  // secret's fault.
  const refused = secretsProblem(spec.env);
  if (refused) throw new Error(refused);
  const marker = await readBuildMarker(dir);
  // The server may have changed its checkout while it ran: re-check what the runtime is about to mount.
  if (!(await insideReal(cwd, checkout)))
    throw new Error('the project folder leads out of the checkout through a symbolic link');
  const nodeModules = join(cwd, 'node_modules');
  const sharedNodeModules = marker?.sharedNodeModules && (await isRealDir(nodeModules)) ? nodeModules : undefined;
  if (sharedNodeModules) await resetCacheDir(sharedNodeModules);
  const data = await dataPlace(ctx, spec.deploymentId, preflight ? join(dir, 'preflight-data') : undefined);
  if (ctx.gone.has(spec.deploymentId) || ctx.closed) throw new Error(`deployment ${spec.deployment} is gone`);
  await mkdir(home, { recursive: true });
  const base = { base: ctx.opts.baseEnv ?? process.env, home, npmCache: join(home, '.npm') };
  const chainEnv = childEnv(base);
  // After the workspace's secrets: a secret named LANGGRAPH_AES_KEY does not replace the platform's key.
  const dataKeys = (await ctx.opts.dataKeys?.(spec)) ?? {};
  const publicUrl = await deploymentUrl(ctx, spec.deploymentId);
  // What the server needs and its graphs must not see (the data keys, the database URL with its password) goes
  // through a descriptor it reads once at start (--secrets-fd): never in its environment, which graph code reads
  // and /proc/self/environ keeps for the process's life. A workspace secret of one of these names is dropped: the
  // platform's value replaces it. The deployment's token stays in the environment: graph code calls the auth
  // service with it.
  const secrets: Record<string, string> = { ...dataKeys, ...data.env };
  const workspaceEnv = Object.fromEntries(Object.entries(spec.env).filter(([name]) => !(name in secrets)));
  const env = childEnv({
    ...base,
    extra: {
      ...workspaceEnv,
      ...deploymentAuthEnv(
        ctx.opts.deploymentTokenKey && { controlPlaneUrl: ctx.baseUrl, tokenKey: ctx.opts.deploymentTokenKey },
        spec.tenantId,
        spec.deploymentId,
      ),
    },
  });
  const problem = envProblem(env) ?? envProblem(secrets);
  if (problem) throw new Error(problem);
  const log = logWriter(ctx, spec, 'deploy');
  const logger = ctx.opts.logger.child({ deployment: spec.deployment, revision: spec.revision });
  // Deployments that are not public answer only their tenant's keys; without a key source they do not start.
  const keysFile = spec.access === 'public' ? undefined : (spec.authKeysFile ?? ctx.opts.authKeysFile?.(spec.tenantId));
  if (spec.access !== 'public' && !keysFile)
    throw new Error('this runtime has no API key source: only public deployments can run');
  const keysArgs = keysFile ? ['--auth-keys-file', keysFile] : [];
  // This process holds the port from here until the server has inherited it (spawn), then closes its own copy.
  const held = await holdPort();
  const { port } = held;
  // The port makes the cgroup name unique to this start (a preflight's cgroup may still be going away).
  const limits = await prepareLimits(
    spec.resourceSpec,
    ctx.opts.limits ?? {},
    `agentplane-${safeId(spec.revision)}-${port}`,
  ).catch((err: unknown) => {
    held.release();
    throw err;
  });
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
    '--listen-fd',
    String(LISTEN_FD),
    ...data.args,
    ...keysArgs,
    ...(Object.keys(secrets).length ? ['--secrets-fd', String(SECRETS_FD)] : []),
    // The machine's setting: a flag, so it wins over an AGENTPLANE_EXECUTOR_THREADS among the deployment's secrets.
    ...(ctx.opts.agentExecutorThreads !== undefined
      ? ['--executor-threads', String(ctx.opts.agentExecutorThreads)]
      : []),
    // Where clients reach it through the proxy (named by its A2A agent cards): a flag, since the agent's environment
    // holds no AGENTPLANE_* variable of the platform's; a secret AGENTPLANE_PUBLIC_AGENT_URL (a domain of the
    // workspace's own) says otherwise.
    ...(publicUrl && spec.env.AGENTPLANE_PUBLIC_AGENT_URL === undefined ? ['--public-url', publicUrl] : []),
  ];
  const mounts = {
    ...revisionMounts(checkout, home, sharedNodeModules, data.rw),
    ro: keysFile ? [dirname(keysFile)] : [],
  };
  log.line(`starting agent server on 127.0.0.1:${port}${preflight ? ' on scratch data (preflight)' : ''}`);
  const sandbox = ctx.opts.sandbox ?? NO_SANDBOX;
  let proc: ServerProcess;
  try {
    // As root, the server runs as the sandbox's user: what it writes becomes that user's (only what it writes).
    await ownFolders(sandbox.user, mounts.rw ?? []);
    log.line(limits.describe);
    proc = spawnServer(sandbox, process.execPath, args, {
      cwd,
      env: chainEnv,
      serverEnv: env,
      secrets,
      mounts,
      limit: limits.wrap,
      listenFd: held.fd,
      tmpSizeMb: limits.memoryMb,
    });
  } catch (err) {
    void removeServerCgroup(limits.cgroup);
    log.line(`agent server could not start: ${(err as Error).message}`);
    await log.flush();
    throw err;
  } finally {
    held.release();
  }
  const { child } = proc;
  let breach: LimitBreach | undefined;
  const unsupervise = superviseLimits(limits, child.pid, (text) => log.line(text), {
    intervalMs: ctx.opts.limits?.watchIntervalMs,
    diskIntervalMs: ctx.opts.limits?.diskWatchIntervalMs,
    probes: {
      // The sandbox's own /tmp, seen through its process (unconfined, /tmp is the machine's and not counted).
      tmpBytes: async () => {
        const pid = proc.confinedPid();
        return pid ? usedBytes(`/proc/${pid}/root/tmp`) : 0;
      },
      disk: { dirs: mounts.rw ?? [], skip: mounts.roOver ?? [] },
    },
    breached: (b) => (breach = b),
  });
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
  ctx.servers.set(key, server);
  logger.info({ port, pid: child.pid }, 'agent server starting');
  // spawn() reports E2BIG, ENOENT and the like asynchronously: the server failed to start.
  child.once('error', (err) => {
    if (ctx.servers.get(key) === server) ctx.servers.delete(key);
    log.line(`agent server could not start: ${err.message}`);
    void log.flush();
    fail(ctx, spec, `agent server could not start: ${err.message}`);
    settle(false);
    notify(ctx, spec);
  });

  child.once('exit', (code, signal) => {
    void output.then(async () => {
      const why = signal ? `was killed (${signal})` : `exited with code ${code}`;
      log.line(`agent server ${why}`);
      await log.flush();
      if (ctx.servers.get(key) === server) ctx.servers.delete(key);
      if (server.stopping || ctx.closed) return;
      // A limit the watchdog enforced says why, whatever the server printed last.
      const detail = breach ? `${breach.message}; agent server killed` : summarizeFailure(log.tail);
      // Its database was down, or the server it replaces still held the data folder (a predecessor killed with the
      // host that has not ended yet), only if the runtime's own check says so now, whatever the server printed.
      const transient =
        !breach &&
        server.phase === 'Starting' &&
        (ctx.opts.databaseUrl
          ? !(await databaseAnswers(ctx.opts.databaseUrl))
          : !preflight && dataDirOwner(join(deploymentDir(ctx, spec.deploymentId), 'data')).held);
      if (ctx.failed.has(key)) {
        // already explained (spawn error)
      } else if (server.phase === 'Starting' && !spec.proven && !ctx.restarts.restarting(key) && !transient) {
        // A revision that never served fails its deploy: its code does not start.
        const message = `agent server ${why} before becoming healthy${detail ? `: ${detail}` : ''}`;
        logger.warn({ code, signal, reason: detail }, 'agent server ended before becoming healthy');
        fail(ctx, spec, message);
      } else {
        // It served (here or before a restart of the platform), or what ended it passes: start it again, later
        // after each failure in a row; the revision says meanwhile why it is not serving.
        const ended = `agent server ${why}${server.phase === 'Starting' ? ' before becoming healthy' : ''}`;
        const next = ctx.restarts.failed(
          key,
          spec,
          `${ended}${detail ? `: ${detail}` : ''}`,
          transient,
          breach?.reason,
        );
        log.line(`${ended}; starting it again in ${Math.round((next.at - Date.now()) / 1000)} s (${next.reason})`);
        await log.flush();
        logger.warn(
          { code, signal, failures: next.failures, reason: next.reason, retry_in_ms: next.at - Date.now() },
          'agent server ended; starting it again after a delay',
        );
      }
      notify(ctx, spec);
    });
  });
  void track(
    ctx,
    waitHealthy(ctx, server, log).then(settle, () => settle(false)),
  );
  return server;
}
