/**
 * The DICOM JSON model (PS3.18 F.2) of one stored instance, for WADO-RS `/metadata`: run as a task of the
 * DICOM module's worker threads (`runDicomTask`), never on the event loop. dcmjs reads the file into its
 * dictionary, which is the JSON model already (tag -> `{ vr, Value }`, PN as `{ Alphabetic, ... }`);
 * this module drops the bulk data (values of the binary VRs: the `vr` is kept, with no `Value`), as
 * PS3.18 10.4.1.2 allows, and the file meta information (group 0002, not part of the data set).
 */
import dcmjs from 'dcmjs';

/** Binary VRs: their values are bulk data, left out of the metadata. */
const BULK_VRS = new Set(['OB', 'OD', 'OF', 'OL', 'OV', 'OW', 'UN']);

type JsonElement = { vr: string; Value?: unknown[]; InlineBinary?: unknown; BulkDataURI?: string };
type JsonDataset = Record<string, JsonElement>;

interface DcmjsReader {
  readonly DicomMessage: {
    readFile(buffer: ArrayBuffer, options?: { ignoreErrors?: boolean }): { dict: JsonDataset };
  };
}

/** The data set without bulk data; sequences are walked item by item. */
function withoutBulkData(dataset: JsonDataset): JsonDataset {
  const out: JsonDataset = {};
  for (const [tag, element] of Object.entries(dataset)) {
    if (tag.startsWith('0002')) continue;
    const vr = element.vr;
    if (BULK_VRS.has(vr)) {
      out[tag] = { vr };
      continue;
    }
    if (vr === 'SQ') {
      const items = (element.Value ?? []) as JsonDataset[];
      out[tag] = items.length === 0 ? { vr } : { vr, Value: items.map(withoutBulkData) };
      continue;
    }
    const values = element.Value;
    out[tag] =
      values === undefined || values.length === 0 || values.every((v) => v === '' || v === null)
        ? { vr }
        : { vr, Value: values };
  }
  return out;
}

/** The instance's data set in the DICOM JSON model, as a JSON text (cheap to hand back from a thread). */
export function dicomJsonMetadataTask(bytes: Uint8Array): string {
  const reader = dcmjs.data as unknown as DcmjsReader;
  const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  const { dict } = reader.DicomMessage.readFile(buffer, { ignoreErrors: true });
  return JSON.stringify(withoutBulkData(dict));
}
