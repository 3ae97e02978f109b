// Starts `agentplane dev` as a real child process and talks to it over HTTP only.
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { tmpdir } from 'node:os';
import { resolve } from 'node:path';

const BIN = resolve(import.meta.dirname, '../../bin/agentplane.mjs');
export const API_KEY = 'e2e-bootstrap-key-0123456789';
export const TENANT = 'e2e-tenant';

export { LINKED_INSTALL } from '../support/linked-install.ts';

export type DevProcess = { child: ChildProcess; url: string; port: number; output: () => string };

/**
 * The agent ports of this vitest worker's dev processes: the default range (8100-8999) split between the workers
 * (VITEST_POOL_ID, 1..3). With one range for all, a file that restarts its dev process (idle-sleep.test.ts) could find
 * the port its deployment keeps taken meanwhile by another file's dev process, and its call answered by that platform.
 */
function workerAgentPorts(): string {
  const worker = Math.max(1, Math.min(3, Number(process.env.VITEST_POOL_ID) || 1));
  const first = 8100 + (worker - 1) * 300;
  return `${first}-${first + 299}`;
}

export async function startDev(dataDir: string, port = 0, extraArgs: string[] = []): Promise<DevProcess> {
  const child = spawn(
    process.execPath,
    [
      BIN,
      'dev',
      '--port',
      String(port),
      '--data-dir',
      dataDir,
      '--log-level',
      'warn',
      // Its agent servers run graphs on their main thread (see startServerProcess) unless the test says otherwise.
      ...(extraArgs.includes('--agent-executor-threads') ? [] : ['--agent-executor-threads', '0']),
      ...(extraArgs.includes('--agent-ports') ? [] : ['--agent-ports', workerAgentPorts()]),
      ...extraArgs,
    ],
    {
      // Test repositories live under the system temp folder.
      env: {
        ...process.env,
        AGENTPLANE_BOOTSTRAP_API_KEY: API_KEY,
        AGENTPLANE_ALLOW_LOCAL_REPOS: process.env.AGENTPLANE_ALLOW_LOCAL_REPOS ?? tmpdir(),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const url = await new Promise<string>((res, rej) => {
    const check = () => {
      const m = /control plane API\s+(http:\/\/[^\s/]+)/.exec(out);
      if (m) res(m[1]!);
    };
    child.stdout!.on('data', check);
    child.once('exit', (code) => rej(new Error(`dev exited (${code}) before listening:\n${out}`)));
  });
  return { child, url, port: Number(new URL(url).port), output: () => out };
}

export async function stopDev(dev: DevProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
  if (dev.child.exitCode !== null || dev.child.signalCode !== null) return dev.child.exitCode;
  const exited = new Promise<number | null>((r) => dev.child.once('exit', (code) => r(code)));
  dev.child.kill(signal);
  return exited;
}

/** Pids of the direct children of `pid` (agent servers, builds). */
export function childPids(pid: number): number[] {
  try {
    return execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .map((s) => Number(s.trim()))
      .filter((n) => n > 0);
  } catch {
    return []; // ps exits 1 when nothing matches
  }
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export function api(base: string) {
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { 'X-Api-Key': API_KEY, 'X-Tenant-Id': TENANT, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    }).catch((err: Error) => {
      // undici says only "fetch failed"; the cause (refused, reset, closed) tells a dead server from a dropped socket.
      const cause = (err.cause as Error | undefined)?.message ?? 'no cause given';
      throw new Error(`${method} ${base}${path}: ${err.message} (${cause})`, { cause: err });
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Record<string, any>) : {} };
  };
  return {
    get: (p: string) => call('GET', p),
    post: (p: string, b?: unknown) => call('POST', p, b ?? {}),
    patch: (p: string, b: unknown) => call('PATCH', p, b),
    delete: (p: string) => call('DELETE', p),
  };
}

export async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, limitMs = 180_000): Promise<T> {
  const until = Date.now() + limitMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** "pid command" of each direct child, for assertions that show what was left behind. */
export function childProcesses(pid: number): string[] {
  try {
    return execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .map((s) => s.trim())
      .filter(Boolean);
  } catch {
    return [];
  }
}

/**
 * A new key of one workspace, made with the bootstrap key: agents refuse the bootstrap key (it acts for every
 * workspace), so tests call agents with this. Made early: agents learn of a key within a second or two.
 */
export async function workspaceKey(base: string, tenant = TENANT): Promise<string> {
  const res = await fetch(`${base}/v2/api-keys`, {
    method: 'POST',
    headers: { 'X-Api-Key': API_KEY, 'X-Tenant-Id': tenant, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'agent calls', tenants: [tenant] }),
  });
  const body = (await res.json()) as { key?: string };
  if (res.status !== 201 || !body.key) throw new Error(`creating a key: HTTP ${res.status} ${JSON.stringify(body)}`);
  return body.key;
}

export type CliResult = { code: number; stdout: string; stderr: string };

/**
 * One `agentplane` CLI command as a CI job runs it against `dev`: a child process given the platform's URL, the
 * bootstrap key and the workspace in its environment (`env` adds or, with undefined, removes variables).
 */
export function devCli(
  dev: DevProcess,
  args: string[],
  opts: { env?: Record<string, string | undefined>; cwd?: string } = {},
): Promise<CliResult> {
  return new Promise((res) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      {
        cwd: opts.cwd ?? tmpdir(),
        env: {
          ...process.env,
          AGENTPLANE_URL: dev.url,
          AGENTPLANE_API_KEY: API_KEY,
          AGENTPLANE_TENANT: TENANT,
          ...opts.env,
        },
        maxBuffer: 16 * 1024 * 1024,
      },
      (err, stdout, stderr) => res({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}
