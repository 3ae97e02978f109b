/** A data plane registered with the control plane (Listeners v2); it dials out and runs the deployments named for it. */
export type ListenerRecord = {
  id: string;
  tenant: string;
  computeType: 'k8s' | 'local';
  /** Unique within the tenant; immutable. */
  computeId: string;
  computeConfig: { k8sNamespaces: string[] };
  version: string | null;
  /** Where the listener's deployments are served: the URLs it reports must lie under it (declared by the workspace). */
  baseUrl?: string;
  createdAt: string;
  updatedAt: string;
  /** When the listener last called the control plane (watch or report). */
  lastSeenAt?: string;
  /** The agentplane version the listener process reported. */
  agentVersion?: string;
};

/** Listener records, one per (tenant, computeId). */
export interface ListenerStore {
  /** Stores a new listener; (tenant, computeId) taken -> AlreadyExistsError. */
  createListener(record: ListenerRecord): Promise<void>;
  /** undefined when missing or owned by another tenant. */
  getListener(tenant: string, id: string): Promise<ListenerRecord | undefined>;
  /** The tenant's listeners, oldest first. */
  listListeners(tenant: string): Promise<ListenerRecord[]>;
  /** Replaces the mutable fields (version, computeConfig, updatedAt, lastSeenAt, agentVersion) of an existing one. */
  updateListener(record: ListenerRecord): Promise<void>;
  /** false when missing or owned by another tenant. */
  deleteListener(tenant: string, id: string): Promise<boolean>;
}
