/**
 * PASAPI V1 as OpenEyes v6.8 routes it: `PUT /PASAPI/V1/<Resource>/<id>/identifier-type/<type key>`, XML
 * bodies in and out, `DELETE /PASAPI/V1/PatientAppointment/<id>` and `PUT /PASAPI/V1/DidNotAttend`
 * (no id, no identifier type: the body names them). One route table: each resource
 * names its audit action and the handler that reads its body and calls its core function
 * (patient-change.ts, patient-appointment.ts, patient-merge.ts, did-not-attend.ts).
 *
 * In order, as OpenEyes's `beforeAction`: other verbs 405 with `Allow` (no authentication), `Accept`
 * without XML 406, Basic credentials 401, `OprnApi` 403 (empty bodies, `Content-Type: application/xml`);
 * then the body. Every other refusal is a `<Failure>` with a 4xx (OpenEyes answers some with HTML 500s,
 * see docs/OPERATIONS.md), and changes nothing.
 */
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, DEFAULT_MESSAGES, databaseErrorKind } from '../../errors.ts';
import { toAppError } from '../../http/error-handler.ts';
import type { ModuleOptions } from '../../http/module.ts';
import type { AuditRefusal, RouteAudit } from '../audit/index.ts';
import type { ChangeActor } from './patient-change.ts';
import { MAX_IDENTIFIER_CHARACTERS, createPatientChanges, unknownIdentifierType } from './patient-change.ts';
import { createPatientMerges } from './patient-merge.ts';
import { readAppointmentResource } from './appointment-resource.ts';
import { createPatientAppointments } from './patient-appointment.ts';
import { createDidNotAttends } from './did-not-attend.ts';
import { identifierTypeOf, readDidNotAttendResource } from './did-not-attend-resource.ts';
import { createPasReferenceCache } from './pas-reference.ts';
import { applyRemaps } from './pasapi-remap.ts';
import { PasapiError, readFlagHeader } from './pasapi-values.ts';
import type { XmlElement } from './pasapi-xml.ts';
import { XmlReadError, failureXml, readXml, successXml } from './pasapi-xml.ts';
import { readPatientResource, readRootFlags } from './patient-resource.ts';

const PREFIX = '/PASAPI/V1';
/** A PAS record is a few kilobytes; this bounds what the XML parser is ever handed. */
const BODY_LIMIT_BYTES = 256 * 1024;
const XML_TYPE = 'application/xml; charset=utf-8';

/** What a resource's handler answers: 201/200 with Success. */
interface ResourceAnswer {
  readonly statusCode: 200 | 201;
  readonly message: string;
  readonly id: number | undefined;
  readonly warnings: readonly string[];
  /** Patients touched, for the audit row (internal ids). */
  readonly patientIds: readonly number[];
}

interface PutContext {
  readonly externalId: string;
  readonly identifierTypeKey: string;
  /** The body after remapping. */
  readonly root: XmlElement;
  readonly isPartial: boolean;
  readonly isUpdateOnly: boolean;
  readonly actor: ChangeActor;
}

interface PasapiResource {
  readonly name: string;
  readonly audit: RouteAudit;
  put(context: PutContext): Promise<ResourceAnswer>;
}

const xmlRefusal = (): AuditRefusal => ({
  contentType: XML_TYPE,
  body: failureXml([DEFAULT_MESSAGES.unavailable]),
});

/** OpenEyes's Accept rule: the first entry (by preference) naming xml, or `*` as subtype, wins. */
export function acceptsXml(header: string | undefined): boolean {
  if (header === undefined || header.trim() === '') return true;
  const entries = header
    .split(',')
    .map((part, index) => {
      const [type = '', ...params] = part.trim().toLowerCase().split(';');
      const q = params.map((p) => /^\s*q=([0-9.]+)\s*$/.exec(p)?.[1]).find((v) => v !== undefined);
      return { type: type.trim(), q: q === undefined ? 1 : Number(q), index };
    })
    .filter((e) => e.type !== '' && e.q > 0)
    .sort((a, b) => b.q - a.q || a.index - b.index);
  let format = 'xml';
  for (const { type } of entries) {
    const [base = '', sub = ''] = type.split('/');
    if (base === 'xml' || sub === 'xml' || sub === '*') return true;
    format = base;
  }
  return format === 'xml';
}

