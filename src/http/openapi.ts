/**
 * The OpenAPI 3.1 document of the service, served at `GET /api/v1/openapi.json`, and its HTML rendering
 * at `GET /docs`. Both are public: they describe the API and hold no data.
 *
 * The document is generated, not written by hand, so that it cannot drift from the routes:
 * - an `onRoute` hook collects every route (method, URL, schema, config, hooks) as it is registered;
 * - security comes from the guard itself: the Basic guard factory is wrapped by {@link markGuards}, which
 *   remembers every hook it produces and the operation it requires, and a route whose `onRequest` or
 *   `preHandler` holds such a hook is documented as Basic-protected (401, 403, 429 included). A route may
 *   instead declare `config.openapiSecurity` (the metrics route, whose guard depends on its switch);
 * - query parameters come from `schema.querystring` where the route has one (TypeBox is JSON Schema),
 *   with the schema's `description`; routes that check their query by hand declare the schema with
 *   `attachValidation` so that it documents without refusing;
 * - the error shape (JSON string or queue envelope) comes from `config.errorShape`, the one the error
 *   handler uses;
 * - summaries, the parameters of routes that read their input by hand, and the success and
 *   route-specific error bodies come from the route's `config.doc` (`route-doc.ts`), because adding
 *   `schema.response` to a route would make Fastify re-serialise bodies whose bytes the contract fixes.
 * Methods a URL refuses (the 405-with-`Allow` routes, sign/add's 400) are documented as such.
 */
import type { FastifyInstance, RouteOptions } from 'fastify';
import type { BasicAuthGuard, GuardOptions } from './basic-auth.ts';
import { renderDocsPage } from './docs-page.ts';
import type { JsonSchema, OpenApiDocument, OpenApiOperation, OpenApiResponse } from './openapi-document.ts';
import type { OperationDoc, ResponseDoc, RouteDoc } from './route-doc.ts';
import { errorSchemaOf, stringConst } from './route-doc.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Security of the route when the guard cannot be seen in its hooks: schemes, any of which suffices. */
    openapiSecurity?: readonly SecurityScheme[];
    /** `false` leaves the route out of the document (test-only routes). */
    openapi?: boolean;
  }
}

export type { OpenApiDocument, OpenApiOperation, OpenApiResponse } from './openapi-document.ts';

export type SecurityScheme = 'basic' | 'bearer';

export const OPENAPI_URL = '/api/v1/openapi.json';
export const DOCS_URL = '/docs';

/** Every hook the marked guard factory produced, with the options it was made with. */
const guardHooks = new WeakMap<object, GuardOptions>();

/** Wraps the Basic guard factory so that the routes using its hooks can be documented as protected. */
export function markGuards(factory: BasicAuthGuard): BasicAuthGuard {
  return (options = {}) => {
    const hook = factory(options);
    guardHooks.set(hook, options);
    return hook;
  };
}

/** The guard options of the first marked guard hook among `hooks`, or undefined. */
function guardOf(hooks: unknown): GuardOptions | undefined {
  const list: readonly unknown[] = Array.isArray(hooks) ? (hooks as unknown[]) : [hooks];
  for (const hook of list) {
    if (typeof hook === 'function' && guardHooks.has(hook)) return guardHooks.get(hook);
  }
  return undefined;
}

/** What the document needs of one registered route and method. */
export interface CollectedRoute {
  readonly method: string;
  readonly url: string;
  readonly querystring: JsonSchema | undefined;
  readonly errorShape: 'string' | 'envelope';
  readonly guard: GuardOptions | undefined;
  readonly security: readonly SecurityScheme[] | undefined;
  readonly doc: RouteDoc | undefined;
}

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch'] as const;

declare module 'fastify' {
  interface FastifyInstance {
    /** The routes the OpenAPI collector saw, in registration order (tests compare them to the document). */
    openapiRoutes?: readonly CollectedRoute[];
  }
}

