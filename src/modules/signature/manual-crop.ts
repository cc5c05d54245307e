/**
 * Manual crop of a failed signature upload (as OpenEyes's crop screen): an operator crops the stored original
 * capture and it is imported exactly as `POST /api/v1/sign/add` imports a device's post with
 * `original_log_id` (the same body reader and import service: validation, files, signature row, CVI info, a
 * new status 4 log), then the failed row is marked 5 Manual. The operator gives the form's unique code; the
 * e-sign element and element type ids of `extra_info` are looked up from it, as the QR payload would carry
 * them.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import type { DB } from '../../db/schema.ts';
import type { FileStore } from '../../files/file-store.ts';
import { IMPORT_LOG_STATUS, findImportLogDetail, markImportLog } from './import-log.ts';
import { readSignatureFields } from './signature-body.ts';
import { SIGNATURE_ELEMENT_CLASSES, SIGNATURE_ELEMENT_TABLE } from './signature.queries.ts';
import { createSignatureService } from './signature.service.ts';

export interface ManualCropInput {
  /** The failed log row whose original was cropped. */
  readonly logId: number;
  /** The unique code of the form the capture belongs to. */
  readonly code: string;
  /** The cropped image: base64 PNG or JPEG, optionally as a `data:` URL. */
  readonly image: string;
  /** The operator (audit columns of the status change). */
  readonly userId: number;
}

export type ManualCropOutcome =
  /** Imported; `isMarked` is false when the failed row was changed meanwhile and left as it was. */
  | { readonly kind: 'saved'; readonly newLogId: number; readonly isMarked: boolean }
  /** sign/add's 422: the messages, as the device would have received them. */
  | { readonly kind: 'invalid'; readonly message: string; readonly newLogId: number }
  /** sign/add's "Failed signature save!" (storage or database failure, rolled back). */
  | { readonly kind: 'failed'; readonly newLogId: number }
  /** The row is no longer failed; nothing was imported. */
  | { readonly kind: 'changed'; readonly statusName: string }
  /** The row has no stored original to crop. */
  | { readonly kind: 'no_original' }
  | { readonly kind: 'not_found' };

export interface ManualCropper {
  repost(input: ManualCropInput): Promise<ManualCropOutcome>;
}

/** The e-sign element of the event that `code` maps to, and its element type (undefined when none). */
export async function findSignatureTarget(
  db: Kysely<DB>,
  code: string,
): Promise<{ elementId: number; elementTypeId: number } | undefined> {
  if (!/^[A-Za-z0-9]{1,16}$/.test(code)) return undefined;
  const row = await db
    .selectFrom('unique_codes as uc')
    .innerJoin('unique_codes_mapping as m', 'm.unique_code_id', 'uc.id')
    .innerJoin('event as e', 'e.id', 'm.event_id')
    .innerJoin(`${SIGNATURE_ELEMENT_TABLE} as el`, 'el.event_id', 'e.id')
    .innerJoin('element_type as t', 't.event_type_id', 'e.event_type_id')
    .select(['el.id as elementId', 't.id as elementTypeId'])
    .where((eb) => eb(eb.fn('lower', ['uc.code']), '=', code.toLowerCase()))
    .where('e.deleted', '=', 0)
    .where((eb) =>
      eb.or([
        eb('t.table_name', '=', SIGNATURE_ELEMENT_TABLE),
        eb.and([eb('t.table_name', 'is', null), eb('t.class_name', 'in', SIGNATURE_ELEMENT_CLASSES)]),
      ]),
    )
    .orderBy('uc.active', 'desc')
    .orderBy('uc.id')
    .orderBy('el.id')
    .limit(1)
    .executeTakeFirst();
  return row;
}

export function createManualCropper(deps: {
  readonly database: Database;
  readonly files: FileStore;
}): ManualCropper {
  const service = createSignatureService({ database: deps.database, files: deps.files });
  const db = deps.database.db;
  return {
    async repost(input) {
      const log = await findImportLogDetail(db, input.logId);
      if (log === undefined) return { kind: 'not_found' };
      if (log.statusId !== IMPORT_LOG_STATUS.failed) return { kind: 'changed', statusName: log.statusName };
      if (log.original === undefined) return { kind: 'no_original' };
      const target = await findSignatureTarget(db, input.code.trim());
      // The body a device or the original crop screen posts to sign/add, read by the same reader.
      const body = readSignatureFields({
        unique_identifier: input.code.trim(),
        ...(target === undefined
          ? {}
          : { extra_info: JSON.stringify({ e_id: target.elementId, e_t_id: target.elementTypeId }) }),
        image: input.image,
        original_log_id: input.logId,
      });
      const outcome = await service.importSignature(body);
      switch (outcome.kind) {
        case 'invalid':
          return { kind: 'invalid', message: outcome.message, newLogId: outcome.logId };
        case 'failed':
          return { kind: 'failed', newLogId: outcome.logId };
        case 'saved': {
          const change = await markImportLog(deps.database, {
            id: input.logId,
            statusId: IMPORT_LOG_STATUS.manual,
            userId: input.userId,
          });
          return { kind: 'saved', newLogId: outcome.logId, isMarked: change.kind === 'done' };
        }
      }
    },
  };
}
