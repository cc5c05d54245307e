/**
 * The process logger. Log lines carry request ids, methods, paths, statuses, timings and row ids, never
 * query strings (search terms), headers, bodies, names, dates of birth, identifiers or images.
 */
import pino from 'pino';
import type { LogLevel } from './config.ts';

export type Logger = pino.Logger;

export function createLogger(level: LogLevel): Logger {
  return pino({
    level,
    redact: { paths: ['req.headers', 'headers', 'authorization', 'password', 'body'], remove: true },
    serializers: {
      req: (req: { method: string; url: string; id: string }) => ({
        id: req.id,
        method: req.method,
        path: req.url.split('?')[0],
      }),
      res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
      // Database errors carry the offending values (`detail: Key (value)=(…)`, bound parameters): drop them.
      err: (error: Error) => {
        const serialized = pino.stdSerializers.err(error) as Record<string, unknown>;
        for (const key of ['detail', 'where', 'parameters', 'query', 'sql']) delete serialized[key];
        return serialized;
      },
    },
  });
}