/**
 * Installs the collector and the two routes on the root `app`, before any other route is registered.
 * The document is built on first request, once every route is known, and kept.
 */
export function installOpenApi(app: FastifyInstance): void {
  // The route options are read when the document is built, after every onRoute hook (including those
  // of child scopes, which run after this one) has had its say: a test scope may set `openapi: false`.
  const seen: RouteOptions[] = [];
  const collect = (): CollectedRoute[] =>
    seen
      .filter((route) => route.config?.openapi !== false)
      .flatMap((route) => {
        const methods = Array.isArray(route.method) ? route.method : [route.method];
        const guard = guardOf(route.onRequest) ?? guardOf(route.preHandler);
        return methods.map((method) => ({
          method: method.toUpperCase(),
          url: route.url,
          querystring: route.schema?.querystring as JsonSchema | undefined,
          errorShape: route.config?.errorShape ?? 'string',
          guard,
          security: route.config?.openapiSecurity,
          doc: route.config?.doc,
        }));
      });
  app.decorate('openapiRoutes', { getter: collect });
  app.addHook('onRoute', (route: RouteOptions) => {
    seen.push(route);
  });

  let document: string | undefined;
  let page: string | undefined;
  const documentText = () => (document ??= JSON.stringify(buildOpenApiDocument(collect())));

  // Registered as a child plugin, which loads after the caller's own hooks (metrics) are installed.
  void app.register(async (scope) => {
    registerDocumentRoutes(
      scope,
      documentText,
      () => (page ??= renderDocsPage(JSON.parse(documentText()) as OpenApiDocument)),
    );
  });
}

function registerDocumentRoutes(app: FastifyInstance, documentText: () => string, pageText: () => string) {
  app.route({
    method: 'GET',
    url: OPENAPI_URL,
    config: {
      doc: {
        tag: 'operations',
        operations: {
          GET: {
            summary: 'This OpenAPI 3.1 document',
            responses: {
              200: {
                description: 'The document.',
                schema: {
                  type: 'object',
                  required: ['openapi', 'info', 'paths'],
                  properties: {
                    openapi: { const: '3.1.0' },
                    info: { type: 'object' },
                    paths: { type: 'object' },
                  },
                },
              },
            },
          },
        },
      },
    },
    handler: async (_request, reply) =>
      reply.code(200).header('content-type', 'application/json; charset=utf-8').send(documentText()),
  });
  app.route({
    method: 'GET',
    url: DOCS_URL,
    // The page carries its own style and a script-free body: only its inline <style> is allowed.
    config: {
      csp: false,
      doc: {
        tag: 'operations',
        operations: {
          GET: {
            summary: 'This documentation as an HTML page',
            responses: {
              200: { description: 'The page.', contentType: 'text/html', schema: { type: 'string' } },
            },
          },
        },
      },
    },
    handler: async (_request, reply) => {
      return reply
        .code(200)
        .header('content-type', 'text/html; charset=utf-8')
        .header('content-security-policy', DOCS_CSP)
        .send(pageText());
    },
  });
}

/** The documentation page needs nothing but its own inline style. */
export const DOCS_CSP = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'";

const SECURITY_NAMES: Record<SecurityScheme, string> = { basic: 'basicAuth', bearer: 'metricsToken' };

/** What the routes of one URL say together: its tag and the methods it serves. */
interface UrlDoc {
  readonly tag: string;
  readonly served: readonly string[];
}

