/**
 * Attachment view and upload (`attachmentdisplay/view` and `create`). No HTTP types here: the view hands back
 * a representation (headers) and a loader for the bytes, so that the route can answer a HEAD or a 304 without
 * the bytes ever leaving the database.
 */
import { hash } from 'node:crypto';
import type { BinaryRepresentation } from '../../http/binary-reply.ts';
import type { AppDeps } from '../../deps.ts';
import { nowDateTime, parseDateTime } from '../../db/database.ts';
import { findUnstorableCharacter, unstorableCharacterMessage } from '../../db/schema-profile.ts';
import { AppError } from '../../errors.ts';
import type { RequestReader } from '../user/index.ts';
import { mayReadRequest } from '../user/index.ts';
import type { BinaryField } from './attachment-chunks.ts';
import { digestInChunks, readInChunks } from './attachment-chunks.ts';
import { digestField, storeDigest } from './attachment-digest.ts';
import type { AttachmentContent, AttachmentHead, DataField, StoredDigest } from './attachment.queries.ts';
import {
  elementTypeExists,
  eventExists,
  findMimeType,
  insertUpload,
  readAttachmentContent,
  readAttachmentHead,
  readModifiedDate,
  upsertDigest,
} from './attachment.queries.ts';
import { contradictsDeclaredType, decodeLikeOriginal, uploadTypeOf } from './content-type.ts';

export interface ViewQuery {
  readonly id: number;
  readonly field: DataField | undefined;
  /** Lower-cased `type/subtype` the caller asked for, already syntax-checked. */
  readonly mime: string | undefined;
  /**
   * Who asks, for the rule on a request's private rows (`AttachmentHead.isPrivate`); omitted by callers
   * that decide access to the row themselves (the console's pages).
   */
  readonly reader?: RequestReader;
}

/**
 * A body in memory, or (larger fields) its chunks, read only when a GET sends them. Either way the
 * Buffers are the body's alone: the sender may release their memory once sent.
 */
export type AttachmentBody = Buffer | (() => AsyncIterable<Buffer>);

export interface LoadedAttachment {
  readonly representation: BinaryRepresentation;
  readonly body: AttachmentBody;
}

export interface AttachmentView {
  readonly representation: BinaryRepresentation;
  /** Reads the bytes (for a 200 GET); the representation it returns matches those bytes exactly. */
  load(): Promise<LoadedAttachment>;
}

export interface UploadInput {
  readonly userId: number;
  /** The declared Content-Type (`type/subtype`, parameters dropped); undefined when absent or malformed. */
  readonly declaredType: string | undefined;
  readonly bytes: Buffer | undefined;
  readonly fileName: string | null;
  readonly eventId: string | undefined;
  readonly elementTypeId: string | undefined;
}

export const IMMUTABLE = 'private, max-age=31536000, immutable';
/** Young or request-queue rows may change (thumbnails added, blobs cleared): revalidate each time. */
export const REVALIDATE = 'private, no-cache';
/** The column is `int` in OpenEyes (int4 on PostgreSQL): the same bound on both dialects. */
export const MAX_ID = 2_147_483_647;
const MAX_FILE_NAME = 200;

const UNIDENTIFIED_TYPE =
  'The file type could not be identified from its content: send the file with its own Content-Type (for example image/png or application/pdf).';

function notFound(): AppError {
  return new AppError('not_found', 'Not Found');
}

function badRequest(): AppError {
  return new AppError('bad_request', 'Bad request');
}

/**
 * Refuses a request's private row (a received request's part until filed, an upload filed under no event)
 * to a reader who is neither its submitter nor a request admin, with the 404 of an unknown id: ids are
 * sequential, and a 403 would tell which exist.
 */
function checkReader(row: AttachmentHead | AttachmentContent, reader: RequestReader | undefined): void {
  if (reader === undefined || !row.isPrivate || mayReadRequest(reader, row.submitterUserId)) return;
  throw notFound();
}

