// The build step that loads nothing but checks that each graph of langgraph.json would: graph-check.mjs parses the
// graph modules and the repository files they import. A problem fails the build with its one line
// (graph "<id>": <file>:<line>:<column>: <message>), in the revision's status, instead of a deploy that crashes on it.
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { packagePath } from '../../../lib/package-root.ts';
import { StepError, type Step } from './exec.ts';
import type { Mounts } from './sandbox.ts';

const GRAPH_CHECK = packagePath('src/operator/runtimes/local/graph-check.mjs');
const AGENTPLANE_BIN = packagePath('bin/agentplane.mjs');

type Confined = (
  step: Omit<Step, 'env' | 'sandbox' | 'mounts' | 'pidFile'> & {
    env?: Record<string, string>;
    mounts?: Omit<Mounts, 'cwd'>;
  },
) => Promise<string>;

/** Runs the check (confined like the build's other steps); throws a StepError naming the first problem. */
export async function checkGraphs(
  confined: Confined,
  opts: { config: string; checkout: string; cwd: string; home: string; mounts: Omit<Mounts, 'cwd'> },
): Promise<void> {
  // In the deployment's home (writable by the step, not part of the repository); whatever was there goes first.
  const reportFile = join(opts.home, '.agentplane-graph-check');
  await rm(reportFile, { force: true, recursive: true });
  await confined({
    label: 'check that the graphs load',
    command: process.execPath,
    args: [GRAPH_CHECK, opts.config, opts.checkout, reportFile],
    cwd: opts.cwd,
    mounts: opts.mounts,
  });
  const text = await readFile(reportFile, 'utf8').finally(() => rm(reportFile, { force: true }));
  const problems = text
    .slice(0, 64 * 1024)
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  if (!problems.length) return;
  const more = problems.length > 1 ? ` (and ${problems.length - 1} more in the build log)` : '';
  throw new StepError(`${problems[0]}${more}`);
}

/**
 * The second check, which runs the code: each graph module imported as the agent server's start imports it
 * (`agent-server --check-report`), in the sandbox, with the environment the revision's server gets (the workspace's
 * secrets, never the platform's keys, which no server's environment holds either). An import-time throw fails the
 * build once, with the user's file:line:column; a graph that constructs its clients from its secrets passes. The
 * step's output is dropped (graph code may print its environment) and a secret's value in the one line the report
 * holds is masked, so neither the build log nor the revision's status can show one.
 */
export async function importGraphs(
  confined: Confined,
  opts: {
    config: string;
    cwd: string;
    home: string;
    env: Record<string, string>;
    secrets: Record<string, string>;
    mounts: Omit<Mounts, 'cwd'>;
  },
): Promise<void> {
  const reportFile = join(opts.home, '.agentplane-graph-import');
  await rm(reportFile, { force: true, recursive: true });
  await confined({
    label: "import the graphs with the revision's environment",
    command: process.execPath,
    args: [AGENTPLANE_BIN, 'agent-server', '--config', opts.config, '--check-report', reportFile],
    cwd: opts.cwd,
    env: opts.env,
    mounts: opts.mounts,
    quiet: true,
  });
  const text = await readFile(reportFile, 'utf8').finally(() => rm(reportFile, { force: true }));
  let line = text
    .slice(0, 8 * 1024)
    .split('\n')[0]!
    .trim();
  if (!line) return;
  // Longest first, so a secret that contains another is masked whole; one or two characters would mask everything.
  const values = Object.values(opts.secrets).filter((v) => v.length >= 4);
  for (const v of values.sort((a, b) => b.length - a.length)) line = line.split(v).join('***');
  throw new StepError(line);
}
