// The agent server's domain operations, one service per aggregate over the storage port: routes, custom auth, the
// thread protocol and the cron scheduler reach the database only through them. They throw typed errors and know
// nothing about HTTP.
import { createAssistantService } from './assistants.ts';
import type { ServiceDeps } from './context.ts';
import { createCronService } from './crons.ts';
import { createRunService } from './runs.ts';
import { createStateService } from './state.ts';
import { createStateWrites } from './state-writes.ts';
import { createItemService } from './store.ts';
import { createThreadService } from './threads.ts';

export type AgentService = ReturnType<typeof createAgentService>;

export function createAgentService(deps: ServiceDeps) {
  const { storage, engine } = deps;
  const assistants = createAssistantService(deps);
  const threads = createThreadService(deps);
  const state = createStateService({ ...deps, assistants, threads });
  const runs = createRunService({ ...deps, assistants, threads });
  return {
    /** The storage adapter's name (GET /info). */
    kind: storage.kind,
    /** One round trip to the database (GET /ok?check_db=1). */
    ping: () => storage.ping(),
    assistants,
    threads,
    state: { ...state, ...createStateWrites({ engine, state }) },
    runs,
    crons: createCronService({ ...deps, assistants, threads, runs }),
    store: createItemService(deps),
    /** The run and thread event log the stream routes and the thread protocol follow. */
    streams: storage.streams,
  };
}
