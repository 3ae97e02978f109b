// The build step that loads nothing but checks that each graph of langgraph.json would: graph-check.mjs parses the
// graph modules and the repository files they import. A problem fails the build with its one line
// (graph "<id>": <file>:<line>:<column>: <message>), in the revision's status, instead of a deploy that crashes on it.
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { packagePath } from '../../../lib/package-root.ts';
import { StepError, type Step } from './exec.ts';
import type { Mounts } from './sandbox.ts';

const GRAPH_CHECK = packagePath('src/operator/runtimes/local/graph-check.mjs');

type Confined = (
  step: Omit<Step, 'env' | 'sandbox' | 'mounts' | 'pidFile'> & { mounts?: Omit<Mounts, 'cwd'> },
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