/** The external id of the URL: any segment up to 40 characters (the `resource_id` width), trimmed. */
function readExternalId(raw: string): string {
  const id = raw.trim();
  if (id === '')
    throw new PasapiError(400, [
      'Missing request parameter(s). Required parameter(s) are: id, identifier-type',
    ]);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(id) || [...id].length > MAX_IDENTIFIER_CHARACTERS)
    throw new PasapiError(400, [
      `The external id must be 1 to ${MAX_IDENTIFIER_CHARACTERS} characters without control characters`,
    ]);
  return id;
}

function actorOf(request: FastifyRequest): ChangeActor {
  const principal = request.principal;
  if (principal === undefined) throw new AppError('unauthorized', DEFAULT_MESSAGES.unauthorized);
  return { userId: principal.userId };
}

export const pasapiRoutes: FastifyPluginAsync<ModuleOptions> = async (app, options) => {
  const { deps, basicAuth } = options;
  // Identifier types, remap rules and the other reference data: kept REFERENCE_CACHE_TTL_MS (pas-reference.ts).
  const reference = createPasReferenceCache(deps.config.referenceCacheTtlMs);
  const patients = createPatientChanges(deps.database, { reference });
  const merges = createPatientMerges(deps.database);
  const appointments = createPatientAppointments(deps.database, { timeZone: deps.config.timeZone });
  const didNotAttends = createDidNotAttends(deps.database);
  const { db } = deps.database;

  const resources: readonly PasapiResource[] = [
    {
      name: 'Patient',
      audit: { action: 'pasapi.patient', label: 'PAS patient', kind: 'write', renderRefusal: xmlRefusal },
      async put(context) {
        const { record, flags } = readPatientResource(context.root);
        const result = await patients.applyPatientChange(
          {
            externalId: context.externalId,
            identifierTypeKey: context.identifierTypeKey,
            record,
            isPartial: context.isPartial,
            isUpdateOnly: context.isUpdateOnly || flags.isUpdateOnly,
            isCreateOnly: flags.isCreateOnly,
          },
          context.actor,
        );
        if (result.outcome === 'not_created')
          return {
            statusCode: 200,
            message: 'Patient not created',
            id: undefined,
            warnings: result.warnings,
            patientIds: [],
          };
        return {
          statusCode: result.outcome === 'created' ? 201 : 200,
          message: result.outcome === 'created' ? 'Patient created.' : 'Patient updated.',
          id: result.patientId,
          warnings: result.warnings,
          patientIds: result.patientId === undefined ? [] : [result.patientId],
        };
      },
    },
    {
      name: 'PatientAppointment',
      audit: {
        action: 'pasapi.appointment',
        label: 'PAS appointment',
        kind: 'write',
        renderRefusal: xmlRefusal,
      },
      async put(context) {
        const { record, flags } = readAppointmentResource(context.root);
        const result = await appointments.applyAppointmentChange(
          {
            externalId: context.externalId,
            identifierTypeKey: context.identifierTypeKey,
            record,
            isPartial: context.isPartial,
            isUpdateOnly: context.isUpdateOnly || flags.isUpdateOnly,
          },
          context.actor,
        );
        if (result.outcome === 'not_created')
          return {
            statusCode: 200,
            message: 'PatientAppointment not created',
            id: undefined,
            warnings: result.warnings,
            patientIds: [],
          };
        return {
          statusCode: result.outcome === 'created' ? 201 : 200,
          message:
            result.outcome === 'created' ? 'PatientAppointment created.' : 'PatientAppointment updated.',
          id: result.worklistPatientId,
          warnings: result.warnings,
          patientIds: result.patientId === undefined ? [] : [result.patientId],
        };
      },
    },
    {
      name: 'PatientMerge',
      audit: { action: 'pasapi.merge', label: 'PAS patient merge', kind: 'write', renderRefusal: xmlRefusal },
      async put(context) {
        const { root } = context;
        if (root.name !== 'PatientMerge')
          throw new PasapiError(400, [`Mismatched root tag ${root.name} for resource type PatientMerge`]);
        const errors: string[] = [];
        readRootFlags(root, errors);
        const values: Record<string, string> = {};
        for (const element of root.children) {
          if (element.name !== 'PrimaryPatientNumber' && element.name !== 'SecondaryPatientNumber')
            errors.push(`Unrecognised tag ${element.name}`);
          else if (element.name in values) errors.push(`Duplicate tag ${element.name}`);
          else if (element.children.length > 0) errors.push(`${element.name} must hold text only`);
          else values[element.name] = element.text.trim();
        }
        for (const tag of ['PrimaryPatientNumber', 'SecondaryPatientNumber'])
          if (!(tag in values)) errors.push(`${tag} is required`);
        if (errors.length > 0) throw new PasapiError(400, errors);
        const result = await merges.requestPatientMerge(
          {
            identifierTypeKey: context.identifierTypeKey,
            primaryNumber: values.PrimaryPatientNumber!,
            secondaryNumber: values.SecondaryPatientNumber!,
          },
          context.actor,
        );
        return {
          statusCode: result.outcome === 'created' ? 201 : 200,
          message: result.outcome === 'created' ? 'PatientMerge created.' : 'PatientMerge updated.',
          id: result.requestId,
          warnings: result.warnings,
          patientIds: [result.primaryId, result.secondaryId],
        };
      },
    },
  ];
  const known = new Map(resources.map((r) => [r.name.toLowerCase(), r]));
  // Both before the body is read, as every other route guards: 406 for a client that takes no XML, then
  // Basic auth, so an anonymous client's body (up to the limit) is never received or parsed.
  const guard = [
    (request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void) => {
      if (acceptsXml(request.headers.accept)) done();
      else done(new PasapiError(406, []));
    },
    basicAuth({ operation: 'OprnApi' }),
  ];

  await app.register(
    async (scope: FastifyInstance) => {
      // Any content type: OpenEyes reads the raw body whatever the client declares.
      scope.removeAllContentTypeParsers();
      scope.addContentTypeParser(
        '*',
        { parseAs: 'string', bodyLimit: BODY_LIMIT_BYTES },
        (_request, body, done) => {
          done(null, body);
        },
      );
      scope.setErrorHandler((thrown, request, reply) => sendPasapiError(request, reply, thrown));
      scope.setNotFoundHandler((request, reply) => {
        const [, resourceName = ''] = /^\/PASAPI\/V1\/([^/?]*)/i.exec(request.url) ?? [];
        const resource = known.get(decodeURIComponent(resourceName).toLowerCase());
        if (request.method !== 'PUT')
          return sendPasapiError(
            request,
            reply,
            new AppError('method_not_allowed', DEFAULT_MESSAGES.method_not_allowed, {
              headers: { allow: 'PUT' },
            }),
          );
        if (resource === undefined)
          return sendPasapiError(
            request,
            reply,
            new PasapiError(404, [`Unrecognised Resource type ${resourceName}`]),
          );
        return sendPasapiError(
          request,
          reply,
          new PasapiError(400, [
            'Missing request parameter(s). Required parameter(s) are: id, identifier-type',
          ]),
        );
      });

      // OpenEyes's delete rule (`PASAPI/<controller>/<resource_type>/<id>`): appointments only; a DELETE
      // of another resource falls to the not-found handler (405).
      scope.route<{ Params: { id: string } }>({
        method: 'DELETE',
        url: '/PatientAppointment/:id',
        config: {
          audit: {
            action: 'pasapi.appointment-delete',
            label: 'PAS appointment deleted',
            kind: 'write',
            renderRefusal: xmlRefusal,
          },
          openapi: false,
        },
        onRequest: guard,
        handler: async (request, reply) => {
          const actor = actorOf(request);
          const id = request.params.id.trim();
          if (id === '') throw new PasapiError(404, ['External Resource ID required']);
          const result = await appointments.deleteAppointment(readExternalId(id), actor);
          request.audit = { targetType: 'patient', targetIds: [result.patientId] };
          return reply.code(204).header('content-type', XML_TYPE).send();
        },
      });

      // DidNotAttend takes PUT only, without id or identifier type (OpenEyes's `create` action).
      scope.route({
        method: 'PUT',
        url: '/DidNotAttend',
        bodyLimit: BODY_LIMIT_BYTES,
        config: {
          audit: {
            action: 'pasapi.did-not-attend',
            label: 'PAS did not attend',
            kind: 'write',
            renderRefusal: xmlRefusal,
          },
          openapi: false,
        },
        onRequest: guard,
        handler: async (request, reply) => {
          const actor = actorOf(request);
          const parsed = readXml(typeof request.body === 'string' ? request.body : '');
          // Remaps of the institution of the identifier type the body names (OpenEyes: none apply, P26).
          const typeKey = parsed.name === 'DidNotAttend' ? identifierTypeOf(parsed) : undefined;
          const type = typeKey === undefined ? undefined : await reference.identifierType(db, typeKey);
          const remapped = applyRemaps(
            parsed,
            await reference.remapRules(db, parsed.name, type?.institutionId),
          );
          const result = await didNotAttends.recordDidNotAttend(
            readDidNotAttendResource(remapped.root),
            actor,
          );
          if (result.outcome === 'disabled')
            return reply
              .code(200)
              .header('content-type', XML_TYPE)
              .send(
                successXml(
                  'DidNotAttend not created as it is disabled in the admin settings.',
                  undefined,
                  [],
                ),
              );
          request.audit = { targetType: 'patient', targetIds: [result.patientId] };
          return reply
            .code(201)
            .header('content-type', XML_TYPE)
            .send(successXml('Successfully created DidNotAttend.', result.eventId, []));
        },
      });

      for (const resource of resources) {
        const url = `/${resource.name}/:id/identifier-type/:type`;
        scope.route<{ Params: { id: string; type: string } }>({
          method: 'PUT',
          url,
          bodyLimit: BODY_LIMIT_BYTES,
          config: { audit: resource.audit, openapi: false },
          onRequest: guard,
          handler: async (request, reply) => {
            const actor = actorOf(request);
            const externalId = readExternalId(request.params.id);
            const identifierTypeKey = request.params.type;
            const isPartial = readFlagHeader('X-OE-Partial-Record', request.headers['x-oe-partial-record']);
            const isUpdateOnly = readFlagHeader('X-OE-Update-Only', request.headers['x-oe-update-only']);
            const type = await reference.identifierType(db, identifierTypeKey);
            if (type === undefined) throw unknownIdentifierType(identifierTypeKey);
            const body = typeof request.body === 'string' ? request.body : '';
            const parsed = readXml(body);
            const remapped = applyRemaps(
              parsed,
              await reference.remapRules(db, parsed.name, type.institutionId),
            );
            if (remapped.skipped.length > 0)
              request.log.warn(
                { count: remapped.skipped.length },
                'pasapi remaps skipped: unsupported xpath syntax',
              );
            const answer = await resource.put({
              externalId,
              identifierTypeKey,
              root: remapped.root,
              isPartial,
              isUpdateOnly,
              actor,
            });
            request.audit = { targetType: 'patient', targetIds: answer.patientIds };
            return reply
              .code(answer.statusCode)
              .header('content-type', XML_TYPE)
              .send(successXml(answer.message, answer.id, answer.warnings));
          },
        });
        scope.route({
          method: ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'OPTIONS'],
          url,
          exposeHeadRoute: false,
          config: { openapi: false },
          handler: async () => {
            throw new AppError('method_not_allowed', DEFAULT_MESSAGES.method_not_allowed, {
              headers: { allow: 'PUT' },
            });
          },
        });
      }
    },
    { prefix: PREFIX },
  );
};

