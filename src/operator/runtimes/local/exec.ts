// Runs one build step as a child process with its output in the build log.
import { spawn } from 'node:child_process';
import type { LogWriter } from './logs.ts';

export class StepError extends Error {}

export type Step = {
  /** Shown in the log and in failure messages, e.g. "npm ci". */
  label: string;
  command: string;
  args: string[];
  cwd: string;
  env?: NodeJS.ProcessEnv;
};

export type Running = { promise: Promise<string>; kill: () => void };

/** Resolves with the step's stdout (also logged); rejects with a one-line StepError on failure. */
export function runStep(step: Step, log: LogWriter, signal?: AbortSignal): Promise<string> {
  log.line(`$ ${step.label}`);
  return new Promise((resolve, reject) => {
    const child = spawn(step.command, step.args, {
      cwd: step.cwd,
      env: step.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      signal,
      killSignal: 'SIGKILL',
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-20_000);
    });
    const done = Promise.all([log.follow(child.stdout), log.follow(child.stderr)]);
    child.on('error', (err) => reject(new StepError(`${step.label} could not run: ${err.message}`)));
    child.on('close', (code, sig) => {
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
