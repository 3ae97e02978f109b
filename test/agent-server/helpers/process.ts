// Starts `agentplane agent-server` as a real child process (port 0) and reads its URL from the startup log.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

export interface ServerProc {
  url: string;
  proc: ChildProcess;
  output(): string;
  /** Graceful stop (SIGTERM), resolves on exit. */
  stop(): Promise<void>;
  /** SIGKILL, resolves on exit. */
  kill9(): Promise<void>;
}

/** A test about how runs execute asks for a thread with these, whatever the machine. */
export const EXECUTOR_THREAD = ['--executor-threads', '1'];

/**
 * Where the server runs graphs, named by every test rather than left to the machine (a server picks a thread on 2+
 * CPUs, none on 1): on its main thread unless the test says `--executor-threads` (or AGENTPLANE_EXECUTOR_THREADS).
 * An executor thread costs each server about a second of CPU when its first run starts; the tests about how runs
 * execute, stream and survive ask for one.
 */
function executorArgs(args: string[], env: Record<string, string>): string[] {
  return args.includes('--executor-threads') || env.AGENTPLANE_EXECUTOR_THREADS !== undefined
    ? []
    : ['--executor-threads', '0'];
}

export async function startServerProcess(
  args: string[],
  env: Record<string, string> = {},
  /** Sees the output as it comes, before the server listens. */
  onOutput?: (chunk: string) => void,
): Promise<ServerProc> {
  const proc = spawn(
    process.execPath,
    [path.join(ROOT, 'bin/agentplane.mjs'), 'agent-server', '--port', '0', ...executorArgs(args, env), ...args],
    {
      cwd: ROOT,
      env: { ...process.env, LOG_LEVEL: 'info', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`server did not start:\n${out}`));
    }, 60_000);
    const onData = (d: Buffer) => {
      out += d.toString();
      onOutput?.(d.toString());
      const m = /"url":"(http:\/\/[^"]+)".*"msg":"agent server listening"/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    };
    proc.stdout!.on('data', onData);
    proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${out}`));
    });
  });
  return {
    url,
    proc,
    output: () => out,
    async stop() {
      if (proc.exitCode === null) proc.kill('SIGTERM');
      await exited;
    },
    async kill9() {
      if (proc.exitCode === null) proc.kill('SIGKILL');
      await exited;
    },
  };
}
