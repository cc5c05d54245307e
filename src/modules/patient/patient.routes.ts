/**
 * `GET api/v1/patient/search` (spec 4.1): Basic auth + `OprnApi` (at `onRequest`, before a form body is
 * parsed), then one service call.
 * POST and PUT take the same parameters, from the query string first and then an urlencoded form body,
 * as the original's `getParam` did. Parameters are read by hand rather than by a schema because every
 * malformed value must answer 200 `[]` or a clamped page, as the original does, never a 400.
 */
import type { CookieSerializeOptions, ParseOptions } from '@fastify/cookie';
import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { rejectOtherMethods } from '../../http/error-handler.ts';
import type { ModuleOptions } from '../../http/module.ts';
import { SEARCH_DOC } from './patient.openapi.ts';
import type { SortColumn } from './patient.queries.ts';
import type { PatientSearchInput } from './patient.service.ts';
import type { PatientSearchService } from './patient.service.ts';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from './patient.service.ts';

const SEARCH_URL = '/api/v1/patient/search';
/** Form bodies of search are a handful of short fields. */
const FORM_BODY_LIMIT_BYTES = 16 * 1024;

/** The search route's options: the module's, and the process's patient search. */
export interface PatientRouteOptions extends ModuleOptions {
  readonly patients: PatientSearchService;
}

export const patientRoutes: FastifyPluginAsync<PatientRouteOptions> = async (
  app,
  { basicAuth, patients: service },
) => {
  await app.register(formbody, { bodyLimit: FORM_BODY_LIMIT_BYTES });
  // Parsed on demand by the search only (`hook: false`). Values are taken as sent, without
  // percent-decoding, after trimming and dropping one pair of surrounding double quotes. The plugin
  // hands `parseOptions` to the parser, whose `decode` option its types leave out.
  const parseOptions: ParseOptions = { decode: readCookieValue };
  await app.register(cookie, { hook: false, parseOptions: parseOptions as CookieSerializeOptions });

  app.route({
    method: ['GET', 'POST', 'PUT'],
    url: SEARCH_URL,
    bodyLimit: FORM_BODY_LIMIT_BYTES,
    config: { doc: SEARCH_DOC, audit: { action: 'patient.search', label: 'Patient search', kind: 'read' } },
    // Before the body is read: an unauthenticated form is refused 401 without being parsed.
    onRequest: basicAuth({ operation: 'OprnApi' }),
    handler: async (request, reply) => {
      const results = await service.searchPatients(readSearchInput(request));
      // The audit trail (modules/audit) records which patients were shown, by internal id only.
      request.audit = { targetType: 'patient', targetIds: results.map((r) => r.id) };
      return reply
        .code(200)
        .header('content-type', 'application/json; charset=utf-8')
        .send(JSON.stringify(results));
    },
  });
  rejectOtherMethods(app, SEARCH_URL, ['GET', 'HEAD', 'POST', 'PUT']);
};

type Params = Readonly<Record<string, unknown>>;

/** Reduces query string, form body and cookies to the service input; malformed values fall back. */
export function readSearchInput(request: FastifyRequest): PatientSearchInput {
  const query = (request.query ?? {}) as Params;
  const body = isRecord(request.body) ? request.body : {};
  const param = (name: string): unknown => (name in query ? query[name] : body[name]);
  const text = (name: string): string | undefined => {
    const value = param(name);
    return typeof value === 'string' ? value : undefined;
  };
  const header = request.headers.cookie;
  const cookies = header === undefined ? {} : request.server.parseCookie(header);

  const identifierType = text('patient_identifier_type')?.trim();
  const sortBy = text('sort_by')?.trim();
  const sortDir = text('sort_dir')?.trim().toLowerCase();
  return {
    term: text('term'),
    // As in the original, any falsy value ("", "0") counts as omitted.
    identifierType:
      identifierType === undefined || identifierType === '' || identifierType === '0'
        ? undefined
        : identifierType,
    pageSize: Math.min(positiveInt(text('pageSize')) ?? DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE),
    page: positiveInt(text('Patient_page')) ?? 1,
    sortColumn: sortBy !== undefined && /^[0-5]$/.test(sortBy) ? (Number(sortBy) as SortColumn) : 'default',
    isDescending: sortBy !== undefined && sortDir !== undefined && sortDir !== 'asc' && sortDir !== '0',
    institutionCookie: cookies.institution_id,
    siteCookie: cookies.site_id,
  };
}

function isRecord(value: unknown): value is Params {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !Buffer.isBuffer(value);
}

/** A whole number >= 1; undefined for anything else (missing, zero, negative, non-numeric). */
function positiveInt(raw: string | undefined): number | undefined {
  if (raw === undefined || !/^\s*\+?\d{1,15}\s*$/.test(raw)) return undefined;
  const value = Number(raw);
  return value >= 1 ? value : undefined;
}

function readCookieValue(raw: string): string {
  return raw.trim().replace(/^"(.*)"$/, '$1');
}
