// `agentplane agent-server --check-report <file>`: import the graphs exactly as a start would (the same platform set
// up first, the same loader, TypeScript through tsx, langgraph.json's env), then write the first problem to the
// file, in the project's terms, and end. The local runtime's build runs it with the revision's secrets, so a graph
// that throws at import fails the build once instead of every start, and one that needs its secrets to construct a
// client is never refused for lacking them. What the graphs print is not shown: graph code may print its
// environment, and the build log is no place for a workspace's secrets.
import { writeFile } from 'node:fs/promises';
import type { Logger } from '../lib/logger.ts';
import type { AgentServerConfig } from './config.ts';
import { loadGraphs } from './graphs/index.ts';
import { installMainThreadPlatform } from './platform/index.ts';
import { installLeanRunContext } from './shims/lean-run-context.ts';

export async function checkGraphImports(config: AgentServerConfig & { checkReport: string }, logger: Logger) {
  const silent = () => true;
  process.stdout.write = silent;
  process.stderr.write = silent;
  let problem = '';
  try {
    installMainThreadPlatform({ logger, plannedUrl: `http://127.0.0.1:${config.port}`, logLevel: config.logLevel });
    installLeanRunContext();
    await loadGraphs(config.configPath, { logger, isolateFailures: false });
  } catch (err) {
    problem = String((err as Error)?.message ?? err).split('\n')[0]!;
  }
  await writeFile(config.checkReport, problem ? `${problem}\n` : '');
  // Now: a graph module may have started timers or sockets that would keep the process up.
  process.exit(0);
}
