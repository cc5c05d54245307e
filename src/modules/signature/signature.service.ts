/**
 * Signature import: validation, files, signature row, CVI text and import log. Validates everything before
 * writing anything, then stores the files durably and commits every row in one transaction; a failure removes
 * the files it wrote. Every attempt that reaches this service leaves exactly one import log row; a body
 * refused before validation (400, 413) never reaches it and leaves none. A refused attempt keeps its
 * original only when its code resolved to an event.
 */
import path from 'node:path';
import type { Database } from '../../db/database.ts';
import { formatDateTime } from '../../db/database.ts';
import { replaceUnstorableCharacters } from '../../db/schema-profile.ts';
import type { FileStore, StoredFile } from '../../files/file-store.ts';
import { cviInfoAfterPatientSignature } from './cvi-info.ts';
import type { SignatureInput } from './signature-body.ts';
import { capText, MAX_RETURN_MESSAGE_CHARS } from './signature-body.ts';
import type { DecodedImage } from './signature-image.ts';
import { IMAGE_EXTENSIONS, IMAGE_MIME_TYPES } from './signature-image.ts';
import type { CodeEvent, ImportLogAuditDates, NewProtectedFile } from './signature.queries.ts';
import { saveSignatureInOneStatement } from './signature.queries.postgres.ts';
import {
  findEventByCode,
  findImportLog,
  findProtectedFileByUid,
  importLogAuditDates,
  insertImportLog,
  insertPatientSignature,
  insertProtectedFiles,
  updateEventInfo,
} from './signature.queries.ts';

export const MESSAGES = {
  missingCode: 'Missing unique_identifier',
  missingExtraInfo: 'Missing element and element type ids',
  missingElementId: 'Missing element id.',
  missingElementTypeId: 'Missing element type id.',
  eventNotFound: 'Event not found',
  wrongEvent: 'Invalid UniqueCode or wrong event',
  missingImage: 'Missing image',
  invalidImage: 'Invalid image data',
  invalidOriginalLog: 'Invalid original_log_id',
  saved: 'Correct signature saved!',
  failed: 'Failed signature save!',
} as const;

export const LOG_STATUS = { failed: 3, success: 4 } as const;

/** What the route answers: 200 saved, 422 with the joined messages, or 200 "Failed signature save!". */
export type SignatureOutcome =
  | { readonly kind: 'saved'; readonly logId: number }
  | { readonly kind: 'invalid'; readonly message: string; readonly logId: number }
  | { readonly kind: 'failed'; readonly logId: number; readonly errorClass: string };

export interface SignatureServiceDeps {
  readonly database: Database;
  readonly files: FileStore;
  readonly now?: () => Date;
}

export interface SignatureService {
  importSignature(input: SignatureInput): Promise<SignatureOutcome>;
}

/** The original of an earlier attempt, reused by a manual crop (`original_log_id`). */
interface ReusedOriginal {
  readonly filename: string;
}

interface Checked {
  readonly messages: string[];
  readonly event: CodeEvent | undefined;
  readonly reused: ReusedOriginal | undefined;
}

const SIGNATORY_NAME_MAX_CHARS = 64;

