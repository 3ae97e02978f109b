// Starts `agentplane listener` as a real child process (its own data dir) and reads what it prints.
import { spawn, type ChildProcess } from 'node:child_process';
import { tmpdir } from 'node:os';
import { resolve } from 'node:path';

const BIN = resolve(import.meta.dirname, '../../bin/agentplane.mjs');

export type ListenerProcess = { child: ChildProcess; url?: string; output: () => string };

export async function startListener(opts: {
  controlPlaneUrl: string;
  apiKey: string;
  tenant: string;
  listenerId: string;
  dataDir?: string;
  port?: number;
  runtime?: 'local' | 'kubernetes';
  extraArgs?: string[];
  env?: Record<string, string>;
  /** Wait for the "is running" banner (default true). */
  waitRunning?: boolean;
}): Promise<ListenerProcess> {
  const args = [
    BIN,
    'listener',
    '--control-plane-url',
    opts.controlPlaneUrl,
    '--tenant',
    opts.tenant,
    '--listener-id',
    opts.listenerId,
    '--runtime',
    opts.runtime ?? 'local',
    '--poll-timeout',
    '5',
    ...(opts.dataDir ? ['--data-dir', opts.dataDir] : []),
    '--port',
    String(opts.port ?? 0),
    '--allow-local-repos',
    tmpdir(),
    ...(opts.extraArgs ?? []),
  ];
  const child = spawn(process.execPath, args, {
    // The key goes through the environment (as the chart does), not argv.
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? tmpdir(),
      AGENTPLANE_LISTENER_API_KEY: opts.apiKey,
      LOG_LEVEL: 'info',
      ...opts.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const proc: ListenerProcess = { child, output: () => out };
  if (opts.waitRunning === false) return proc;
  await new Promise<void>((res, rej) => {
    const check = () => {
      if (/agentplane listener \S+ is running/.test(out)) {
        proc.url = /deployment URLs\s+(http:\/\/[^\s/]+)/.exec(out)?.[1];
        res();
      }
    };
    child.stdout!.on('data', check);
    child.once('exit', (code) => rej(new Error(`listener exited (${code}) before running:\n${out}`)));
  });
  return proc;
}

export async function stopListener(p: ListenerProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return;
  const exited = new Promise<void>((r) => p.child.once('exit', () => r()));
  p.child.kill(signal);
  await exited;
}