export function createAttachmentService(deps: AppDeps) {
  const { config, database } = deps;
  const isCompat = config.attachmentBase64Compat;

  function validDigest(row: AttachmentHead | AttachmentContent, field: DataField): StoredDigest | undefined {
    const stored = row.digests[field];
    return row.digestSourceDate === row.lastModifiedDate && stored.sha256 !== null ? stored : undefined;
  }

  function representationOf(
    row: AttachmentHead | AttachmentContent,
    field: DataField,
    digest: StoredDigest,
    mime: string | undefined,
    sizeBytes: number,
  ): BinaryRepresentation {
    const contentType =
      mime ??
      (field === 'blob_data' || field === 'text_data'
        ? row.mimeType
        : (digest.sniffedType ?? 'application/octet-stream'));
    // One-shot hash: about half the cost of createHash().update().digest() on every view.
    const etag = hash(
      'sha256',
      `${digest.sha256}\n${contentType}${isCompat ? '\nbase64-compat' : ''}`,
      'base64url',
    );
    const stored = parseDateTime(row.lastModifiedDate);
    const now = Date.now();
    // RFC 9110 8.8.2.1: never a Last-Modified later than the response itself.
    const lastModified =
      stored === undefined ? undefined : new Date(Math.min(stored.getTime(), Math.floor(now / 1000) * 1000));
    const isSettled =
      stored !== undefined &&
      now - stored.getTime() >= config.attachmentImmutableGraceSeconds * 1000 &&
      !row.mnemonic.startsWith('REQUEST_');
    return {
      contentType,
      sizeBytes,
      etag: `"${etag}"`,
      lastModified,
      cacheControl: isSettled ? IMMUTABLE : REVALIDATE,
    };
  }

  // Larger fields are streamed chunk by chunk (see attachment-chunks.ts). The compatibility mode
  // decodes the whole value, so it always loads it.
  const maxInlineBytes = isCompat ? undefined : database.dialect.maxInlineBlobBytes;

  /** The body and representation of one field, computing and storing the digest if it is missing. */
  async function loadContent(
    id: number,
    field: DataField | undefined,
    mime: string | undefined,
    reader: RequestReader | undefined,
  ): Promise<LoadedAttachment> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const content = await readAttachmentContent(database, id, field, maxInlineBytes);
      if (content === undefined) throw notFound();
      checkReader(content, reader);
      if (content.sizeBytes === null) throw notFound();
      if (content.bytes !== null) {
        let digest: StoredDigest | undefined = validDigest(content, content.field);
        if (digest === undefined) {
          const computed = await digestField(content.field, content.bytes);
          await storeDigest(database, id, content.lastModifiedDate, content.field, computed);
          digest = computed;
        }
        const bytes = isCompat ? decodeLikeOriginal(content.bytes) : content.bytes;
        return {
          representation: representationOf(content, content.field, digest, mime, bytes.length),
          body: bytes,
        };
      }
      const binaryField = content.field as BinaryField;
      const { lastModifiedDate, sizeBytes } = content;
      const digest =
        validDigest(content, binaryField) ??
        (await digestInChunks(database, id, binaryField, lastModifiedDate, sizeBytes));
      if (digest === undefined) continue; // written while we hashed it: start again from fresh metadata
      return {
        representation: representationOf(content, binaryField, digest, mime, sizeBytes),
        body: () => readInChunks(database, id, binaryField, lastModifiedDate, sizeBytes),
      };
    }
    throw new AppError('unavailable', 'Service Unavailable');
  }

  async function checkMime(mime: string | undefined): Promise<void> {
    if (mime !== undefined && (await findMimeType(database.db, mime)) === undefined) throw badRequest();
  }

  return {
    /** A 200 GET with no conditional headers: one query (bytes included, or the first of the chunks). */
    async readAttachment(query: ViewQuery): Promise<LoadedAttachment> {
      await checkMime(query.mime);
      return loadContent(query.id, query.field, query.mime, query.reader);
    },

    /** The representation of an attachment without its bytes (HEAD, conditional GET). */
    async describeAttachment(query: ViewQuery): Promise<AttachmentView> {
      await checkMime(query.mime);
      const head = await readAttachmentHead(database, query.id);
      if (head === undefined) throw notFound();
      checkReader(head, query.reader);
      const field = query.field ?? (head.sizes.blob_data !== null ? 'blob_data' : 'text_data');
      const size = head.sizes[field];
      if (size === null) throw notFound();
      const load = () => loadContent(query.id, field, query.mime, query.reader);
      const digest = validDigest(head, field);
      // First view since the last write (or compat mode, whose length depends on the bytes): read the
      // one field once; the digest is stored for every later HEAD and 304.
      if (digest === undefined || isCompat) {
        const loaded = await load();
        return { representation: loaded.representation, load: async () => loaded };
      }
      return { representation: representationOf(head, field, digest, query.mime, size), load };
    },

    /**
     * Stores one upload; every refusal is a 422 (or a 415 for content whose type
     * is neither declared nor provable) that writes nothing.
     */
    async createAttachment(input: UploadInput): Promise<number> {
      const problems: Record<string, string> = {};
      const bytes = input.bytes;
      const isEmpty = bytes === undefined || bytes.length === 0;
      if (isEmpty) problems.data = 'The attachment is empty.';
      const type = await uploadTypeOf(input.declaredType, bytes ?? Buffer.alloc(0));
      if (type === undefined && !isEmpty) throw new AppError('unsupported_media_type', UNIDENTIFIED_TYPE);
      let mimeType: string | undefined;
      if (type === undefined) {
        problems.mime_type = 'A Content-Type of the form type/subtype is required.';
      } else {
        mimeType = await findMimeType(database.db, type);
        if (mimeType === undefined) problems.mime_type = `Type ${type} is not allowed.`;
      }
      if (
        !isEmpty &&
        mimeType !== undefined &&
        (await contradictsDeclaredType(mimeType.toLowerCase(), bytes))
      )
        problems.data = `The content is not ${mimeType}.`;
      if (input.fileName !== null && input.fileName.length > MAX_FILE_NAME)
        problems.file_name = `The file name is longer than ${MAX_FILE_NAME} characters.`;
      // PostgreSQL text cannot hold NUL (SQLite can): refused alike on every dialect.
      else if (input.fileName?.includes('\u0000'))
        problems.file_name = 'The file name must not contain a NUL character.';
      else if (
        input.fileName !== null &&
        findUnstorableCharacter(input.fileName, database.schema.maxTextCodePoint) !== undefined
      )
        problems.file_name = unstorableCharacterMessage('The file name');
      const link = await checkLink(input, problems);
      if (Object.keys(problems).length > 0 || mimeType === undefined || bytes === undefined)
        throw new AppError('validation_failed', 'Invalid attachment', { fields: problems });

      // Hashed before the transaction: a write transaction must only wait on the database.
      const digest = await digestField('blob_data', bytes);
      const modifiedDate = nowDateTime();
      return database.writeTransaction(async (trx) => {
        if (link !== undefined) {
          // Checked again inside the transaction: an event deleted meanwhile must not get the link.
          if (!(await eventExists(trx, link.eventId)))
            throw new AppError('validation_failed', 'Invalid attachment', {
              fields: { event_id: 'Event not found.' },
            });
        }
        const id = await insertUpload(trx, {
          requestType: database.schema.uploadRequestType ?? config.defaultRequestType,
          userId: input.userId,
          mimeType,
          bytes,
          fileName: input.fileName,
          modifiedDate,
          link,
        });
        const storedDate = (await readModifiedDate(trx, id)) ?? modifiedDate;
        await upsertDigest(
          trx,
          database.dialect,
          id,
          storedDate,
          'blob_data',
          digest.sha256,
          digest.sniffedType,
        );
        return id;
      });
    },
  };

  async function checkLink(
    input: UploadInput,
    problems: Record<string, string>,
  ): Promise<{ eventId: number; elementTypeId: number } | undefined> {
    if (input.eventId === undefined && input.elementTypeId === undefined) return undefined;
    const parseId = (value: string | undefined, name: 'event_id' | 'element_type_id'): number | undefined => {
      if (value === undefined) {
        problems[name] = `${name} is required with ${name === 'event_id' ? 'element_type_id' : 'event_id'}.`;
        return undefined;
      }
      if (!/^[1-9][0-9]{0,9}$/.test(value) || Number(value) > MAX_ID) {
        problems[name] = `${name} must be a positive integer.`;
        return undefined;
      }
      return Number(value);
    };
    const eventId = parseId(input.eventId, 'event_id');
    const elementTypeId = parseId(input.elementTypeId, 'element_type_id');
    if (eventId !== undefined && !(await eventExists(database.db, eventId)))
      problems.event_id = 'Event not found.';
    if (elementTypeId !== undefined && !(await elementTypeExists(database.db, elementTypeId)))
      problems.element_type_id = 'Element type not found.';
    return eventId !== undefined && elementTypeId !== undefined ? { eventId, elementTypeId } : undefined;
  }
}

export type AttachmentService = ReturnType<typeof createAttachmentService>;
