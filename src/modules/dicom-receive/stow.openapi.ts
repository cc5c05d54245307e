/** The OpenAPI description of DICOMweb STOW-RS (`src/http/route-doc.ts`). */
import type { OperationDoc, ResponseDoc, RouteDoc } from '../../http/route-doc.ts';
import { stringConst } from '../../http/route-doc.ts';

const STORE_RESPONSE = {
  type: 'object',
  description:
    'DICOM JSON: 00081190 RetrieveURL (empty), 00081198 FailedSOPSequence (ReferencedSOPClassUID, ' +
    'ReferencedSOPInstanceUID, FailureReason), 00081199 ReferencedSOPSequence of the stored instances.',
  required: ['00081190'],
  properties: {
    '00081190': { type: 'object' },
    '00081198': { type: 'object', properties: { vr: { const: 'SQ' }, Value: { type: 'array' } } },
    '00081199': { type: 'object', properties: { vr: { const: 'SQ' }, Value: { type: 'array' } } },
  },
};

const storeResponse = (description: string, headers?: Record<string, string>): ResponseDoc => ({
  description,
  contentType: 'application/dicom+json',
  schema: STORE_RESPONSE,
  ...(headers === undefined ? {} : { headers }),
});

const stowStore = (perStudy: boolean): OperationDoc => ({
  summary: perStudy ? 'Store instances of one study (STOW-RS)' : 'Store instances (STOW-RS)',
  description:
    'Basic auth + OprnApi. A `multipart/related; type="application/dicom"` body of DICOM Part 10 ' +
    'instances, read part by part; each instance is checked, stored and queued as a `dicom_request` in ' +
    'its own transaction (REQUEST_DATA `source` = `STOW-RS`). The answer is the Store Instances Response ' +
    'in DICOM JSON, or XML (`application/dicom+xml`) when the Accept header asks only for that. ' +
    'Failure reasons: C000 unreadable or truncated, C122 transfer syntax, 0122 SOP class, A900 data set ' +
    'does not match (or another study), 0111 duplicate (DICOM_DUPLICATES=refuse), A700 resources, 0110 ' +
    'processing failure.',
  ...(perStudy
    ? {
        parameters: [
          {
            name: 'StudyInstanceUID',
            in: 'path',
            required: true,
            description: 'Every instance must belong to this study.',
            schema: { type: 'string', maxLength: 64 },
          },
        ],
      }
    : {}),
  requestBody: {
    required: true,
    content: {
      'multipart/related': {
        schema: {
          type: 'string',
          description: 'Parts of type application/dicom (a part without Content-Type counts as one).',
        },
      },
    },
  },
  isDatabaseBacked: true,
  responses: {
    200: storeResponse('Every instance was stored and queued.'),
    202: storeResponse('Some instances were stored; the others are in FailedSOPSequence.'),
    400: {
      description:
        'A body that is not a readable multipart body (boundary, framing), a bad study UID, or a query ' +
        'parameter whose name the service reserves (matched_patient_id, event_id, dicom_*, device_*, console_*).',
      schema: { type: 'string' },
    },
    409: storeResponse('No instance was stored; the reasons are in FailedSOPSequence.'),
    413: {
      description: 'A first instance above RAW_BODY_LIMIT_BYTES.',
      schema: stringConst('Payload too large'),
    },
    415: {
      description: 'Not `multipart/related` of `application/dicom`.',
      schema: stringConst('Unsupported Media Type'),
    },
  },
});

export const STUDIES_DOC: RouteDoc = { tag: 'dicomweb', operations: { POST: stowStore(false) } };
export const STUDY_DOC: RouteDoc = { tag: 'dicomweb', operations: { POST: stowStore(true) } };
