/**
 * One error vocabulary for the whole service: `AppError(code, message)` with a closed set of codes and
 * one code -> HTTP status table. Only the HTTP error handler turns these into bodies.
 */

/**
 * What a database error means for the caller (undefined: anything else). `setup`: the service is set
 * up wrongly for this database (wrong password, unknown database, a missing privilege), which waiting
 * does not cure.
 */
export type DatabaseErrorKind = 'unavailable' | 'setup' | 'foreign_key' | 'unique' | 'not_null';

export const ERROR_STATUS = {
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  not_acceptable: 406,
  payload_too_large: 413,
  unsupported_media_type: 415,
  validation_failed: 422,
  too_many_requests: 429,
  internal: 500,
  unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** How an error body is shaped: a JSON string (most endpoints) or the queue envelope. */
export type ErrorBodyShape = 'string' | 'envelope';

export interface AppErrorOptions {
  /** Field -> message map for validation errors in the envelope shape. */
  readonly fields?: Readonly<Record<string, string>>;
  /** Extra response headers (`Allow`, `Retry-After`, `WWW-Authenticate`). */
  readonly headers?: Readonly<Record<string, string>>;
  readonly cause?: unknown;
}

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly fields: Readonly<Record<string, string>> | undefined;
  readonly headers: Readonly<Record<string, string>>;

  constructor(code: ErrorCode, message: string, options: AppErrorOptions = {}) {
    super(message, { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.fields = options.fields;
    this.headers = options.headers ?? {};
  }

  get statusCode(): number {
    return ERROR_STATUS[this.code];
  }
}

/** The JSON string bodies the contract uses for generic errors. */
export const DEFAULT_MESSAGES: Record<ErrorCode, string> = {
  bad_request: 'Bad request',
  unauthorized: '401 Unauthorized',
  forbidden: '403 Forbidden',
  not_found: 'Not Found',
  method_not_allowed: 'Method Not Allowed',
  not_acceptable: 'Not Acceptable',
  payload_too_large: 'Payload too large',
  unsupported_media_type: 'Unsupported Media Type',
  validation_failed: 'Unprocessable Entity',
  too_many_requests: 'Too Many Requests',
  internal: 'Internal server error',
  unavailable: 'Service Unavailable',
};

/** Seconds a client is asked to wait (`Retry-After`) when the database is unavailable. */
export const DATABASE_RETRY_AFTER_SECONDS = 5;

/**
 * True when `error` (or its cause, or one error of an AggregateError) says the database cannot be used
 * right now but may come back, in the words of any registered dialect (`DialectAdapter.classifyError`): a
 * connection refused, reset or terminated, a pool that could not connect in time, a server shutting down
 * or starting up, or SQLite still busy after `busy_timeout`. Such errors answer 503 with `Retry-After`,
 * not 500. The error codes of the engines do not overlap, so the error handler needs no database to ask.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  return databaseErrorKind(error) === 'unavailable';
}

/** What `error` means in the words of whichever dialect raised it (see {@link isDatabaseUnavailable}). */
export function databaseErrorKind(error: unknown): DatabaseErrorKind | undefined {
  for (const classify of databaseErrorClassifiers) {
    const kind = classify(error);
    if (kind !== undefined) return kind;
  }
  return undefined;
}

/**
 * The error classifiers of the dialect adapters loaded in this process. Each adapter's file registers its
 * own as it loads, so that this file loads no database driver: an error can only come from a driver that
 * is loaded.
 */
const databaseErrorClassifiers = new Set<(error: unknown) => DatabaseErrorKind | undefined>();

/** Adds a dialect adapter's error classifier to those {@link databaseErrorKind} asks. */
export function registerDatabaseErrorClassifier(
  classify: (error: unknown) => DatabaseErrorKind | undefined,
): void {
  databaseErrorClassifiers.add(classify);
}

/**
 * A set-up problem that stops a start (server, worker, CLI) with its message and exit status 2, never a
 * stack trace: a database that refuses the connection or the credentials, an OpenEyes schema the service
 * cannot serve, a queue another engine serves.
 */
export class StartupError extends Error {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options);
    this.name = 'StartupError';
  }
}