/**
 * Every PASAPI error answer: 401, 403, 405 and 406 with empty bodies as OpenEyes sends them, everything
 * else a `<Failure>`; always `application/xml`.
 */
function sendPasapiError(request: FastifyRequest, reply: FastifyReply, thrown: unknown): FastifyReply {
  let statusCode: number;
  let errors: readonly string[] | undefined;
  if (thrown instanceof PasapiError) {
    statusCode = thrown.statusCode;
    // No messages: an empty body (406).
    errors = thrown.errors.length === 0 ? undefined : thrown.errors;
  } else if (thrown instanceof XmlReadError) {
    statusCode = 400;
    errors = thrown.errors;
  } else if (databaseErrorKind(thrown) === 'unique') {
    // Two requests for the same record at once: the second finds the first's row.
    statusCode = 409;
    errors = ['The record changed meanwhile: send the request again'];
  } else if (databaseErrorKind(thrown) === 'foreign_key') {
    // A row the change would remove is still referenced (on OpenEyes, a booking's pathway).
    statusCode = 409;
    errors = ['The record is referenced by other records and cannot be changed this way'];
  } else {
    const error = toAppError(thrown);
    for (const [name, value] of Object.entries(error.headers)) void reply.header(name, value);
    statusCode = error.statusCode;
    if (error.code === 'internal') {
      request.log.error({ err: thrown }, 'unhandled error');
      errors = [`${DEFAULT_MESSAGES.internal} (ref ${request.id})`];
    } else if (!['unauthorized', 'forbidden', 'method_not_allowed'].includes(error.code)) {
      errors = [error.message];
    }
  }
  void reply.code(statusCode).header('content-type', XML_TYPE);
  return reply.send(errors === undefined ? '' : failureXml(errors));
}
