// One binary, one subcommand per process kind. Each entry loads its module lazily so `agentplane api-key`
// does not pay for LangGraph and `agentplane agent-server` does not load the Kubernetes client.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { UsageError } from './lib/cli-args.ts';
import { closest } from './lib/near-names.ts';
import { PACKAGE_ROOT } from './lib/package-root.ts';

type Command = {
  summary: string;
  load: () => Promise<{ run: (argv: string[]) => Promise<void> }>;
};

const commands: Record<string, Command> = {
  dev: {
    summary: 'Control plane + operator + local runtime in one process (npm start)',
    load: () => import('./dev/command.ts'),
  },
  'agent-server': {
    summary: 'Serve a langgraph.json over the thread/run API',
    load: () => import('./agent-server/command.ts'),
  },
  'control-plane': {
    summary: 'Serve the control plane API (deployments, revisions) on the embedded or kubernetes store',
    load: () => import('./control-plane/command.ts'),
  },
  'api-key': {
    summary: 'Create control plane API keys (api-key create --tenant ID)',
    load: () => import('./control-plane/api-key-command.ts'),
  },
  'secret-key': {
    summary: 'Rotate the key of secret values in the embedded store (secret-key rotate; platform stopped)',
    load: () => import('./control-plane/secret-key-command.ts'),
  },
  'data-key': {
    summary: "Rotate deployments' data keys in the embedded store (data-key rotate; agents reseal at their next start)",
    load: () => import('./local/data-key-command.ts'),
  },
  backup: {
    summary: 'Copy a data folder consistently while the platform runs (backup --to DIR)',
    load: () => import('./dev/backup-command.ts').then((m) => ({ run: m.runBackup })),
  },
  restore: {
    summary: 'Restore a backup into a new data folder, the platform stopped (restore --from DIR)',
    load: () => import('./dev/backup-command.ts').then((m) => ({ run: m.runRestore })),
  },
  deploy: {
    summary: 'Create or update a deployment over the REST API; --wait follows it to DEPLOYED (for people and CI)',
    load: () => import('./client/deploy-command.ts'),
  },
  deployments: {
    summary: 'List, show or delete deployments over the REST API',
    load: () => import('./client/deployments-command.ts'),
  },
  revisions: {
    summary: "List a deployment's revisions, print their build/deploy logs, redeploy one",
    load: () => import('./client/revisions-command.ts'),
  },
  logs: {
    summary: "Print the serving agent's log lines; --follow keeps printing them as they come",
    load: () => import('./client/logs-command.ts'),
  },
  listener: {
    summary: 'A data plane that dials out to a control plane and runs the deployments assigned to one listener',
    load: () => import('./listener/command.ts'),
  },
  operator: {
    summary: 'Reconcile AgentDeployments in a Kubernetes cluster (builds, rollouts, leader election)',
    load: () => import('./operator/command.ts'),
  },
  activator: {
    summary: 'Hold requests for sleeping deployments in a cluster, wake them and forward once a pod is ready',
    load: () => import('./operator/activator/command.ts'),
  },
  uninstall: {
    summary: "Delete a namespace's AgentDeployments and wait for the operator to finalize them (Helm pre-delete hook)",
    load: () => import('./operator/uninstall.ts'),
  },
};

function usage(): string {
  const width = Math.max(...Object.keys(commands).map((n) => n.length), 8) + 2;
  const rows = Object.entries(commands).map(([n, c]) => `  ${n.padEnd(width)}${c.summary}`);
  return [
    'agentplane: deploy and serve LangGraph agents',
    '',
    'Usage: agentplane <command> [options]   (agentplane <command> --help for its options)',
    '       agentplane --version',
    '',
    'Commands:',
    ...rows,
    '',
  ].join('\n');
}

export async function main(argv: string[]): Promise<void> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(usage());
    return;
  }
  if (name === '--version' || name === '-V' || name === 'version') {
    const pkg = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string };
    process.stdout.write(`agentplane ${pkg.version} (node ${process.versions.node})\n`);
    return;
  }
  const command = commands[name];
  if (!command) {
    const meant = closest(name, Object.keys(commands));
    const hint = meant ? ` (did you mean "${meant}"?)` : '';
    process.stderr.write(`agentplane: unknown command "${name}"${hint}\n\n${usage()}`);
    process.exitCode = 2;
    return;
  }
  try {
    const mod = await command.load();
    await mod.run(rest);
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`agentplane ${name}: ${err.message}\nRun "agentplane ${name} --help" for usage.\n`);
      process.exitCode = 2;
      return;
    }
    // A graph project that cannot load is the user's to fix: its one line, in its own terms, without this
    // platform's stack frames (AGENTPLANE_VERBOSE=1 shows them). By name: the class would load the graph loader.
    if ((err as Error)?.name === 'GraphConfigError') {
      const verbose = process.env.AGENTPLANE_VERBOSE === '1' && (err as Error).stack;
      process.stderr.write(`agentplane ${name}: ${verbose || (err as Error).message}\n`);
      // Now: a graph module may have started timers before it threw, which would keep the process up.
      process.exit(1);
    }
    // By name: the class lives beside better-sqlite3, which commands that never lock a folder should not load.
    if ((err as Error)?.name === 'DataDirInUseError') {
      process.stderr.write(`agentplane ${name}: ${(err as Error).message}\n`);
      process.exitCode = 1;
      return;
    }
    const listen = listenFailure(err);
    if (listen) {
      process.stderr.write(`agentplane ${name}: ${listen}\n`);
      process.exitCode = 1;
      return;
    }
    throw err;
  }
}

/** One line for a server that could not listen: which address, why, and the flag that changes it. */
function listenFailure(err: unknown): string | undefined {
  const e = err as { code?: string; syscall?: string; address?: string; port?: number };
  if (e?.syscall !== 'listen') return undefined;
  const where = `${e.address ?? ''}:${e.port ?? ''}`;
  if (e.code === 'EADDRINUSE') {
    return `${where} is already in use (another agentplane?): stop that process, or pass --port <port> (0 picks a free one) with its own --data-dir: two platforms on one data folder are refused`;
  }
  if (e.code === 'EACCES') return `may not listen on ${where} (ports below 1024 need privileges): pass --port <port>`;
  if (e.code === 'EADDRNOTAVAIL')
    return `${e.address ?? 'that address'} is not an address of this machine: pass --host`;
  return undefined;
}
