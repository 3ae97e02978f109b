// `agentplane agent-server`: parse flags/env, start, stop cleanly on SIGTERM/SIGINT.
import { createLogger } from '../lib/logger.ts';
import { formatHelp } from '../lib/cli-args.ts';
import { forgetDataKeys, parseAgentServerConfig } from './config.ts';
import { agentServerCommand } from './flags.ts';
import { closeOnSignals } from '../lib/shutdown.ts';
import { ensureTypeScriptImports } from '../lib/typescript-imports.ts';

export async function run(argv: string[]): Promise<void> {
  const config = parseAgentServerConfig(argv, process.env);
  // The watched server is a child process that reads them itself.
  const childEnv = config?.watch ? { ...process.env } : undefined;
  forgetDataKeys(process.env);
  if (!config) {
    process.stdout.write(formatHelp(agentServerCommand));
    return;
  }
  // Each mode loads only its own modules, and before tsx's hooks are registered: every module loaded after that
  // passes through them (another thread), which costs more than loading it.
  if (config.checkReport) {
    const { checkGraphImports } = await import('./check.ts');
    await ensureTypeScriptImports();
    const logger = createLogger({ level: 'silent', name: 'agent-server' });
    return checkGraphImports({ ...config, checkReport: config.checkReport }, logger);
  }
  if (config.watch) {
    const logger = createLogger({ level: config.logLevel, name: 'agent-server-watch' });
    const { serveWatching } = await import('./watch.ts');
    const watching = serveWatching({ argv, env: childEnv!, config, logger });
    closeOnSignals(logger, () => watching.close());
    return;
  }
  const { startAgentServer } = await import('./server.ts');
  // Every user file this process imports (graphs, auth, routes, embeddings) may be TypeScript.
  await ensureTypeScriptImports();
  const logger = createLogger({ level: config.logLevel, name: 'agent-server' });
  const server = await startAgentServer(config, logger);
  closeOnSignals(logger, () => server.close());
}
