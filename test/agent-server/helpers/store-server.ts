// An agent server process on a fresh store of either kind, for the suites that run the same tests on both: an empty
// data dir (embedded) or a new database (Postgres), removed again by close().
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase } from './pg.ts';
import { startServerProcess, type ServerProc } from './process.ts';

export type StoreKind = 'embedded' | 'postgres';

export interface StoreServer {
  server: ServerProc;
  /** The database's URL on Postgres. */
  databaseUrl?: string;
  /** Stops the server (SIGTERM), then removes its store. */
  close(): Promise<void>;
}

/** `agentplane agent-server <args>` on a fresh store of `kind`. */
export async function startServerOnStore(
  kind: StoreKind,
  args: string[],
  env: Record<string, string> = {},
): Promise<StoreServer> {
  let storeArgs: string[];
  let cleanup: () => Promise<void>;
  let databaseUrl: string | undefined;
  if (kind === 'postgres') {
    const db = await createTestDatabase();
    databaseUrl = db.url;
    storeArgs = ['--database-url', db.url];
    cleanup = db.drop;
  } else {
    const dir = mkdtempSync(join(tmpdir(), 'ap-as-store-'));
    storeArgs = ['--data-dir', dir];
    cleanup = async () => rmSync(dir, { recursive: true, force: true });
  }
  let server: ServerProc;
  try {
    server = await startServerProcess([...args, ...storeArgs], env);
  } catch (err) {
    await cleanup();
    throw err;
  }
  return {
    server,
    ...(databaseUrl ? { databaseUrl } : {}),
    async close() {
      await server.stop();
      await cleanup();
    },
  };
}

/** Polls `cond` every 100 ms until it holds; throws naming `what` after `timeoutMs`. */
export async function until(what: string, cond: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
