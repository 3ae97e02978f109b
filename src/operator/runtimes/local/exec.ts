// Runs one build step as a child process with its output in the build log.
import { spawn } from 'node:child_process';
import { readFile, rm, writeFile } from 'node:fs/promises';
import type { LogWriter } from './logs.ts';

export class StepError extends Error {}

export type Step = {
  /** Shown in the log and in failure messages, e.g. "npm ci". */
  label: string;
  command: string;
  args: string[];
  cwd: string;
  env?: NodeJS.ProcessEnv;
  /** Records the step's process group here while it runs, so a restart can end what a crash left behind. */
  pidFile?: string;
};

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

export type Running = { promise: Promise<string>; kill: () => void };

/** Resolves with the step's stdout (also logged); rejects with a one-line StepError on failure. */
export function runStep(step: Step, log: LogWriter, signal?: AbortSignal): Promise<string> {
  log.line(`$ ${step.label}`);
  return new Promise((resolve, reject) => {
    // Its own process group, so npm's and git's own children stop with it.
    const child = spawn(step.command, step.args, {
      cwd: step.cwd,
      env: step.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const pgid = child.pid;
    if (pgid) {
      runningGroups.add(pgid);
      if (step.pidFile) void writeFile(step.pidFile, String(pgid)).catch(() => undefined);
    }
    const onAbort = () => pgid && killGroup(pgid);
    if (signal?.aborted) onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-20_000);
    });
    const done = Promise.all([log.follow(child.stdout), log.follow(child.stderr)]);
    child.on('error', (err) => reject(new StepError(`${step.label} could not run: ${err.message}`)));
    child.on('close', (code, sig) => {
      if (pgid) runningGroups.delete(pgid);
      signal?.removeEventListener('abort', onAbort);
      if (step.pidFile) void rm(step.pidFile, { force: true });
      void done.then(() => {
        if (code === 0) return resolve(stdout);
        const why = sig ? `was killed (${sig})` : `exited with code ${code}`;
        const reason = failureLine(stderr);
        reject(new StepError(`${step.label} ${why}${reason ? `: ${reason}` : ''}`));
      });
    });
  });
}

/** The most telling line of a failed step's stderr: npm's and git's first real error line, else the last line. */
export function failureLine(stderr: string): string {
  const lines = stderr.split('\n').map((l) => l.trim()).filter(Boolean);
  const noise = /^npm (warn|notice)|^npm error (code |A complete log|\d*\s*$|$)|^npm error\s*$/;
  const npm = lines.find((l) => /^npm error/.test(l) && !noise.test(l));
  if (npm) return npm.replace(/^npm error\s*/, '').slice(0, 300);
  const fatal = lines.find((l) => /^(fatal|error):/.test(l));
  return (fatal ?? lines.filter((l) => !noise.test(l)).at(-1) ?? '').slice(0, 300);
}
