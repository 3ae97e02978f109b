// Events the controllers record on the objects they reconcile (phase changes, traffic moves, failures), so that
// `kubectl describe` tells the story. A port: the Kubernetes adapter writes events.k8s.io/v1 Events; on one machine
// nothing records them (the logs say the same).
export type EventSubject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; uid?: string };
};

export type EventInput = {
  type: 'Normal' | 'Warning';
  /** UpperCamelCase, machine-readable (e.g. BuildFailed). */
  reason: string;
  /** What the operator did or saw (events.k8s.io's `action`), e.g. Build, Deploy, Route. */
  action: string;
  /** Human-readable; cut to the API's 1 kB. */
  note: string;
};

export type EventRecorder = {
  /** Never throws and never waits: an Event that cannot be written is logged and dropped. */
  record(subject: EventSubject, event: EventInput): void;
};

export const noEvents: EventRecorder = { record: () => {} };
