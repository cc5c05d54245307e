/**
 * STOW-RS Store Instances (PS3.18 10.5): reads a `multipart/related` body part by part from its stream
 * (`@remix-run/multipart-parser`: only the part being read is in memory, and the body is read no faster
 * than the instances are stored) and hands each part to the receiver, which stores and queues it in its
 * own transaction. A part that fails (not DICOM, cut short, refused) fails alone; a body whose framing
 * breaks stops there, keeping the instances already stored.
 */
import type { Readable } from 'node:stream';
import { MIMEType } from 'node:util';
import {
  MaxFileSizeExceededError,
  MaxPartsExceededError,
  MultipartParseError,
  parseMultipartStream,
} from '@remix-run/multipart-parser/node';
import type { FastifyBaseLogger } from 'fastify';
import type { UploadMemory } from '../../http/upload-spool.ts';
import type { FailureReason } from './instance.ts';
import { FAILURE } from './instance.ts';
import type { DicomReceiver, InstanceSource } from './receive.ts';
import type { FailedInstance, StoreOutcome, StoredInstance } from './store-response.ts';

/** Parts read from one request at most. */
export const MAX_STOW_PARTS = 10_000;
/** Bytes of one part's headers at most. */
const MAX_PART_HEADER_BYTES = 16 * 1024;

/** Why a body could not be read at all (nothing stored): answered 400 or 413. */
export class StowBodyError extends Error {
  readonly kind: 'malformed' | 'empty' | 'too-large';
  constructor(kind: 'malformed' | 'empty' | 'too-large', message: string) {
    super(message);
    this.name = 'StowBodyError';
    this.kind = kind;
  }
}

export interface StowRequest {
  readonly body: Readable;
  readonly boundary: string;
  readonly source: InstanceSource;
  readonly expectedStudyUid: string | undefined;
  /** Largest instance, in bytes. */
  readonly maxInstanceBytes: number;
  /** The process's budget of upload bytes held in memory: an instance is processed within it. */
  readonly memory: UploadMemory;
  readonly log: FastifyBaseLogger;
}

/** Stores every instance of the body; throws a {@link StowBodyError} when not one part could be read. */
export async function storeInstances(receiver: DicomReceiver, request: StowRequest): Promise<StoreOutcome> {
  const stored: StoredInstance[] = [];
  const failed: FailedInstance[] = [];
  const fail = (reason: FailureReason, identity?: Omit<FailedInstance, 'reason'>) =>
    failed.push({
      sopClassUid: identity?.sopClassUid,
      sopInstanceUid: identity?.sopInstanceUid,
      reason,
    });
  let parts = 0;
  try {
    for await (const part of parseMultipartStream(request.body, {
      boundary: request.boundary,
      maxFileSize: request.maxInstanceBytes,
      maxParts: MAX_STOW_PARTS,
      maxTotalSize: Number.MAX_SAFE_INTEGER,
      maxHeaderSize: MAX_PART_HEADER_BYTES,
    })) {
      parts += 1;
      if (!isDicomPart(part.headers['content-type'])) {
        request.log.info({ part: parts }, 'STOW-RS part refused: not application/dicom');
        fail(FAILURE.cannotUnderstand);
        continue;
      }
      // As queue add: twice the instance (its Buffer, and the driver's copy when it is bound).
      const release = await request.memory.reserve(2 * part.size);
      let outcome;
      try {
        const bytes = Buffer.concat(part.content);
        outcome = await receiver.receive(bytes, request.source, {
          ...(request.expectedStudyUid === undefined ? {} : { expectedStudyUid: request.expectedStudyUid }),
        });
      } finally {
        release();
      }
      if (outcome.ok) {
        stored.push(outcome);
      } else {
        fail(outcome.reason, outcome);
        request.log[outcome.error === undefined ? 'info' : 'error'](
          { part: parts, reason: outcome.reason, cause: outcome.cause, err: outcome.error },
          'STOW-RS instance not stored',
        );
      }
    }
  } catch (error) {
    // The receiver never throws: whatever was thrown came from reading the body (its framing, its
    // limits, or the connection).
    const isTooLarge = error instanceof MaxFileSizeExceededError;
    request.log.info(
      {
        part: parts + 1,
        error: error instanceof MultipartParseError ? error.name : 'stream',
        stored: stored.length,
      },
      'STOW-RS body stopped',
    );
    if (stored.length === 0 && failed.length === 0)
      throw new StowBodyError(isTooLarge ? 'too-large' : 'malformed', String(error));
    // The part being read when the body broke: its identity is unknown.
    fail(
      isTooLarge || error instanceof MaxPartsExceededError
        ? FAILURE.outOfResources
        : FAILURE.cannotUnderstand,
    );
  }
  if (parts === 0) throw new StowBodyError('empty', 'no part in the body');
  return { stored, failed };
}

/** A part's media type is `application/dicom` (parameters such as `transfer-syntax` aside); none: assumed. */
function isDicomPart(contentType: string | undefined): boolean {
  if (contentType === undefined || contentType.trim() === '') return true;
  try {
    return new MIMEType(contentType).essence === 'application/dicom';
  } catch {
    return false;
  }
}
