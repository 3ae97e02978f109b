// Domain errors. Storage and services throw these; each HTTP app maps them to status codes in one place.

export type ValidationIssue = { loc: (string | number)[]; msg: string; type: string };

export class AppError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly detail: string | ValidationIssue[] = message,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** 400: well-formed request that asks for something not allowed (e.g. changing an immutable field). */
export class BadRequestError extends AppError {
  constructor(message: string) {
    super(message, 400);
  }
}

export class UnauthorizedError extends AppError {
  constructor(message = 'Missing or invalid API key.') {
    super(message, 401);
  }
}

export class ForbiddenError extends AppError {
  constructor(message = 'Forbidden.') {
    super(message, 403);
  }
}

export class NotFoundError extends AppError {
  constructor(message: string) {
    super(message, 404);
  }
}

export class ConflictError extends AppError {
  constructor(message: string) {
    super(message, 409);
  }
}

/**
 * A run create that named an assistant version (NewRun.assistant_token) which is no longer the assistant's row
 * (patched, set to another version, deleted): the caller reads the assistant again and builds the run anew.
 */
export class StaleAssistantError extends AppError {
  constructor(assistantId: string) {
    super(`Assistant ${assistantId} changed while the run was being created`, 409);
  }
}

/** 422: the body, path or query does not match the schema; `issues` name the offending fields. */
export class ValidationError extends AppError {
  constructor(message: string, issues?: ValidationIssue[]) {
    super(message, 422, issues ?? message);
  }
}

/**
 * 429: a workspace reached one of its quotas. The message names the quota, its limit and the flag that sets it;
 * `retryAfterSeconds` (rate quotas) becomes the Retry-After header.
 */
export class QuotaExceededError extends AppError {
  constructor(
    message: string,
    readonly quota: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message, 429);
  }
}

export function isAppError(err: unknown): err is AppError {
  return err instanceof AppError;
}

/** One line: the error's message and those of its causes ("fetch failed: connect ECONNREFUSED ..."). */
export function describeError(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err, depth = 0; e && depth < 4; depth++) {
    const apiBody = (e as { body?: unknown }).body;
    let msg = e instanceof Error ? e.message : String(e);
    // client-node's ApiException carries the Status in `body`; its message repeats headers and the whole body.
    if (typeof (e as { code?: unknown }).code === 'number' && 'headers' in (e as object)) {
      const status = typeof apiBody === 'string' ? safeJson(apiBody) : (apiBody as { message?: string } | undefined);
      const text = status?.message ?? /^Message: (.*)$/m.exec(msg)?.[1];
      msg = `HTTP ${(e as { code: number }).code}${text ? ` ${text}` : ''}`;
    }
    msg = msg.split('\n')[0]!.trim();
    if (msg && !parts.some((p) => p.includes(msg))) parts.push(msg);
    e = (e as { cause?: unknown }).cause;
  }
  return parts.join(': ') || 'unknown error';
}

function safeJson(s: string): { message?: string } | undefined {
  try {
    return JSON.parse(s) as { message?: string };
  } catch {
    return { message: s.slice(0, 200) };
  }
}
