// An agent server's life after its spawn (servers.ts): when it is healthy (the first /ok answer, looked for as soon
// as it prints anything, and every second otherwise), how it stops (once; draining forwarded requests first when
// asked), and what its status and last words say when it does not serve.
import { fail, notify, revKey, track, type LocalContext, type Server } from './context.ts';
import type { LogWriter } from './logs.ts';
import { restartStatus } from './start-failures.ts';
import type { ServerStatus } from '../types.ts';

/**
 * One line explaining why a server failed, from its last output lines (pino JSON or plain text). Whole: the API, the
 * CLI and the console show all of it (only table columns cut); the bound only keeps a status object small.
 */
const MAX_REASON = 4000;
export function summarizeFailure(lines: string[]): string {
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i]!.trim();
    if (!line) continue;
    try {
      const rec = JSON.parse(line) as { level?: string | number; msg?: string; err?: { message?: string } };
      if (rec.level === 'error' || rec.level === 'fatal' || (typeof rec.level === 'number' && rec.level >= 50)) {
        return [rec.msg, rec.err?.message].filter(Boolean).join(': ').slice(0, MAX_REASON);
      }
      continue;
    } catch {
      // plain text
    }
    // The agent server's own one-line refusal (a graph project that cannot load), as the user should read it.
    if (line.startsWith('agentplane agent-server: ')) return line.slice(25, 25 + MAX_REASON);
    if (/error/i.test(line) && !line.startsWith('at ')) return line.slice(0, MAX_REASON);
  }
  return '';
}

/** A server's status; while it comes back from a failure, the failure says why it is not serving. */
export function statusOf(ctx: LocalContext, server: Server): ServerStatus {
  if (server.phase === 'Ready') return { phase: 'Ready' };
  const pending = ctx.restarts.pending(revKey(server.ref));
  return pending ? restartStatus(pending) : { phase: 'Starting' };
}

/**
 * Resolves true once the server answers /ok. Its listening socket exists before it starts (it inherits it), so one
 * request waits in the socket's queue and is answered the moment the server takes connections: no polling, no
 * round trip lost between its start and the first request it may take. Asked again only when that request fails
 * (the server ended, or answered something else than 200).
 */
export async function waitHealthy(ctx: LocalContext, server: Server, log: LogWriter): Promise<boolean> {
  const timeoutMs = ctx.opts.healthTimeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;
  const gone = new AbortController();
  void server.exited.then(() => gone.abort());
  while (!gone.signal.aborted && !server.stopping) {
    const left = deadline - Date.now();
    if (left > 0) {
      const ok = await fetch(`http://127.0.0.1:${server.port}/ok`, {
        signal: AbortSignal.any([gone.signal, AbortSignal.timeout(left)]),
      }).then(
        (res) => res.ok,
        () => false,
      );
      if (ok) {
        log.line('agent server is healthy (/ok)');
        await log.flush();
        ctx.restarts.healthy(revKey(server.ref));
        server.phase = 'Ready';
        server.readyAt = Date.now();
        notify(ctx, server.ref);
        return true;
      }
      if (gone.signal.aborted || server.stopping) break;
    }
    if (Date.now() >= deadline) {
      const message = `agent server did not answer /ok within ${Math.round(timeoutMs / 1000)} s`;
      const key = revKey(server.ref);
      // One that served before is started again (with backoff); a new revision fails its deploy.
      const again = server.spec.proven || ctx.restarts.restarting(key);
      if (again) ctx.restarts.failed(key, server.ref, message, false);
      else fail(ctx, server.ref, message);
      log.line(`${message}; stopping it${again ? ' and starting it again later' : ''}`);
      await stopServer(ctx, server);
      notify(ctx, server.ref);
      return false;
    }
    await new Promise((r) => setTimeout(r, 150));
  }
  return false;
}

/** Stops a server once (later callers wait for the same stop); `drain` lets forwarded requests finish first. */
export function stopServer(ctx: LocalContext, server: Server, drain = false): Promise<void> {
  if (server.stopped) return server.stopped;
  server.stopping = true;
  server.stopped = (drain ? drainRequests(ctx, server) : Promise.resolve()).then(async () => {
    if (server.child.exitCode === null && server.child.signalCode === null) {
      server.signal('SIGTERM');
      const timer = setTimeout(() => server.signal('SIGKILL'), ctx.opts.stopGraceMs ?? 5000);
      await server.exited;
      clearTimeout(timer);
    }
    if (ctx.servers.get(revKey(server.ref)) === server) ctx.servers.delete(revKey(server.ref));
  });
  return track(ctx, server.stopped);
}

/** Waits (bounded) until requests forwarded to a replaced server have finished. */
async function drainRequests(ctx: LocalContext, server: Server): Promise<void> {
  const until = Date.now() + (ctx.opts.stopGraceMs ?? 5000);
  while (server.inflight > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
}
