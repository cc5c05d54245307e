/**
 * DICOMweb WADO-RS (PS3.18 10.4): a study, a series or an instance as `multipart/related;
 * type="application/dicom"` of the received originals, byte for byte; their metadata in the DICOM JSON
 * model; the image the service extracted from an instance (`/rendered`, `/frames/{n}/rendered`).
 *
 * - Streaming: the instances are listed first (metadata only), then sent one at a time, each read in
 *   the dialect's slices (attachment-data's `readBlobSlices`) as the client reads: one slice in memory
 *   per retrieve, no connection held between slices. Each part has its Content-Length.
 * - Metadata: each instance read whole, one at a time, and parsed on a DICOM thread
 *   (`dicomweb-metadata.task.ts`), never on the event loop.
 * - Who sees what (attachment view's rule on the instance's `REQUEST_BLOB` row, as the QIDO-RS
 *   searches): filed under an event, every caller of the route; not filed (a request's private row),
 *   its submitter and request admins. What the caller may not see is answered as what does not exist
 *   (404).
 */
import { randomBytes } from 'node:crypto';
import type { Config } from '../../config.ts';
import type { Database } from '../../db/database.ts';
import { readBlobSlices } from '../attachment-data/index.ts';
import type { DicomTask } from '../dicom/index.ts';
import { runDicomTask } from '../dicom/index.ts';
import type { RequestReader } from '../user/index.ts';
import { mayReadRequest } from '../user/index.ts';
import type { ExtractedImageRow, FiledPatient, StoredInstanceRow } from './qr.queries.ts';
import { readExtractedImage, readFiledPatients, readStoredInstances } from './qr.queries.ts';

/** Instances one retrieve sends at most (a study, a series); more are a 413-like refusal by the route. */
export const MAX_RETRIEVE_INSTANCES = 20_000;

const METADATA_TASK: DicomTask = {
  moduleUrl: new URL('./dicomweb-metadata.task.ts', import.meta.url),
  exportName: 'dicomJsonMetadataTask',
  purpose: 'dicomweb-metadata',
};

export interface WadoScope {
  readonly studyUid: string;
  readonly seriesUid?: string;
  readonly sopUid?: string;
}

export interface Retrievable {
  readonly instances: readonly StoredInstanceRow[];
  /** The patient the study is filed to; undefined when it is not filed. */
  readonly patient: FiledPatient | undefined;
  /** More instances than {@link MAX_RETRIEVE_INSTANCES}. */
  readonly isOverLimit: boolean;
}

export interface WadoRetriever {
  /** The instances of `scope` that `reader` may see, in series then instance order. */
  find(scope: WadoScope, reader: RequestReader): Promise<Retrievable>;
  /** The body of a `multipart/related` answer of `instances` with `boundary`, chunk by chunk. */
  multipart(instances: readonly StoredInstanceRow[], boundary: string): AsyncGenerator<Buffer>;
  /** The DICOM JSON array of `instances`, chunk by chunk; Patient ID as the filed patient's identifier. */
  metadata(
    instances: readonly StoredInstanceRow[],
    patient: FiledPatient | undefined,
  ): AsyncGenerator<Buffer>;
  /** The image extracted from frame `frame` of `instance`, if any. */
  rendered(instance: StoredInstanceRow, frame: number): Promise<ExtractedImageRow | undefined>;
  /** The bytes of an extracted image, chunk by chunk. */
  imageBytes(image: ExtractedImageRow): AsyncGenerator<Buffer>;
}

/** A multipart boundary that no instance is likely to hold (and that the client cannot choose). */
export function newBoundary(): string {
  return `CRA-DICOMweb-${randomBytes(18).toString('base64url')}`;
}

export function createWadoRetriever(deps: {
  readonly database: Database;
  readonly config: Config;
}): WadoRetriever {
  const { database, config } = deps;
  const bytesOf = (instance: { attachmentId: number; modifiedDate: string; sizeBytes: number }) =>
    readBlobSlices(database.dialect, instance.attachmentId, 'blob_data', {
      modifiedDate: instance.modifiedDate,
      sizeBytes: instance.sizeBytes,
    });

  return {
    async find(scope, reader) {
      const rows = await readStoredInstances(database.db, { ...scope, limit: MAX_RETRIEVE_INSTANCES + 1 });
      const filed = await readFiledPatients(database.db, [scope.studyUid], config.institutionCode);
      const patient = filed.get(scope.studyUid);
      const visible = rows.filter((r) => r.isFiled || mayReadRequest(reader, r.submitterUserId));
      return {
        instances: visible.slice(0, MAX_RETRIEVE_INSTANCES),
        patient,
        isOverLimit: visible.length > MAX_RETRIEVE_INSTANCES,
      };
    },

    async *multipart(instances, boundary) {
      for (const instance of instances) {
        yield Buffer.from(
          `--${boundary}\r\nContent-Type: application/dicom\r\nContent-Length: ${instance.sizeBytes}\r\n\r\n`,
        );
        yield* bytesOf(instance);
        yield Buffer.from('\r\n');
      }
      yield Buffer.from(`--${boundary}--\r\n`);
    },

    async *metadata(instances, patient) {
      yield Buffer.from('[');
      let first = true;
      for (const instance of instances) {
        const chunks: Buffer[] = [];
        for await (const chunk of bytesOf(instance)) chunks.push(chunk);
        const json = (await runDicomTask(METADATA_TASK, Buffer.concat(chunks), config)) as string;
        let text = json;
        if (patient?.identifier !== undefined) {
          const dataset = JSON.parse(json) as Record<string, unknown>;
          dataset['00100020'] = { vr: 'LO', Value: [patient.identifier] };
          text = JSON.stringify(dataset);
        }
        yield Buffer.from(first ? text : `,${text}`);
        first = false;
      }
      yield Buffer.from(']');
    },

    rendered(instance, frame) {
      return readExtractedImage(database.db, instance.requestId, frame);
    },

    imageBytes(image) {
      return bytesOf(image);
    },
  };
}
