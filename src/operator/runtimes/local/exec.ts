// Runs one build step as a child process with its output in the build log. Memory stays bounded whatever the
// step prints: output is streamed to the (capped) log, only a bounded stdout and stderr tail are kept, and a step
// that prints more than its byte allowance is killed.
import { spawn, spawnSync, type ChildProcessByStdio } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { readFile, rm, writeFile } from 'node:fs/promises';
import type { LogWriter } from './logs.ts';
import { redactText } from '../../../git/redact.ts';
import { NO_SANDBOX, type Mounts, type Sandbox } from './sandbox.ts';
import { shell, tool } from './tools.ts';

export class StepError extends Error {
  constructor(message: string) {
    super(redactText(message));
  }
}

export type Step = {
  /** Shown in the log and in failure messages, e.g. "npm ci" (credentials are redacted). */
  label: string;
  command: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  /** Records the step's process group here while it runs, so a restart can end what a crash left behind. */
  pidFile?: string;
  /** Confinement of a step that runs what a workspace controls; our own steps (cp) run unconfined. */
  sandbox?: Sandbox;
  mounts?: Omit<Mounts, 'cwd'>;
  /** Kill the step once it has printed more than this many bytes (stdout and stderr together). */
  maxOutputBytes?: number;
  /**
   * Its output is read and dropped, neither logged nor quoted in a failure: a step that runs a workspace's code with
   * its secrets (the import check), whose code may print them.
   */
  quiet?: boolean;
};

/** stdout handed back to the caller (git rev-parse and the like print a line or two). */
const MAX_STDOUT = 64 * 1024;
const MAX_STDERR = 20_000;
export const DEFAULT_MAX_STEP_OUTPUT = 64 * 1024 * 1024;

let pdeathsig: boolean | undefined;

/**
 * Leads a build step's process group and ends the whole group when the process that started it goes away: the
 * guard's stdin is a pipe from that process, which closes when it dies, even by SIGKILL. The kernel's parent-death
 * signal alone is not enough: it reaches only the direct child, not what a shell or npm starts below it.
 * A POSIX shell, not a Node process: it costs a millisecond per step instead of ~60 ms of CPU. A watcher in the
 * background reads the pipe (as fd 3: a background job's stdin would be /dev/null) and kills the group (kill 0) when
 * it ends; it is started through a subshell, so it is nobody's child that the step could wait for. The step then
 * replaces the shell (exec): it leads the group itself, its exit code or the signal that killed it is what this
 * process sees, and its parent-death signal (withParentDeath) is tied to this process. The watcher holds none of
 * the step's output (whose close this process waits for), nor does the step hold the pipe.
 */
const STEP_GUARD = '({ read -r _ <&3; kill -KILL 0; } </dev/null >/dev/null 2>&1 &); exec 3<&- </dev/null "$@"';

/**
 * `setpriv --pdeathsig KILL` in front of a step: the kernel kills it when this process dies, even by SIGKILL (an
 * orphaned bwrap or npm would otherwise finish the build on its own). Used when util-linux's setpriv has the flag.
 */
export function withParentDeath(command: string, args: string[]): { command: string; args: string[] } {
  const setpriv = tool('setpriv');
  pdeathsig ??= !!setpriv && spawnSync(setpriv, ['--pdeathsig', 'KILL', '--', 'true']).status === 0;
  return pdeathsig && setpriv
    ? { command: setpriv, args: ['--pdeathsig', 'KILL', '--', command, ...args] }
    : { command, args };
}

/** Process groups of running steps: killed when this process exits. */
const runningGroups = new Set<number>();

export function killRunningSteps(): void {
  for (const pgid of runningGroups) killGroup(pgid);
}

function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** Ends the process group a previous run of this process recorded (it crashed mid-step). */
export async function killRecordedStep(pidFile: string): Promise<void> {
  const pgid = Number(await readFile(pidFile, 'utf8').catch(() => ''));
  if (pgid > 1) killGroup(pgid);
  await rm(pidFile, { force: true });
}

