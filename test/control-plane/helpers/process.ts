// Runs the real CLI as a child process and finds its URL in the JSON log.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';

export const BIN = resolve(import.meta.dirname, '../../../bin/agentplane.mjs');
const run = promisify(execFile);

export async function cli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ stdout: string; stderr: string }> {
  return run(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, timeout: 60_000 });
}

export async function cliFails(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stderr: string }> {
  try {
    await cli(args, env);
  } catch (err) {
    const e = err as { code: number; stderr: string };
    return { code: e.code, stderr: e.stderr };
  }
  throw new Error(`expected "agentplane ${args.join(' ')}" to fail`);
}

export type ControlPlaneProcess = { url: string; child: ChildProcess; logs: () => string; stop(): Promise<void> };

export async function startControlPlaneProcess(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<ControlPlaneProcess> {
  const child = spawn(process.execPath, [BIN, 'control-plane', '--port', '0', ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const url = await new Promise<string>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`control plane did not start:\n${out}`)), 30_000);
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /"url":"(http:\/\/[^"]+)".*control plane listening/.exec(out);
      if (m) {
        clearTimeout(timer);
        res(m[1]!);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      rej(new Error(`control plane exited with ${code}:\n${out}`));
    });
  });
  return {
    url,
    child,
    logs: () => out,
    stop: () =>
      new Promise<void>((r) => {
        if (child.exitCode !== null) return r();
        child.once('exit', () => r());
        child.kill('SIGTERM');
      }),
  };
}
