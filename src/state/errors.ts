// What the state's operations throw besides the errors of lib/errors.ts; the HTTP status is the Kubernetes one.
import { AppError, ConflictError } from '../lib/errors.ts';

/** 409 AlreadyExists: the name is taken. "Ensure" callers treat it as success. */
export class AlreadyExistsError extends ConflictError {
  readonly reason = 'AlreadyExists';
}

/** 409 Conflict: the object changed since it was read (stale metadata.resourceVersion). Re-read and retry. */
export class StaleResourceVersionError extends ConflictError {
  readonly reason = 'Conflict';
}

/** 410 Gone: the watch's resourceVersion is older than the kept history. List again. */
export class ResourceExpiredError extends AppError {
  constructor(message: string) {
    super(message, 410);
  }
}

/** A watch the server ended normally (its timeout): nothing was lost, the caller may resume from its version. */
export class WatchClosedError extends Error {}
