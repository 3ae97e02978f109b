// The assistants port: an assistant (a graph and the configuration it runs with), its versions and the queries over
// them.
import type { IfExists, Json, SortOrder } from './common.ts';

export interface Assistant {
  assistant_id: string;
  graph_id: string;
  config: Json;
  context: Json;
  metadata: Json;
  name: string;
  description: string | null;
  version: number;
  created_at: string;
  updated_at: string;
}

export interface AssistantQuery {
  graph_id?: string;
  name?: string;
  metadata?: Json;
  limit?: number;
  offset?: number;
  sort_by?: 'assistant_id' | 'graph_id' | 'name' | 'created_at' | 'updated_at';
  sort_order?: SortOrder;
}

export interface NewAssistant {
  assistant_id: string;
  graph_id: string;
  config: Json;
  context: Json;
  metadata: Json;
  name: string;
  description: string | null;
}

export interface AssistantPatch {
  graph_id?: string;
  config?: Json;
  context?: Json;
  metadata?: Json;
  name?: string;
  description?: string | null;
}

export interface AssistantStore {
  /** Creates or, with if_exists do_nothing, returns the existing one; raise → ConflictError. */
  create(a: NewAssistant, ifExists: IfExists): Promise<Assistant>;
  /** Inserts or replaces the graph's system assistant (idempotent at every start). */
  upsertSystem(a: NewAssistant): Promise<Assistant>;
  get(id: string): Promise<Assistant | null>;
  /**
   * get() with a token that changes whenever the assistant's row does (a run create can then check that the row it
   * was built from is still the current one: NewRun.assistant_token).
   */
  getVersioned(id: string): Promise<{ assistant: Assistant; token: string } | null>;
  patch(id: string, patch: AssistantPatch): Promise<Assistant>;
  delete(id: string): Promise<void>;
  search(q: AssistantQuery): Promise<Assistant[]>;
  count(q: AssistantQuery): Promise<number>;
  /**
   * Every version the assistant has had, newest first (create is version 1, each patch adds max + 1); `metadata`
   * filters by containment. NotFoundError when the assistant is unknown.
   */
  listVersions(id: string, q: { metadata?: Json; limit: number; offset: number }): Promise<AssistantVersion[]>;
  /** Makes an earlier (or later) version the assistant's current one; NotFoundError for an unknown version. */
  setLatest(id: string, version: number): Promise<Assistant>;
}

/** One version of an assistant: its fields as they were when the version was made (`created_at`: when that was). */
export type AssistantVersion = Omit<Assistant, 'updated_at'>;
