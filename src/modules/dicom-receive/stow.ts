/**
 * STOW-RS Store Instances (PS3.18 10.5): reads a `multipart/related` body part by part from its stream
 * (`multipart-spool.ts`: each part's content in memory up to 1 MiB, beyond in a temporary file, and the
 * body read no faster than the instances are stored), loads each part under the process's upload memory
 * budget (`UPLOAD_MEMORY_BYTES`) and hands it to the receiver, which stores and queues it in its own
 * transaction. A part that fails (not DICOM, cut short, refused) fails alone; a body whose framing
 * breaks stops there, keeping the instances already stored.
 */
import type { Readable } from 'node:stream';
import { MIMEType } from 'node:util';
import type { FastifyBaseLogger } from 'fastify';
import type { UploadMemory } from '../../http/upload-spool.ts';
import { loadSpooled } from '../../http/upload-spool.ts';
import type { FailureReason } from './instance.ts';
import { FAILURE, releaseInstanceBytes } from './instance.ts';
import { MultipartFramingError, spoolMultipartParts } from './multipart-spool.ts';
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
  /** Where parts larger than 1 MiB are spooled. */
  readonly spoolDir: string;
  readonly log: FastifyBaseLogger;
}

/** Stores every instance of the body; throws a {@link StowBodyError} when not one part could be read. */
export async function storeInstances(receiver: DicomReceiver, request: StowRequest): Promise<StoreOutcome> {
  const stored: StoredInstance[] = [];
  const failed: FailedInstance[] = [];
  const fail = (
    reason: FailureReason,
    identity?: Pick<FailedInstance, 'sopClassUid' | 'sopInstanceUid'>,
    isTransient = false,
  ) =>
    failed.push({
      sopClassUid: identity?.sopClassUid,
      sopInstanceUid: identity?.sopInstanceUid,
      reason,
      isTransient,
    });
  let parts = 0;
  try {
    for await (const part of spoolMultipartParts(request.body, {
      boundary: request.boundary,
      maxPartBytes: request.maxInstanceBytes,
      maxParts: MAX_STOW_PARTS,
      maxHeaderBytes: MAX_PART_HEADER_BYTES,
      dir: request.spoolDir,
    })) {
      parts += 1;
      let outcome;
      try {
        if (!isDicomPart(part.headers['content-type'])) {
          request.log.info({ part: parts }, 'STOW-RS part refused: not application/dicom');
          fail(FAILURE.cannotUnderstand);
          continue;
        }
        // As queue add: twice a spooled instance (its Buffer, and the driver's copy when it is bound) is
        // reserved before it is loaded; one of at most 1 MiB was read into memory as it arrived.
        const loaded = await loadSpooled(request.memory, [part.bytes]);
        try {
          outcome = await receiver.receive(loaded.buffers[0]!, request.source, {
            ...(request.expectedStudyUid === undefined ? {} : { expectedStudyUid: request.expectedStudyUid }),
          });
        } finally {
          releaseInstanceBytes(loaded.buffers[0]!);
          loaded.release();
        }
      } finally {
        await part.bytes.dispose();
      }
      if (outcome.ok) {
        stored.push(outcome);
      } else {
        fail(outcome.reason, outcome, outcome.isTransient);
        request.log[outcome.error === undefined ? 'info' : 'error'](
          { part: parts, reason: outcome.reason, cause: outcome.cause, err: outcome.error },
          'STOW-RS instance not stored',
        );
      }
    }
  } catch (error) {
    // The receiver never throws: whatever was thrown came from reading the body (its framing, its
    // limits, the spool, or the connection).
    const kind = error instanceof MultipartFramingError ? error.kind : undefined;
    request.log.info(
      { part: parts + 1, error: kind ?? 'stream', stored: stored.length },
      'STOW-RS body stopped',
    );
    if (stored.length === 0 && failed.length === 0)
      throw new StowBodyError(kind === 'too-large' ? 'too-large' : 'malformed', String(error));
    // The part being read when the body broke: its identity is unknown. A part over the size limit
    // or past the part limit will fail again: not a reason to retry.
    fail(
      kind === 'too-large' || kind === 'too-many-parts' ? FAILURE.outOfResources : FAILURE.cannotUnderstand,
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
