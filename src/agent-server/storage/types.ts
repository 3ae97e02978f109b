// The storage port: everything durable the agent server keeps (assistants, threads, runs, the long-term memory
// store's items and, through `checkpointer`, graph checkpoints). Two adapters implement it (postgres/,
// embedded/); routes and the run engine only see this interface. Storage throws the typed errors of
// src/lib/errors.ts, never HTTP replies. The run-lifecycle rules both adapters follow are in run-rules.ts.
// The ports, one file per aggregate, are in ports/; this file joins them as Storage and re-exports them, so the
// rest of the agent server imports every storage type from here.
import type { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';
import type { AssistantStore } from './ports/assistants.ts';
import type { CronStore } from './ports/crons.ts';
import type { ItemsConfig, ItemStore } from './ports/items.ts';
import type { CancelAction, RunStore } from './ports/runs.ts';
import type { StreamEventStore } from './ports/stream-events.ts';
import type { ThreadStore } from './ports/threads.ts';

export type * from './ports/common.ts';
export type * from './ports/assistants.ts';
export type * from './ports/threads.ts';
export * from './ports/runs.ts';
export type * from './ports/items.ts';
export type * from './ports/crons.ts';
export * from './ports/stream-events.ts';

export type StorageEvent =
  { type: 'wake' } | { type: 'run_done'; run_id: string } | { type: 'cancel'; run_id: string; action: CancelAction };

/** How another thread opens its own connection to this store's checkpoints (see openCheckpointer). */
export type CheckpointerSource =
  /** writeLock: the buffer of the WriteLock the owning process's threads share for the file (write-lock.ts). */
  (
    | { kind: 'embedded'; file: string; items?: ItemsConfig; writeLock?: SharedArrayBuffer }
    | { kind: 'postgres'; databaseUrl: string; schema: string; items?: ItemsConfig; semantic?: boolean }
  ) & {
    /** The data keys (DataKeyring.material(), current first) when agent data is encrypted at rest. */
    dataKeys?: Uint8Array[];
  };

export interface Storage {
  readonly kind: 'postgres' | 'embedded';
  readonly checkpointer: BaseCheckpointSaver;
  readonly checkpointerSource: CheckpointerSource;
  readonly assistants: AssistantStore;
  readonly threads: ThreadStore;
  readonly runs: RunStore;
  readonly items: ItemStore;
  readonly crons: CronStore;
  readonly streams: StreamEventStore;
  /** Wake-ups across every process that shares this store. Returns an unsubscribe function. */
  subscribe(listener: (e: StorageEvent) => void): () => void;
  /**
   * With data keys: seals every stored value that is not sealed under the current key (data from before a rotation
   * or from before encryption) under it, in the background of a running store; counts what it did.
   */
  reseal?(signal?: AbortSignal): Promise<{ resealed: number; failed: number }>;
  /** One round trip to the database (GET /ok?check_db=1); rejects when it does not answer. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The configurable key under which a checkpoint read names the tuples a saver read ahead for it (the Postgres
 * saver's readAhead: GET state's latest checkpoint and its parent in one statement).
 */
export const READ_AHEAD_KEY = '__agentplane_read_ahead';

/**
 * The configurable key of a run's first execution whose thread had no root checkpoint when the run was created and
 * claimed (RunRecord.no_checkpoint); its value is a token for that execution. A saver that knows it answers that
 * execution's first read of the latest root checkpoint with none, without reading.
 */
export const NO_CHECKPOINT_KEY = '__agentplane_no_checkpoint';