export function createSignatureService(deps: SignatureServiceDeps): SignatureService {
  const { db, writeTransaction } = deps.database;
  const files = deps.files;
  const now = deps.now ?? (() => new Date());

  /** The time columns of an import log row written at `at` (stored date-time text). */
  async function logStampOf(at: string): Promise<{ now: string; auditDates: ImportLogAuditDates }> {
    return { now: at, auditDates: await importLogAuditDates(deps.database, at) };
  }

  /** The validation messages, in the original's exact order. */
  async function check(input: SignatureInput): Promise<Checked> {
    const messages: string[] = [];
    if (input.uniqueIdentifier === undefined) messages.push(MESSAGES.missingCode);
    if (!input.hasExtraInfo) {
      messages.push(MESSAGES.missingExtraInfo);
    } else {
      if (input.elementId === undefined) messages.push(MESSAGES.missingElementId);
      if (input.elementTypeId === undefined) messages.push(MESSAGES.missingElementTypeId);
    }
    let event: CodeEvent | undefined;
    if (input.uniqueIdentifier !== undefined) {
      const hasIds = input.elementId !== undefined && input.elementTypeId !== undefined;
      event = await findEventByCode(
        deps.database,
        input.uniqueIdentifier,
        hasIds ? { elementId: input.elementId, elementTypeId: input.elementTypeId } : undefined,
        {
          hasElementTableName: deps.database.schema.hasElementTableName,
          foldedKey: (column) => deps.database.dialect.foldedKey(column),
        },
      );
      if (event === undefined) {
        messages.push(MESSAGES.eventNotFound);
      } else if (!event.isCodeActive || (hasIds && !event.isElementOfEvent)) {
        messages.push(MESSAGES.wrongEvent);
      }
    }
    if (input.image.state === 'absent') messages.push(MESSAGES.missingImage);
    else if (input.image.state === 'invalid' || input.origImage.state === 'invalid')
      messages.push(MESSAGES.invalidImage);
    let reused: ReusedOriginal | undefined;
    if (input.originalLogId !== undefined) {
      reused = await findReusableOriginal(input.originalLogId, event);
      if (reused === undefined) messages.push(MESSAGES.invalidOriginalLog);
    }
    return { messages, event, reused };
  }

  /**
   * The original file of log `id`: the log must exist, name a stored protected file, and belong to the
   * resolved event (or to no event), so that no log row, not even a failed one, ever pairs one patient's
   * capture with another's record or with an unresolved code.
   */
  async function findReusableOriginal(
    id: number | 'invalid',
    event: CodeEvent | undefined,
  ): Promise<ReusedOriginal | undefined> {
    if (id === 'invalid') return undefined;
    const log = await findImportLog(db, id);
    if (log === undefined || log.filename === '') return undefined;
    if (log.eventId !== null && log.eventId !== event?.eventId) return undefined;
    const file = await findProtectedFileByUid(db, path.basename(log.filename));
    return file === undefined ? undefined : { filename: log.filename };
  }

  /**
   * Refused: a status 3 log, with the original stored only when it is a valid image of a resolved
   * event (staff can crop it by hand). A code that resolves to no event stores nothing but its log
   * row: the endpoint is anonymous, and a kept original per wrong code would let anyone fill the disk.
   */
  async function recordInvalid(input: SignatureInput, checked: Checked): Promise<SignatureOutcome> {
    const message = capText(checked.messages.join(' '), MAX_RETURN_MESSAGE_CHARS);
    const eventId = checked.event?.eventId ?? null;
    const at = formatDateTime(now());
    const stamp = await logStampOf(at);
    const originalField = input.origImage.state === 'absent' ? input.image : input.origImage;
    if (checked.reused !== undefined || checked.event === undefined || originalField.state !== 'valid') {
      const logId = await writeTransaction((trx) =>
        insertImportLog(trx, {
          filename: checked.reused?.filename ?? '',
          statusId: LOG_STATUS.failed,
          returnMessage: message,
          eventId,
          croppedFileId: null,
          ...stamp,
        }),
      );
      return { kind: 'invalid', message, logId };
    }
    const original = originalField.image;
    const stored = await files.write(original.bytes);
    try {
      const logId = await writeTransaction(async (trx) => {
        await insertProtectedFiles(trx, [protectedFileOf(stored, original, `sign_${stored.uid}`, at)]);
        return insertImportLog(trx, {
          filename: stored.relativePath,
          statusId: LOG_STATUS.failed,
          returnMessage: message,
          eventId,
          croppedFileId: null,
          ...stamp,
        });
      });
      return { kind: 'invalid', message, logId };
    } catch (error) {
      await files.remove(stored.uid).catch(() => {});
      throw error;
    }
  }

  /** Saving once checked: files and rows in one transaction, or a "Failed signature save!" log row. */
  async function save(
    input: SignatureInput,
    event: CodeEvent,
    reused: ReusedOriginal | undefined,
  ): Promise<SignatureOutcome> {
    if (input.image.state !== 'valid' || input.elementId === undefined) throw new Error('unchecked input');
    const signature = input.image.image;
    const original =
      reused !== undefined
        ? undefined
        : input.origImage.state === 'valid'
          ? input.origImage.image
          : signature;
    const date = now();
    const at = formatDateTime(date);
    const stamp = await logStampOf(at);
    const epochSeconds = Math.floor(date.getTime() / 1000);
    const written: StoredFile[] = [];
    try {
      // Both files are flushed before the transaction starts, so that no connection waits on the disk.
      const writes = await Promise.allSettled([
        original === undefined ? Promise.resolve(undefined) : files.write(original.bytes),
        files.write(signature.bytes),
      ]);
      for (const result of writes)
        if (result.status === 'fulfilled' && result.value) written.push(result.value);
      for (const result of writes) if (result.status === 'rejected') throw result.reason;
      const originalFile = original === undefined ? undefined : written[0]!;
      const signatureFile = written.at(-1)!;
      const filename = originalFile?.relativePath ?? reused!.filename;
      // The device's text is kept in the log; a character the database cannot store (an emoji on
      // OpenEyes's utf8 tables) is replaced rather than failing the signature.
      const returnMessage = replaceUnstorableCharacters(
        capText(`${input.extraInfoText} ${input.uniqueIdentifier ?? ''}`, MAX_RETURN_MESSAGE_CHARS),
        deps.database.schema.maxTextCodePoint,
      );
      // The original is stored first, then the signature, in that row order.
      const newFiles: NewProtectedFile[] = [];
      if (originalFile !== undefined && original !== undefined)
        newFiles.push(protectedFileOf(originalFile, original, `sign_${originalFile.uid}`, at));
      newFiles.push(
        protectedFileOf(
          signatureFile,
          signature,
          `sign_${event.eventId}_${epochSeconds}_${signatureFile.uid}`,
          at,
        ),
      );
      const newSignature = {
        elementId: input.elementId,
        signatoryName: signatoryNameOf(event),
        timestamp: Math.floor(epochSeconds / 60) * 60,
        now: at,
      };
      // Only CVI events carry the CVI status text (OpenEyes overwrote `event.info` of any event). A
      // compare-and-set on the text read at validation: a concurrent change wins over this recomputation
      // instead of being overwritten.
      const nextInfo =
        event.eventTypeClass === 'OphCoCvi' && event.info !== null
          ? cviInfoAfterPatientSignature(event.info)
          : undefined;
      const infoChange =
        nextInfo === undefined || event.info === null
          ? undefined
          : { eventId: event.eventId, previous: event.info, next: nextInfo, now: at };
      const log = {
        filename,
        statusId: LOG_STATUS.success,
        returnMessage,
        eventId: event.eventId,
        ...stamp,
      } as const;
      const { dialect, schema } = deps.database;
      // One statement where the engine allows it; a schema that keeps row versions takes the
      // transaction, whose status text update keeps the previous version first.
      const logId =
        dialect.hasWritableCte && (infoChange === undefined || !schema.keepsRowVersions)
          ? await saveSignatureInOneStatement(deps.database, {
              files: newFiles,
              signatureUid: signatureFile.uid,
              signature: newSignature,
              ...(infoChange === undefined ? {} : { eventInfo: infoChange }),
              log,
            })
          : await writeTransaction(async (trx) => {
              const fileIds = await insertProtectedFiles(trx, newFiles);
              const signatureFileId = fileIds.get(signatureFile.uid)!;
              await insertPatientSignature(trx, { ...newSignature, signatureFileId });
              if (infoChange !== undefined) await updateEventInfo(trx, deps.database, infoChange);
              return insertImportLog(trx, { ...log, croppedFileId: signatureFileId });
            });
      return { kind: 'saved', logId };
    } catch (error) {
      await Promise.allSettled(written.map((file) => files.remove(file.uid)));
      const errorClass = errorClassOf(error);
      const failedStamp = await logStampOf(formatDateTime(now()));
      const logId = await writeTransaction((trx) =>
        insertImportLog(trx, {
          filename: reused?.filename ?? '',
          statusId: LOG_STATUS.failed,
          returnMessage: `${MESSAGES.failed} ${errorClass}`,
          eventId: event.eventId,
          croppedFileId: null,
          ...failedStamp,
        }),
      );
      return { kind: 'failed', logId, errorClass };
    }
  }

  return {
    async importSignature(input) {
      const checked = await check(input);
      if (checked.messages.length > 0 || checked.event === undefined) return recordInvalid(input, checked);
      return save(input, checked.event, checked.reused);
    },
  };
}

function protectedFileOf(stored: StoredFile, image: DecodedImage, baseName: string, at: string) {
  return {
    uid: stored.uid,
    name: `${baseName}.${IMAGE_EXTENSIONS[image.format]}`,
    mimetype: IMAGE_MIME_TYPES[image.format],
    sizeBytes: stored.sizeBytes,
    now: at,
  };
}

/** Patient contact first name, a space, last name, cut to the column's 64 characters. */
function signatoryNameOf(event: CodeEvent): string {
  const name = `${event.patientFirstName ?? ''} ${event.patientLastName ?? ''}`.trim();
  return capText(name, SIGNATORY_NAME_MAX_CHARS);
}

function errorClassOf(error: unknown): string {
  if (error instanceof Error) return error.constructor.name || error.name;
  return typeof error;
}
