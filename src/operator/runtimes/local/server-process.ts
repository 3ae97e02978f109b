// Starts a long-running process (an agent server), confined when there is a sandbox, and signals it. Inside
// bubblewrap the process is PID 1 of its own namespace and bwrap does not forward signals, so its pid is read
// from bwrap's --info-fd and signals go to it directly. The launch chain in front of it (sh for the limits,
// setpriv, bwrap) runs by absolute path with the runtime's own environment; the deployment's variables reach only
// the confined process, through bwrap's --args descriptor.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import { withParentDeath } from './exec.ts';
import { bwrapEnvArgs, type Mounts, type Sandbox } from './sandbox.ts';

export type ServerProcess = {
  /** The process we spawned (bwrap when confined): its exit is the server's exit. */
  child: ChildProcess;
  /** Sends `sig` to the server itself; SIGKILL also ends the wrapper. */
  signal(sig: NodeJS.Signals): void;
  /** The server's pid when it runs in the sandbox, once bwrap has said it (its /proc/<pid>/root is the sandbox's). */
  confinedPid(): number | undefined;
};

/** The descriptor number a server gets its listening socket on (spawnServer's `listenFd`). */
export const LISTEN_FD = 4;
/** The descriptor bwrap reads the server's environment from (closed by bwrap once read). */
const ENV_FD = 5;
/** The descriptor the server reads its secret settings from (--secrets-fd; closed by the server once read). */
export const SECRETS_FD = 6;

/** Spawns `command args`; throws what spawn() throws synchronously (e.g. an invalid environment). */
export function spawnServer(
  sandbox: Sandbox,
  command: string,
  args: string[],
  opts: {
    cwd: string;
    /** The launch chain's environment: the runtime's own, nothing a workspace set. */
    env: Record<string, string>;
    /**
     * The server's environment (with the deployment's secrets). Without a sandbox the whole chain gets it: then
     * the chain's programs, started by absolute path, are all that stands between it and the workspace's code,
     * which runs unconfined as this process's user anyway.
     */
    serverEnv: Record<string, string>;
    /** Settings only the server reads (JSON on SECRETS_FD), in no process's environment. */
    secrets?: Record<string, string>;
    mounts: Omit<Mounts, 'cwd'>;
    /** Puts the whole command line inside resource limits (limits.ts); the pid stays the one spawned. */
    limit?: (command: string, args: string[]) => { command: string; args: string[] };
    /** A descriptor of this process the server inherits as its fd LISTEN_FD (its listening socket). */
    listenFd?: number;
    /** The size of the sandbox's /tmp in MB (the memory limit: it is memory). */
    tmpSizeMb?: number;
  },
): ServerProcess {
  const confined = sandbox.kind !== 'none';
  const inner = sandbox.wrap(
    command,
    args,
    { ...opts.mounts, cwd: opts.cwd },
    confined ? { infoFd: 3, asPid1: true, argsFd: ENV_FD, tmpSizeMb: opts.tmpSizeMb, user: sandbox.user } : undefined,
  );
  const guarded = withParentDeath(inner.command, inner.args);
  const wrapped = opts.limit ? opts.limit(guarded.command, guarded.args) : guarded;
  // stdin stays a pipe: parent-watch.mjs ends the server when this process goes away (and the kernel ends bwrap).
  // fd 3: bwrap's --info-fd when confined; fd 4: the listening socket, through the wrappers (sh, setpriv, bwrap keep
  // inherited descriptors); fd 5: the server's environment for bwrap; fd 6: its secret settings, read by the server.
  const child = spawn(wrapped.command, wrapped.args, {
    cwd: opts.cwd,
    env: confined ? opts.env : opts.serverEnv,
    stdio: [
      'pipe',
      'pipe',
      'pipe',
      confined ? 'pipe' : 'ignore',
      opts.listenFd ?? 'ignore',
      confined ? 'pipe' : 'ignore',
      opts.secrets ? 'pipe' : 'ignore',
    ],
  });
  if (opts.secrets) {
    const secretsPipe = (child.stdio as unknown as (Writable | null)[])[SECRETS_FD];
    secretsPipe?.on('error', () => undefined); // the server is gone: its exit says why
    secretsPipe?.end(JSON.stringify(opts.secrets));
  }
  if (confined) {
    const envPipe = (child.stdio as unknown as (Writable | null)[])[ENV_FD];
    // bwrap may be gone before it read everything (it failed): its exit says why, not a write error.
    envPipe?.on('error', () => undefined);
    envPipe?.end(bwrapEnvArgs(opts.serverEnv));
  }
  let innerPid: number | undefined;
  const info = confined ? readInfoPid(child.stdio[3] as Readable | null).then((pid) => (innerPid = pid)) : undefined;
  const signal = (sig: NodeJS.Signals): void => {
    // Killing bwrap while it sets the sandbox up would strand its half-made child: wait (briefly) for the pid.
    if (info && innerPid === undefined && sig !== 'SIGKILL' && child.exitCode === null) {
      void Promise.race([info, new Promise((r) => setTimeout(r, 2000))]).then(() =>
        signal(innerPid === undefined ? 'SIGKILL' : sig),
      );
      return;
    }
    if (innerPid) {
      try {
        process.kill(innerPid, sig);
        if (sig !== 'SIGKILL') return;
      } catch {
        // gone already: fall back to the wrapper
      }
    }
    child.kill(sig);
  };
  return { child, signal, confinedPid: () => innerPid };
}

/**
 * The confined process's pid, from bwrap's --info-fd JSON. The stream is read to its end: bwrap writes the JSON in
 * several writes and dies (before starting the process) if the reader has gone away.
 */
function readInfoPid(stream: Readable | null): Promise<number | undefined> {
  if (!stream) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    let text = '';
    stream.on('data', (chunk: Buffer) => {
      if (text.length < 4096) text += chunk.toString();
      const m = /"child-pid"\s*:\s*(\d+)/.exec(text);
      if (m) resolve(Number(m[1]));
    });
    stream.once('close', () => resolve(undefined));
    stream.once('error', () => resolve(undefined));
  });
}

/**
 * A listening socket on a free loopback port, held from the moment the port is chosen until the server inherits it
 * (spawnServer's listenFd). A port picked and closed again would be free for seconds while the server loads: any
 * process (another deployment's graph code among them) could bind it, answer /ok, and be sent this deployment's
 * requests with their keys.
 */
export async function holdPort(): Promise<{ port: number; fd: number; release: () => void }> {
  const srv = createServer();
  await new Promise<void>((res, rej) => {
    srv.once('error', rej);
    srv.listen(0, '127.0.0.1', () => res());
  });
  const { port } = srv.address() as { port: number };
  // Node has no public accessor for a listening socket's descriptor; its handle has one on every Unix.
  const fd = (srv as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) {
    srv.close();
    throw new Error('the listening socket has no file descriptor to hand to the agent server');
  }
  // This process's copy: closed once the server has its own (the port stays bound while either holds it).
  return { port, fd, release: () => srv.close() };
}
