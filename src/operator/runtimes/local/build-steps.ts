// One revision's build, in a directory of its own: clone at the ref, install, build. A marker file written last
// says the build is complete, so a restart can tell a finished build from an interrupted one. Every step that runs
// what the workspace controls (git on its URL, npm with its package.json, its commands) runs with an allow-listed
// environment and, when there is one, inside the sandbox.
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join, relative, resolve, sep } from 'node:path';
import { graphLanguageProblem } from '../../../lib/graph-language.ts';
import type { BuildSpec } from '../types.ts';
import {
  checkoutDir,
  insideReal,
  projectDir,
  revisionMounts,
  type BuildContext,
  type Confined,
} from './build-context.ts';
import { cloneRepo, extractArchive } from './build-fetch.ts';
import { npmCi } from './build-install.ts';
import { childEnv, envProblem } from './env.ts';
import { killRecordedStep, runStep as runStepIn, StepError } from './exec.ts';
import { checkGraphs, importGraphs } from './graph-check.ts';
import { LogWriter } from './logs.ts';
import { ownFolders } from './sandbox.ts';
import { shell, tool } from './tools.ts';

const MARKER = 'build.json';

export type BuildResult = {
  commitSha: string;
  /**
   * node_modules (of the project folder) share their files with the install cache as hard links: mounted read-only
   * when sandboxed. The path recorded is informative only; users of the marker recompute it (the folder is writable).
   */
  sharedNodeModules?: string;
};

export async function readBuildMarker(dir: string): Promise<BuildResult | undefined> {
  try {
    const parsed = JSON.parse(await readFile(join(dir, MARKER), 'utf8')) as BuildResult;
    return typeof parsed.commitSha === 'string' ? parsed : undefined;
  } catch {
    return undefined;
  }
}

export async function runBuild(spec: BuildSpec, ctx: BuildContext): Promise<BuildResult> {
  const { dir, home, log, signal } = ctx;
  // The build's first line says what is built, which is known only once the clone resolved the ref: until then the
  // steps write to a buffer, replayed into the log after that line (or before the failure, if the clone fails).
  const early: string[] = [];
  const buffer = new LogWriter({ append: async (_ref, _type, lines) => void early.push(...lines) }, spec, 'build');
  let out = buffer;
  const replay = async () => {
    if (out === log) return;
    out = log;
    await buffer.flush();
    for (const l of early) log.line(l);
  };
  // The pid file lives beside the revision directory so that clearing the directory does not lose it.
  const pidFile = `${dir}.step-pid`;
  await killRecordedStep(pidFile);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  await mkdir(home, { recursive: true });
  const npmCache = join(home, '.npm');
  const env = childEnv({ base: ctx.baseEnv, home, npmCache });
  const src = checkoutDir(dir);
  // Made here (git clones into it, empty): the steps run as the sandbox's user when the platform runs as root, and
  // write only what is that user's.
  await mkdir(src);
  const user = ctx.sandbox.user;
  await ownFolders(user, [src, home]);
  // Steps write only the checkout and the home folder; the revision folder itself holds the build marker, which
  // must not be theirs to edit.
  const confined: Confined = (step) =>
    runStepIn(
      {
        env,
        mounts: { rw: [src, home] },
        ...step,
        sandbox: ctx.sandbox,
        pidFile,
        maxOutputBytes: ctx.maxStepOutputBytes,
      },
      out,
      signal,
    );
  let fetched: { commitSha: string; shownUrl: string };
  try {
    if (spec.sourceArchive) {
      // No header to wait for: the tarball's hash is known before the step.
      await replay();
      fetched = await extractArchive(spec.sourceArchive.sha256, src, ctx, confined);
    } else {
      fetched = await cloneRepo(spec, ctx, { dir, src, env, pidFile }, confined, replay);
    }
  } finally {
    // A failed fetch still shows what its steps printed.
    await replay();
  }
  const { commitSha, shownUrl } = fetched;

  const config = resolve(src, spec.graphConfigPath);
  if (!config.startsWith(src + sep) || !existsSync(config)) {
    const shown = relative(src, config).startsWith('..') ? spec.graphConfigPath : relative(src, config);
    throw new StepError(`graph config "${shown}" not found in ${shownUrl} at ${commitSha.slice(0, 12)}`);
  }
  const cwd = projectDir(src, spec.graphConfigPath);
  // The runtime itself works in this folder (install cache links): a symlink must not lead it out of the checkout.
  if (!(await insideReal(cwd, src)) || !(await insideReal(config, src))) {
    throw new StepError(`graph config "${spec.graphConfigPath}" leads out of the repository through a symbolic link`);
  }
  const graphConfig = await readFile(config, 'utf8')
    .then((text) => JSON.parse(text) as { dockerfile_lines?: unknown })
    .catch(() => undefined);
  // A Python graph would install and build, then fail to import at deploy: refuse it here, in one line.
  const language = graphLanguageProblem(graphConfig);
  if (language) throw new StepError(language);
  const dockerfileLines = graphConfig?.dockerfile_lines;
  if (Array.isArray(dockerfileLines) && dockerfileLines.length) {
    log.line(
      `dockerfile_lines: ${dockerfileLines.length} line(s) not applied (the local runtime builds no image; ` +
        'what they would install must already be on this machine)',
    );
  }
  let sharedNodeModules: string | undefined;
  if (spec.installCommand) {
    await confined({ label: spec.installCommand, command: shell(), args: ['-c', spec.installCommand], cwd });
  } else if (existsSync(join(cwd, 'package-lock.json'))) {
    sharedNodeModules = await npmCi(spec.deploymentId, cwd, ctx, confined);
  } else if (existsSync(join(cwd, 'package.json'))) {
    const args = ['install', '--prefer-offline', '--no-audit', '--no-fund'];
    await confined({ label: `npm ${args.join(' ')}`, command: tool('npm') ?? 'npm', args, cwd });
  } else {
    log.line('no package.json: skipping install');
  }
  if (spec.buildCommand) {
    await confined({
      label: spec.buildCommand,
      command: shell(),
      args: ['-c', spec.buildCommand],
      cwd,
      mounts: revisionMounts(src, home, sharedNodeModules),
    });
  }
  await checkGraphs(confined, {
    config,
    checkout: src,
    cwd,
    home,
    mounts: revisionMounts(src, home, sharedNodeModules),
  });
  // Secrets a process cannot be given fail the server's start, which says so; the build does not fail for them.
  if (ctx.serverEnv && !envProblem(ctx.serverEnv)) {
    await importGraphs(confined, {
      config,
      cwd,
      home,
      env: childEnv({ base: ctx.baseEnv, home, npmCache, extra: ctx.serverEnv }),
      secrets: ctx.serverEnv,
      mounts: revisionMounts(src, home, sharedNodeModules),
    });
  }
  const result: BuildResult = { commitSha, ...(sharedNodeModules ? { sharedNodeModules } : {}) };
  await writeFile(join(dir, MARKER), JSON.stringify(result));
  log.line(`build complete (${commitSha.slice(0, 12)})`);
  return result;
}
