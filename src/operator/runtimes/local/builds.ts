// A revision's build as the runtime runs it: queued fairly, under a deadline, in the revision's own folder
// (build.ts has the steps); a finished build is remembered on disk, and old build folders are pruned.
import { chmod, mkdir, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { withDeadline } from '../../../lib/deadline.ts';
import type { BuildSpec, BuildStatus, RevisionRef } from '../types.ts';
import type { InstallCache } from './build-context.ts';
import { readBuildMarker, runBuild } from './build-steps.ts';
import {
  deploymentDir,
  homeDir,
  logWriter,
  notify,
  revisionDir,
  revKey,
  savedBuildFile,
  track,
  type Build,
  type LocalContext,
  type SavedBuild,
} from './context.ts';
import { buildsToRemove, trimInstallCache } from './housekeeping.ts';
import { redactText } from '../../../git/redact.ts';
import { NO_SANDBOX } from './sandbox.ts';

export async function hasBuild(ctx: LocalContext, ref: RevisionRef): Promise<boolean> {
  return (await readBuildMarker(revisionDir(ctx, ref))) !== undefined;
}

export async function build(
  ctx: LocalContext,
  spec: BuildSpec,
  serverEnv?: () => Promise<Record<string, string>>,
): Promise<BuildStatus> {
  if (ctx.gone.has(spec.deploymentId)) return { phase: 'Failed', message: 'the deployment was deleted' };
  const key = revKey(spec);
  const current = ctx.builds.get(key);
  if (current) return current.status;
  const done = await readBuildMarker(revisionDir(ctx, spec));
  if (done) return { phase: 'Succeeded', commitSha: done.commitSha };
  const build: Build = { status: { phase: 'Running' }, abort: new AbortController() };
  ctx.builds.set(key, build);
  void track(ctx, runRevisionBuild(ctx, spec, build, serverEnv));
  return build.status;
}

async function runRevisionBuild(
  ctx: LocalContext,
  spec: BuildSpec,
  build: Build,
  serverEnv?: () => Promise<Record<string, string>>,
): Promise<void> {
  const log = logWriter(ctx, spec, 'build');
  const logger = ctx.opts.logger.child({ deployment: spec.deployment, revision: spec.revision });
  const releaseSlot = await ctx.buildQueue.acquire(spec.tenantId ?? spec.deploymentId);
  let deadline: ReturnType<typeof withDeadline> | undefined;
  try {
    if (build.abort.signal.aborted) return;
    logger.info('build started');
    const cacheDir = join(ctx.opts.dataDir, 'install-cache');
    const maxBytes = ctx.opts.installCacheMaxBytes ?? 2048 * 1024 * 1024;
    const cache: InstallCache | undefined =
      ctx.opts.installCache === false
        ? undefined
        : {
            dir: cacheDir,
            maxBytes,
            onPublished: async (entry) => {
              const evicted = await trimInstallCache(cacheDir, entry, maxBytes);
              if (evicted.length) logger.info({ evicted: evicted.length }, 'install cache trimmed');
            },
          };
    deadline = withDeadline(ctx.opts.buildTimeoutMs ?? 30 * 60_000, build.abort.signal);
    const result = await runBuild(spec, {
      dir: revisionDir(ctx, spec),
      home: homeDir(ctx, spec.deploymentId),
      log,
      signal: deadline.signal,
      sandbox: ctx.opts.sandbox ?? NO_SANDBOX,
      repoPolicy: {
        allowedRoots: ctx.opts.allowLocalRepos ?? [],
        forbiddenRoots: ctx.opts.protectedDirs ?? [ctx.opts.dataDir],
      },
      baseEnv: ctx.opts.baseEnv ?? process.env,
      cache,
      maxStepOutputBytes: ctx.opts.maxStepOutputBytes,
      ...(serverEnv ? { serverEnv: await serverEnv() } : {}),
      ...(spec.tenantId && ctx.opts.sourceArchives
        ? { archiveFile: archivesOf(ctx.opts.sourceArchives, spec.tenantId) }
        : {}),
      credential:
        spec.tenantId && spec.integrationId && ctx.opts.gitCredential
          ? await ctx.opts.gitCredential(spec.tenantId, spec.integrationId, spec.repoUrl)
          : undefined,
    });
    await saveBuild(ctx, spec, result.commitSha);
    // Before reporting success: whoever sees Succeeded also sees the old folders gone.
    await pruneBuilds(ctx, spec).catch((err: Error) =>
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
    if (build.status.phase === 'Succeeded') ctx.builds.delete(revKey(spec));
    if (!build.abort.signal.aborted) notify(ctx, spec);
  }
}

/** A workspace's stored tarballs, by hash: a build finds only its own workspace's bytes. */
const archivesOf =
  (archives: NonNullable<LocalContext['opts']['sourceArchives']>, tenantId: string) =>
  (sha256: string): string | undefined =>
    archives.objectPath(tenantId, sha256);

async function saveBuild(ctx: LocalContext, spec: BuildSpec, commitSha: string): Promise<void> {
  const file = savedBuildFile(ctx, spec);
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  const saved: SavedBuild = { spec, commitSha };
  await writeFile(file, JSON.stringify(saved), { mode: 0o600 });
  await chmod(file, 0o600);
}

/**
 * Keeps the `keepBuilds` most recent build folders of a deployment, plus the routed revision, the newest one and
 * any with a server or a build running. A removed revision is built again (same commit) when it is redeployed.
 */
async function pruneBuilds(ctx: LocalContext, latest: RevisionRef): Promise<void> {
  const revisionsDir = join(deploymentDir(ctx, latest.deploymentId), 'revisions');
  const built = [];
  for (const name of await readdir(revisionsDir).catch(() => [] as string[])) {
    const marker = await stat(join(revisionsDir, name, 'build.json')).catch(() => undefined);
    if (marker) built.push({ revision: name, builtAt: marker.mtimeMs });
  }
  const keep = new Set<string>([latest.revision]);
  const routed = ctx.routes.get(latest.deploymentId);
  if (routed) keep.add(routed);
  for (const key of [...ctx.servers.keys(), ...ctx.builds.keys(), ...ctx.parked.keys()]) {
    const [id, revision] = key.split('/');
    if (id === latest.deploymentId && revision) keep.add(revision);
  }
  for (const revision of buildsToRemove(built, ctx.opts.keepBuilds ?? 5, keep)) {
    await rm(join(revisionsDir, revision), { recursive: true, force: true, maxRetries: 3 });
    ctx.opts.logger.info({ deployment: latest.deployment, revision }, 'old build folder removed');
  }
}
