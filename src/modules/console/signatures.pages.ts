/**
 * Signature import log pages (OpenEyes's viewer of `signature_import_log`): the list with the original's
 * filters, one attempt with its original capture, the manual crop (re-posted through the signature module's
 * import, as sign/add with `original_log_id`, then marked 5 Manual) and "Manual ignore" (6). A crop and
 * the import made from it link to each other, and the crop shows its import's event and patient.
 */
import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sendBinary } from '../../http/binary-reply.ts';
import type { ImportLogFilter, ImportLogStatusId } from '../signature/index.ts';
import {
  IMPORT_LOG_STATUS,
  createManualCropper,
  findCropLinks,
  findImportLogDetail,
  findMissingOriginals,
  listImportLogs,
  markImportLog,
  readImportLogOriginal,
} from '../signature/index.ts';
import { describePatients } from '../patient/index.ts';
import type { ConsoleContext, Flash } from './console-context.ts';
import {
  OPERATIONS,
  badRequestPage,
  consoleUrl,
  notFoundPage,
  parseId,
  timeField,
  textField,
} from './console-context.ts';
import type { ConsoleGuard } from './console-guard.ts';

type Query = Record<string, string | string[] | undefined>;

/**
 * The crop form's body: the cropped image travels in it as a PNG data URL of at most 1600 x 900 pixels
 * (assets/crop.js), which is about 4.3 MB of PNG at worst, 6.2 MB once base64 and form-encoded. It is
 * sized for that rather than by SIGN_BODY_LIMIT_BYTES: a PNG of a crop can be larger than the
 * (JPEG) original it was cut from, and this route is behind a console login.
 */
const CROP_BODY_LIMIT_BYTES = 8 * 1024 * 1024;

const STATUS_CHOICES: readonly [ImportLogStatusId, string][] = [
  [3, 'Failed'],
  [4, 'Success'],
  [5, 'Manual'],
  [6, 'Manual Ignore'],
];

