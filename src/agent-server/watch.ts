// `agentplane agent-server --watch`: the inner loop of `langgraph dev`. The server runs as a child process, started
// again (after the last one ended, so the embedded store's one-owner lock passes over) when a file of the project
// changes. Threads, runs and the store stay: they live in --data-dir or the database, not in the process. A graph
// that fails to load ends the child with its own message in the project's terms; the watcher stays and the next
// save starts it again. A fresh process, not a re-import: ES modules cannot be unloaded, and a graph's imports
// (its tools, prompts, clients) must be read again too.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { watch } from 'chokidar';
import type { Logger } from '../lib/logger.ts';
import type { AgentServerConfig } from './config.ts';

/** Folders that change without the user editing the project (installs, git, our own data). */
const IGNORED = new Set(['node_modules', '.git', '.agentplane', '.langgraph_api']);
/**
 * What a change of restarts the server: code, its config and environment files. Not everything: a log or a database
 * the project writes into its own folder would start it again and again.
 */
const WATCHED = /\.(?:[cm]?[jt]sx?|json|ya?ml)$|(?:^|[/\\])\.env(?:\.[^/\\]*)?$/;
/** Saves come in bursts (an editor's write + rename, a git checkout): one start per burst. */
const DEBOUNCE_MS = 250;

function inside(file: string, dir: string): boolean {
  const rel = path.relative(dir, file);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

export function serveWatching(opts: {
  /** The command's arguments; the child gets them without --watch. */
  argv: string[];
  /** The environment the server starts with (the data keys included: the child needs them). */
  env: NodeJS.ProcessEnv;
  config: AgentServerConfig;
  logger: Logger;
}): { close(): Promise<void> } {
  const { config, logger } = opts;
  const projectDir = path.dirname(config.configPath);
  const args = opts.argv.filter((a) => a !== '--watch');
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let closed = false;
  const stopping = new WeakSet<ChildProcess>();

  function start() {
    // The same entry point and Node flags as this process (the CLI bundle or the sources through tsx).
    const c = spawn(process.execPath, [...process.execArgv, process.argv[1]!, 'agent-server', ...args], {
      stdio: 'inherit',
      env: opts.env,
    });
    child = c;
    exited = new Promise((resolve) => {
      c.once('error', (err) => logger.error({ err }, 'the agent server could not start'));
      c.once('exit', (code, signal) => {
        if (child === c) child = undefined;
        if (!stopping.has(c) && !closed) {
          logger.warn({ code, signal }, 'the agent server ended; it starts again on the next change of the project');
        }
        resolve();
      });
    });
  }

  async function stop() {
    const c = child;
    if (!c) return exited;
    stopping.add(c);
    // SIGTERM: runs in progress get the server's shutdown grace and go back to the queue, as on any restart.
    c.kill('SIGTERM');
    return exited;
  }

  let chain: Promise<void> = Promise.resolve();
  let timer: NodeJS.Timeout | undefined;
  let changed: string[] = [];
  const watcher = watch(projectDir, {
    ignoreInitial: true,
    ignored: (file) =>
      inside(file, config.dataDir) ||
      path
        .relative(projectDir, file)
        .split(path.sep)
        .some((part) => IGNORED.has(part)),
  });
  watcher.on('all', (_event, file) => {
    if (!WATCHED.test(file)) return;
    changed.push(path.relative(projectDir, file));
    clearTimeout(timer);
    timer = setTimeout(() => {
      const files = [...new Set(changed)];
      changed = [];
      chain = chain.then(async () => {
        if (closed) return;
        const more = files.length > 1 ? ` (and ${files.length - 1} more)` : '';
        logger.info({ files }, `${files[0]} changed${more}: starting the agent server again`);
        await stop();
        if (!closed) start();
      });
    }, DEBOUNCE_MS);
  });
  watcher.on('ready', () => logger.info({ dir: projectDir }, `watching ${projectDir} for changes`));
  watcher.on('error', (err) => logger.warn({ err }, 'watching the project failed'));
  start();

  return {
    async close() {
      closed = true;
      clearTimeout(timer);
      await watcher.close();
      await chain;
      await stop();
    },
  };
}
