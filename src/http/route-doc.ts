/**
 * What a route declares about itself for the OpenAPI document (`openapi.ts`), in its `config.doc`:
 * summary, the parameters of routes that read their input by hand (patient search must answer `[]` for
 * any malformed value, the queue decodes by content type), request bodies, and the success and
 * route-specific error responses. 401/403/429 of guarded routes and 500/503 are added by the builder from
 * the route itself; a method a URL does not serve is documented as refused (405 with Allow) unless a
 * route declares its own refusal (`refusal`). These come from the route rather than from
 * `schema.response`, which would make Fastify re-serialise bodies whose bytes the contract fixes.
 * `openapi.test.ts` sends real requests and checks every status and body against the document.
 */
import type { ErrorBodyShape } from '../errors.ts';

export type JsonSchema = Record<string, unknown>;

export interface ResponseDoc {
  readonly description: string;
  /** Body schema; omitted for empty bodies. */
  readonly schema?: JsonSchema;
  /** Defaults to `application/json`. */
  readonly contentType?: string;
  /** Header name -> description. */
  readonly headers?: Readonly<Record<string, string>>;
}

export interface OperationDoc {
  readonly summary: string;
  readonly description?: string;
  /** Parameters not in the route's `schema.querystring` (query, header, cookie), as OpenAPI objects. */
  readonly parameters?: readonly unknown[];
  /** Descriptions of the query parameters that come from `schema.querystring`. */
  readonly queryDescriptions?: Readonly<Record<string, string>>;
  readonly requestBody?: unknown;
  readonly responses: Readonly<Record<string, ResponseDoc>>;
  /** Touches the database or the overload gate: 500 and 503 are documented. */
  readonly isDatabaseBacked?: boolean;
}

/** A route's `config.doc`. */
export interface RouteDoc {
  /** The tag of the document the route is listed under. */
  readonly tag: string;
  /** The operation of each method the route serves (HEAD is documented from GET when not listed). */
  readonly operations?: Readonly<Record<string, OperationDoc>>;
  /** A route that refuses its methods in its own way (not the usual 405 with Allow). */
  readonly refusal?: OperationDoc;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** What the OpenAPI document says about the route. */
    doc?: RouteDoc;
  }
}

/** A query parameter read by hand, as an OpenAPI parameter object. */
export const queryParameter = (
  name: string,
  description: string,
  schema: JsonSchema = { type: 'string' },
) => ({
  name,
  in: 'query',
  required: false,
  description,
  schema,
});

/** A status body `{"status": ...}` of one of `values`. */
export const statusBody = (values: string[]): JsonSchema => ({
  type: 'object',
  required: ['status'],
  additionalProperties: false,
  properties: { status: { type: 'string', enum: values } },
});

/** A JSON string body of exactly `text`. */
export function stringConst(text: string): JsonSchema {
  return { type: 'string', const: text };
}

const ENVELOPE_MESSAGE = {
  type: 'object',
  additionalProperties: { type: 'string' },
  description: 'Field name (or `system`, `data`) -> message.',
};

/** The queue envelope `{"success":0,"message":{...}}`; with `system` fixed when given. */
export function envelope(system?: string): JsonSchema {
  return {
    type: 'object',
    required: ['success', 'message'],
    additionalProperties: false,
    properties: {
      success: { const: 0 },
      message:
        system === undefined
          ? ENVELOPE_MESSAGE
          : {
              type: 'object',
              required: ['system'],
              additionalProperties: false,
              properties: { system: { const: system } },
            },
    },
  };
}

/** The error body of `shape` for a generic error (`message` undefined: any text). */
export function errorSchemaOf(shape: ErrorBodyShape, message: string | undefined): JsonSchema {
  if (shape === 'envelope') return envelope(message);
  return message === undefined ? { type: 'string' } : stringConst(message);
}