export function registerSignaturePages(app: FastifyInstance, ctx: ConsoleContext, guard: ConsoleGuard): void {
  const { database, files } = ctx.deps;
  const db = database.db;
  const cropper = createManualCropper({ database, files });
  const guardClinical = guard(OPERATIONS.clinical);

  const listed = { preHandler: guardClinical, config: { consoleAction: 'console.signature.list' } };
  app.get<{ Querystring: Query }>('/signatures', listed, async (request, reply) => {
    const query = request.query;
    const statusText = textField(query, 'status') ?? '';
    const typeText = textField(query, 'type') ?? '';
    if (statusText !== '' && !STATUS_CHOICES.some(([id]) => String(id) === statusText))
      throw badRequestPage('Unknown import status.');
    if (typeText !== '' && typeText !== 'cvi' && typeText !== 'consent')
      throw badRequestPage('Unknown type.');
    const from = timeField(ctx, query, 'from');
    const to = timeField(ctx, query, 'to');
    const beforeText = textField(query, 'before');
    const before = beforeText === undefined ? undefined : parseId(beforeText);
    if (beforeText !== undefined && before === undefined)
      throw badRequestPage('"before" must be an import id.');
    const filter: ImportLogFilter = {
      ...(statusText === '' ? {} : { statusId: Number(statusText) as ImportLogStatusId }),
      ...(typeText === '' ? {} : { type: typeText }),
      ...(from === undefined ? {} : { from }),
      ...(to === undefined ? {} : { to }),
    };
    const page = await listImportLogs(db, filter, before === undefined ? {} : { before });
    const links = await findCropLinks(db, page.rows);
    const [patients, missingOriginals] = await Promise.all([
      describePatients(
        db,
        page.rows.flatMap((r) => {
          const patientId = r.patientId ?? links.get(r.id)?.importedAs?.patientId ?? null;
          return patientId === null ? [] : [patientId];
        }),
      ),
      findMissingOriginals(
        db,
        files,
        page.rows.filter((r) => r.statusId === IMPORT_LOG_STATUS.failed),
      ),
    ]);
    request.consoleAudit = { targetType: 'signature_import_log', targetIds: page.rows.map((r) => r.id) };
    const echo = {
      status: statusText,
      type: typeText,
      from: textField(query, 'from'),
      to: textField(query, 'to'),
    };
    return ctx.render(request, reply, 'signatures', {
      title: 'Signature imports',
      nav: 'signatures',
      filter,
      form: { from: ctx.siteTime.toLocalInput(from), to: ctx.siteTime.toLocalInput(to) },
      statusChoices: STATUS_CHOICES,
      page,
      links,
      patients,
      missingOriginals,
      firstUrl: before === undefined ? undefined : consoleUrl('/console/signatures', echo),
      nextUrl:
        page.nextBefore === undefined
          ? undefined
          : consoleUrl('/console/signatures', { ...echo, before: page.nextBefore }),
    });
  });

  const logIdOf = (params: { id: string }) => {
    const id = parseId(params.id);
    if (id === undefined) throw notFoundPage(`Signature import ${params.id}`);
    return id;
  };

  async function renderLog(
    request: FastifyRequest,
    reply: FastifyReply,
    id: number,
    options: { flash?: Flash; status?: number; code?: string } = {},
  ): Promise<FastifyReply> {
    request.consoleAudit ??= { targetType: 'signature_import_log', targetIds: [id] };
    const log = await findImportLogDetail(db, id, files);
    if (log === undefined) throw notFoundPage(`Signature import ${id}`);
    const link = (await findCropLinks(db, [log])).get(id);
    // A crop's own row may have resolved no event: it shows the event and patient of its import.
    const patientId = log.patientId ?? link?.importedAs?.patientId ?? null;
    const patient = patientId === null ? undefined : (await describePatients(db, [patientId])).get(patientId);
    return ctx.render(
      request,
      reply,
      'signature',
      {
        title: `Signature import #${id}`,
        nav: 'signatures',
        log,
        link,
        patient,
        code: options.code ?? log.eventCode ?? '',
        crop: log.original !== undefined && log.statusId === IMPORT_LOG_STATUS.failed,
        ...(options.flash === undefined ? {} : { flash: options.flash }),
      },
      options.status ?? 200,
    );
  }

  app.get<{ Params: { id: string }; Querystring: Query }>(
    '/signatures/:id',
    { preHandler: guardClinical, config: { consoleAction: 'console.signature.view' } },
    async (request, reply) => {
      const result = textField(request.query, 'result');
      const newImport = parseId(textField(request.query, 'import'));
      const flash: Flash | undefined =
        result === 'saved'
          ? {
              kind: textField(request.query, 'marked') === '1' ? 'ok' : 'warn',
              text:
                `sign/add answered 200 "Correct signature saved!" (import #${newImport ?? '?'}). ` +
                (textField(request.query, 'marked') === '1'
                  ? 'This import is now Manual.'
                  : 'This import was changed meanwhile by someone else and keeps its status.'),
            }
          : result === 'ignored'
            ? { kind: 'ok', text: 'This import is now Manual Ignore.' }
            : undefined;
      return renderLog(request, reply, logIdOf(request.params), flash === undefined ? {} : { flash });
    },
  );

  app.get<{ Params: { id: string } }>(
    '/signatures/:id/original',
    { preHandler: guardClinical, config: { consoleAction: 'console.signature.image' } },
    async (request, reply) => {
      const id = logIdOf(request.params);
      const original = await readImportLogOriginal(db, files, id);
      if (original === undefined) throw notFoundPage(`The original capture of import ${id}`);
      request.consoleAudit = { targetType: 'signature_import_log', targetIds: [id] };
      const etag = `"${createHash('sha256').update(original.bytes).digest('base64url')}"`;
      return sendBinary(
        reply,
        {
          contentType: original.mimeType,
          sizeBytes: original.bytes.length,
          etag,
          lastModified: undefined,
          cacheControl: 'private, no-cache',
        },
        original.bytes,
      );
    },
  );

  app.post<{ Params: { id: string } }>(
    '/signatures/:id/crop',
    {
      preHandler: guardClinical,
      config: { consoleAction: 'console.signature.crop' },
      bodyLimit: CROP_BODY_LIMIT_BYTES,
    },
    async (request, reply) => {
      const id = logIdOf(request.params);
      const code = (textField(request.body, 'code') ?? '').trim();
      const image = textField(request.body, 'image') ?? '';
      const outcome = await cropper.repost({ logId: id, code, image, userId: request.consoleUser!.userId });
      switch (outcome.kind) {
        case 'not_found':
          throw notFoundPage(`Signature import ${id}`);
        case 'saved':
          request.consoleAudit = { targetType: 'signature_import_log', targetIds: [id, outcome.newLogId] };
          return reply.redirect(
            `/console/signatures/${id}?result=saved&import=${outcome.newLogId}&marked=${outcome.isMarked ? 1 : 0}`,
            303,
          );
        case 'invalid':
          request.consoleAudit = { targetType: 'signature_import_log', targetIds: [id, outcome.newLogId] };
          return renderLog(request, reply, id, {
            status: 422,
            code,
            flash: {
              kind: 'error',
              text: `sign/add answered 422 "${outcome.message}" (recorded as import #${outcome.newLogId}). Nothing was saved; this import keeps its status.`,
            },
          });
        case 'failed':
          return renderLog(request, reply, id, {
            status: 500,
            code,
            flash: {
              kind: 'error',
              text: `sign/add answered 200 "Failed signature save!" (import #${outcome.newLogId}): storing failed and was rolled back. Try again.`,
            },
          });
        case 'changed':
          return renderLog(request, reply, id, {
            status: 409,
            flash: {
              kind: 'error',
              text: `Changed meanwhile: this import is now ${outcome.statusName}. Nothing was imported.`,
            },
          });
        case 'no_original':
          return renderLog(request, reply, id, {
            status: 409,
            flash: { kind: 'error', text: 'This import has no stored original capture to crop.' },
          });
      }
    },
  );

  app.post<{ Params: { id: string } }>(
    '/signatures/:id/ignore',
    { preHandler: guardClinical, config: { consoleAction: 'console.signature.ignore' } },
    async (request, reply) => {
      const id = logIdOf(request.params);
      const change = await markImportLog(database, {
        id,
        statusId: IMPORT_LOG_STATUS.manualIgnore,
        userId: request.consoleUser!.userId,
      });
      switch (change.kind) {
        case 'not_found':
          throw notFoundPage(`Signature import ${id}`);
        case 'done':
          request.consoleAudit = { targetType: 'signature_import_log', targetIds: [id] };
          return reply.redirect(`/console/signatures/${id}?result=ignored`, 303);
        case 'changed':
          return renderLog(request, reply, id, {
            status: 409,
            flash: {
              kind: 'error',
              text: `Changed meanwhile: this import is now ${change.statusName}. Nothing was changed.`,
            },
          });
      }
    },
  );
}