/** Builds the document from the collected routes and what each declares (`config.doc`). */
export function buildOpenApiDocument(routes: readonly CollectedRoute[]): OpenApiDocument {
  const paths: Record<string, Record<string, OpenApiOperation>> = {};
  const usedIds = new Set<string>();
  const urls = new Map<string, UrlDoc>();
  for (const route of routes) {
    if (route.doc === undefined) continue;
    const key = route.url.toLowerCase();
    const known = urls.get(key);
    const served = Object.keys(route.doc.operations ?? {});
    urls.set(key, {
      tag: known?.tag ?? route.doc.tag,
      served: [...(known?.served ?? []), ...served.filter((m) => !known?.served.includes(m))],
    });
  }
  for (const route of routes) {
    const method = route.method.toLowerCase();
    if (!(METHODS as readonly string[]).includes(method)) continue;
    // Fastify's `:name` parameters are OpenAPI's `{name}` templates.
    const item = (paths[route.url.replace(/:(\w+)/g, '{$1}')] ??= {});
    item[method] = buildOperation(route, urls.get(route.url.toLowerCase()), usedIds);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Clinical records API',
      version: '1.0.0',
      description:
        'OpenEyes-compatible patient search, signature import, attachment view and upload, and request ' +
        'queue. Error bodies are JSON strings (such as "401 Unauthorized") or, on the queue and attachment ' +
        'create endpoints, the envelope {"success":0,"message":{...}}. Clients must check the status AND ' +
        'the body: sign/add answers some failures with 200.',
    },
    tags: [
      { name: 'patient', description: 'Patient search (Basic + OprnApi).' },
      { name: 'signature', description: 'Signature import from signature pads (open, rate-limited).' },
      { name: 'attachment', description: 'Attachment view and upload (Basic).' },
      { name: 'request-queue', description: 'Request queue intake and status (Basic + OprnApi).' },
      {
        name: 'dicomweb',
        description:
          'DICOMweb: STOW-RS (DICOM instances become queued requests; Basic + OprnApi), QIDO-RS searches and ' +
          'WADO-RS retrieves of what was received (Basic, as attachment view).',
      },
      { name: 'operations', description: 'Health, readiness, metrics and this documentation.' },
    ],
    paths,
    components: {
      securitySchemes: {
        basicAuth: {
          type: 'http',
          scheme: 'basic',
          description: 'Credentials of an active user; most endpoints also require the OprnApi operation.',
        },
        metricsToken: { type: 'http', scheme: 'bearer', description: 'METRICS_TOKEN, for /metrics only.' },
      },
    },
  };
}

function buildOperation(
  route: CollectedRoute,
  url: UrlDoc | undefined,
  usedIds: Set<string>,
): OpenApiOperation {
  const method = route.method;
  const operations = route.doc?.operations;
  const declared: OperationDoc | undefined =
    operations?.[method] ?? (method === 'HEAD' ? headOf(operations?.GET) : undefined);
  const shape = route.errorShape;
  const doc: OperationDoc = declared ?? route.doc?.refusal ?? refusedOperation(route, url);

  const responses: Record<string, OpenApiResponse> = {};
  for (const [status, response] of Object.entries(doc.responses)) responses[status] = toResponse(response);

  const schemes: SecurityScheme[] = route.security !== undefined ? [...route.security] : [];
  if (route.security === undefined && route.guard !== undefined && declared !== undefined)
    schemes.push('basic');
  if (schemes.length > 0 && declared !== undefined) {
    responses['401'] ??= toResponse({
      description: 'Missing, malformed or wrong credentials, or a disabled account.',
      schema: stringConst('401 Unauthorized'),
      headers: { 'WWW-Authenticate': 'The challenge, such as Basic realm="OpenEyes".' },
    });
    if (route.guard?.operation !== undefined || schemes.includes('basic'))
      responses['403'] ??= toResponse({
        description: `Authenticated, but the user lacks ${route.guard?.operation ?? 'OprnApi'}.`,
        schema: stringConst('403 Forbidden'),
      });
    if (schemes.includes('basic'))
      responses['429'] ??= toResponse({
        description: 'Too many failed logins from this address or for this username.',
        schema: errorSchemaOf(shape, 'Too Many Requests'),
        headers: { 'Retry-After': 'Seconds to wait.' },
      });
  }
  if (declared !== undefined && doc.isDatabaseBacked === true) {
    responses['503'] ??= toResponse({
      description: 'The database is unavailable or the server is overloaded; retry later.',
      schema: errorSchemaOf(shape, 'Service Unavailable'),
      headers: { 'Retry-After': 'Seconds to wait.' },
    });
    responses['500'] ??= toResponse({
      description: 'Unexpected failure; the body carries a reference to the server log.',
      schema: errorSchemaOf(shape, undefined),
    });
  }

  const baseId = `${method.toLowerCase()}${route.url.replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase())}`;
  let operationId = baseId;
  for (let n = 2; usedIds.has(operationId); n += 1) operationId = `${baseId}${n}`;
  usedIds.add(operationId);

  const parameters = [...(doc.parameters ?? []), ...queryParameters(route.querystring, doc)];
  const operation: OpenApiOperation = {
    operationId,
    summary: doc.summary,
    tags: [route.doc?.tag ?? url?.tag ?? 'operations'],
    security: schemes.length === 0 ? [] : schemes.map((s) => ({ [SECURITY_NAMES[s]]: [] })),
    responses,
  };
  if (doc.description !== undefined) operation.description = doc.description;
  if (parameters.length > 0) operation.parameters = parameters;
  if (doc.requestBody !== undefined) operation.requestBody = doc.requestBody;
  if (route.guard?.operation !== undefined && declared !== undefined)
    operation['x-required-operation'] = route.guard.operation;
  return operation;
}