/** Resolves with the step's stdout (also logged, at most 64 KiB); rejects with a one-line StepError on failure. */
export function runStep(step: Step, log: LogWriter, signal?: AbortSignal): Promise<string> {
  log.line(`$ ${step.label}`);
  return new Promise((resolve, reject) => {
    const wrapped = (step.sandbox ?? NO_SANDBOX).wrap(step.command, step.args, { ...step.mounts, cwd: step.cwd });
    const step0 = withParentDeath(wrapped.command, wrapped.args);
    const command = shell();
    const args = ['-c', `exec 3<&0; ${STEP_GUARD}`, 'step-guard', step0.command, ...step0.args];
    let child: ChildProcessByStdio<Writable, Readable, Readable>;
    try {
      // Its own process group, so npm's and git's own children stop with it; the guard's watcher ends it when this
      // process dies (its stdin pipe closes), which no signal of ours could do after a SIGKILL.
      child = spawn(command, args, { cwd: step.cwd, env: step.env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    } catch (err) {
      reject(new StepError(`${step.label} could not run: ${(err as Error).message}`));
      return;
    }
    child.stdin.on('error', () => undefined); // the group has ended; nothing is ever written to it
    const pgid = child.pid;
    if (pgid) {
      runningGroups.add(pgid);
      if (step.pidFile) void writeFile(step.pidFile, String(pgid)).catch(() => undefined);
    }
    let killedFor: string | undefined;
    const kill = (why: string) => {
      killedFor ??= why;
      if (pgid) killGroup(pgid);
    };
    const onAbort = () =>
      kill(
        signal?.reason instanceof Error && signal.reason.name === 'TimeoutError'
          ? 'ran past the build deadline'
          : 'was stopped',
      );
    if (signal?.aborted) onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    const maxOutput = step.maxOutputBytes ?? DEFAULT_MAX_STEP_OUTPUT;
    let printed = 0;
    const count = (n: number) => {
      printed += n;
      if (printed > maxOutput) kill(`printed more than ${Math.round(maxOutput / 1024 / 1024)} MiB of output`);
    };
    let stdout = '';
    let stderr = '';
    if (!step.quiet) {
      child.stdout.on('data', (d: Buffer) => {
        if (stdout.length < MAX_STDOUT) stdout += d.toString().slice(0, MAX_STDOUT - stdout.length);
      });
      child.stderr.on('data', (d: Buffer) => {
        stderr = (stderr + d.toString()).slice(-MAX_STDERR);
      });
    }
    const drop = (stream: Readable) =>
      new Promise<void>((res) => {
        stream.on('data', (d: Buffer) => count(d.length));
        stream.once('close', res);
      });
    const done = step.quiet
      ? Promise.all([drop(child.stdout), drop(child.stderr)])
      : Promise.all([log.follow(child.stdout, count), log.follow(child.stderr, count)]);
    child.on('error', (err) => {
      if (pgid) runningGroups.delete(pgid);
      reject(new StepError(`${step.label} could not run: ${err.message}`));
    });
    // Output still open after the step exited (something it started in the background holds it): stop waiting.
    child.once('exit', () => {
      setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
      }, 5000).unref();
    });
    child.on('close', (code, sig) => {
      if (pgid) {
        // Nothing the step started in the background outlives it (unsandboxed; the sandbox's PID namespace does that).
        killGroup(pgid);
        runningGroups.delete(pgid);
      }
      signal?.removeEventListener('abort', onAbort);
      if (step.pidFile) void rm(step.pidFile, { force: true });
      void done.then(() => {
        if (code === 0 && !killedFor) return resolve(stdout);
        const why = killedFor ?? (sig ? `was killed (${sig})` : `exited with code ${code}`);
        const reason = killedFor || step.quiet ? '' : failureLine(stderr) || failureLine(log.tail.join('\n'));
        reject(new StepError(`${step.label} ${why}${reason ? `: ${reason}` : ''}`));
      });
    });
  });
}

/** The line whole (the API and the CLI show all of it); the bound only keeps a status object small. */
const MAX_LINE = 4000;

/** The most telling line of a failed step's stderr: npm's and git's first real error line, else the last line. */
export function failureLine(stderr: string): string {
  const lines = stderr
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const noise = /^npm (warn|notice)|^npm error (code |A complete log|\d*\s*$|$)|^npm error\s*$/;
  const npm = lines.find((l) => /^npm error/.test(l) && !noise.test(l));
  if (npm) return redactText(npm.replace(/^npm error\s*/, '').slice(0, MAX_LINE));
  const fatal = lines.find((l) => /^(fatal|error):/.test(l));
  const last = fatal ?? lines.filter((l) => !noise.test(l) && !l.startsWith('$ ')).at(-1) ?? '';
  return redactText(last.slice(0, MAX_LINE));
}
