/**
 * The only place that writes error bodies. Spec endpoints keep their exact shapes: a JSON string
 * (`"401 Unauthorized"`, `"Bad request"`, `"Not Found"`) or, on routes whose config says `envelope`, the
 * queue's `{"success":0,"message":{...}}`. Unknown errors are logged in full and answered without
 * internals, with a reference id the operator can find in the log.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ErrorBodyShape, ErrorCode } from '../errors.ts';
import {
  AppError,
  DATABASE_RETRY_AFTER_SECONDS,
  DEFAULT_MESSAGES,
  ERROR_STATUS,
  isDatabaseUnavailable,
} from '../errors.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Error body shape of the route; `string` unless said otherwise. */
    errorShape?: ErrorBodyShape;
  }
}

const CODE_BY_STATUS = new Map<number, ErrorCode>(
  Object.entries(ERROR_STATUS).map(([code, status]) => [status, code as ErrorCode]),
);

/** Turns anything thrown into an AppError: Fastify's own client errors keep their 4xx meaning. */
export function toAppError(error: unknown): AppError {
  if (error instanceof AppError) return error;
  const fastifyError = error as Partial<FastifyError> | undefined;
  // The database down, unreachable or locked: a temporary condition, answered 503 in the route's shape.
  if (isDatabaseUnavailable(error))
    return new AppError('unavailable', DEFAULT_MESSAGES.unavailable, {
      headers: { 'retry-after': String(DATABASE_RETRY_AFTER_SECONDS) },
      cause: error,
    });
  if (fastifyError?.validation !== undefined)
    return new AppError('bad_request', DEFAULT_MESSAGES.bad_request, { cause: error });
  const status = fastifyError?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    const code = CODE_BY_STATUS.get(status) ?? 'bad_request';
    return new AppError(code, DEFAULT_MESSAGES[code], { cause: error });
  }
  return new AppError('internal', DEFAULT_MESSAGES.internal, { cause: error });
}

function envelopeMessage(error: AppError, requestId: string): Record<string, string> {
  switch (error.code) {
    case 'validation_failed':
      return error.fields ?? { data: error.message };
    case 'payload_too_large':
      return { data: 'Payload too large.' };
    case 'internal':
      return { system: `Internal server error (ref ${requestId})` };
    case 'bad_request':
    case 'unauthorized':
    case 'forbidden':
    case 'not_found':
    case 'method_not_allowed':
    case 'not_acceptable':
    case 'unsupported_media_type':
    case 'too_many_requests':
    case 'unavailable':
      return { system: error.message };
  }
}

/** The body of `error` in `shape`. 401 and 403 are the spec's JSON strings on every route. */
export function errorBody(error: AppError, shape: ErrorBodyShape, requestId: string): unknown {
  if (error.code === 'unauthorized' || error.code === 'forbidden') return DEFAULT_MESSAGES[error.code];
  if (shape === 'envelope') return { success: 0, message: envelopeMessage(error, requestId) };
  if (error.code === 'internal') return `${DEFAULT_MESSAGES.internal} (ref ${requestId})`;
  return error.message;
}

export function sendError(request: FastifyRequest, reply: FastifyReply, error: AppError): FastifyReply {
  const shape = request.routeOptions.config?.errorShape ?? 'string';
  for (const [name, value] of Object.entries(error.headers)) void reply.header(name, value);
  return reply
    .code(error.statusCode)
    .header('content-type', 'application/json; charset=utf-8')
    .send(JSON.stringify(errorBody(error, shape, request.id)));
}

export interface ErrorHandlingOptions {
  /**
   * Said beside `"Payload too large."` in the envelope of a 413 (queue add, attachment create) when the
   * upload limit in force is below the configured one: the limit and the database setting behind it.
   */
  readonly uploadLimitNote?: string;
}

export function installErrorHandling(app: FastifyInstance, options: ErrorHandlingOptions = {}): void {
  const { uploadLimitNote } = options;
  app.setErrorHandler((thrown, request, reply) => {
    const error = toAppError(thrown);
    if (error.code === 'internal') {
      request.log.error({ err: thrown }, 'unhandled error');
    } else if (error.statusCode >= 500) {
      request.log.warn({ code: error.code }, error.message);
    }
    const shape = request.routeOptions.config?.errorShape ?? 'string';
    if (error.code === 'payload_too_large' && uploadLimitNote !== undefined && shape === 'envelope') {
      for (const [name, value] of Object.entries(error.headers)) void reply.header(name, value);
      const message = { ...envelopeMessage(error, request.id), limit: uploadLimitNote };
      return reply
        .code(error.statusCode)
        .header('content-type', 'application/json; charset=utf-8')
        .send(JSON.stringify({ success: 0, message }));
    }
    return sendError(request, reply, error);
  });
  app.setNotFoundHandler((request, reply) =>
    sendError(request, reply, new AppError('not_found', DEFAULT_MESSAGES.not_found)),
  );
}

const ALL_METHODS = ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT', 'OPTIONS'] as const;

/**
 * Answers 405 with `Allow` for every method of `url` that is not in `allowed`, instead of the router's
 * 404, without running any guard or handler.
 */
export function rejectOtherMethods(
  app: FastifyInstance,
  url: string,
  allowed: readonly string[],
  errorShape: ErrorBodyShape = 'string',
): void {
  const others = ALL_METHODS.filter((m) => !allowed.includes(m));
  if (others.length === 0) return;
  app.route({
    method: others,
    url,
    config: { errorShape },
    exposeHeadRoute: false,
    handler: async () => {
      throw new AppError('method_not_allowed', DEFAULT_MESSAGES.method_not_allowed, {
        headers: { allow: allowed.join(', ') },
      });
    },
  });
}