/** HEAD answers like GET without a body. */
function headOf(get: OperationDoc | undefined): OperationDoc | undefined {
  if (get === undefined) return undefined;
  const responses: Record<string, ResponseDoc> = {};
  for (const [status, response] of Object.entries(get.responses)) {
    const { schema: _schema, contentType: _type, ...rest } = response;
    responses[status] = rest;
  }
  return { ...get, summary: `${get.summary} (headers only)`, responses, requestBody: undefined };
}

/** A method the URL refuses: 405 with Allow. */
function refusedOperation(route: CollectedRoute, url: UrlDoc | undefined): OperationDoc {
  const allowed = url?.served ?? [];
  return {
    summary: `Not allowed: ${route.method} is refused`,
    description: `Answers 405 with \`Allow\` before any guard or handler runs.`,
    responses: {
      405: {
        description: 'Method not allowed.',
        schema: errorSchemaOf(route.errorShape, 'Method Not Allowed'),
        headers: {
          Allow: `The methods this URL accepts${allowed.length > 0 ? `: ${allowed.join(', ')}` : ''}.`,
        },
      },
    },
  };
}

/** Query parameters from a route's JSON/TypeBox `querystring` schema, described by its `config.doc`. */
function queryParameters(schema: JsonSchema | undefined, doc: OperationDoc): unknown[] {
  if (schema === undefined || schema.type !== 'object') return [];
  const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((schema.required ?? []) as string[]);
  return Object.entries(properties).map(([name, property]) => {
    const parameter: Record<string, unknown> = {
      name,
      in: 'query',
      required: required.has(name),
      schema: plainSchema(property),
    };
    const description =
      typeof property.description === 'string' ? property.description : doc.queryDescriptions?.[name];
    if (description !== undefined) parameter.description = description;
    return parameter;
  });
}

/** A JSON copy of a TypeBox schema: its symbol keys (`[Kind]`) dropped. */
function plainSchema(schema: JsonSchema): JsonSchema {
  return JSON.parse(JSON.stringify(schema)) as JsonSchema;
}

function toResponse(doc: ResponseDoc): OpenApiResponse {
  const response: OpenApiResponse = { description: doc.description };
  if (doc.headers !== undefined) {
    response.headers = {};
    for (const [name, description] of Object.entries(doc.headers))
      response.headers[name] = { description, schema: { type: 'string' } };
  }
  if (doc.schema !== undefined)
    response.content = { [doc.contentType ?? 'application/json']: { schema: doc.schema } };
  return response;
}
