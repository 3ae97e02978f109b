// What the cluster backend's aggregates share: the API clients and namespace, and the mapping of API server errors
// onto the state's errors.
import { ApiException, type CoreV1Api, type CustomObjectsApi } from '@kubernetes/client-node';
import { NotFoundError, ValidationError, type ValidationIssue } from '../../lib/errors.ts';
import type { Logger } from '../../lib/logger.ts';
import { AlreadyExistsError, ResourceExpiredError, StaleResourceVersionError } from '../errors.ts';

export type KubeContext = {
  /** The configured namespace: deployments of the API and the platform's own objects go there. */
  readonly namespace: string;
  readonly core: CoreV1Api;
  readonly custom: CustomObjectsApi;
  readonly log: Logger;
};

export type Status = {
  reason?: string;
  message?: string;
  code?: number;
  details?: { causes?: { field?: string; message?: string; reason?: string }[] };
};

function statusOf(err: ApiException<unknown>): Status {
  const body = err.body;
  if (typeof body === 'string') {
    try {
      return JSON.parse(body) as Status;
    } catch {
      return { message: body };
    }
  }
  return (body as Status) ?? {};
}

/** Maps API server errors onto the store's error types. */
function mapError(err: unknown): unknown {
  if (!(err instanceof ApiException)) return err;
  const s = statusOf(err);
  const message = s.message ?? `Kubernetes API error ${err.code}`;
  switch (err.code) {
    case 404:
      return new NotFoundError(message);
    case 409:
      return s.reason === 'AlreadyExists' ? new AlreadyExistsError(message) : new StaleResourceVersionError(message);
    case 410:
      return new ResourceExpiredError(message);
    case 422: {
      const issues: ValidationIssue[] = (s.details?.causes ?? []).map((c) => ({
        loc: (c.field ?? '').split('.').filter(Boolean),
        msg: c.message ?? 'invalid',
        type: c.reason ?? 'FieldValueInvalid',
      }));
      return new ValidationError(message, issues);
    }
    default:
      return err;
  }
}

export async function call<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw mapError(err);
  }
}

export const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
export const unb64 = (s: string) => Buffer.from(s, 'base64').toString('utf8');
