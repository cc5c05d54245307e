/** The OpenAPI description of DICOMweb QIDO-RS and WADO-RS (`src/http/route-doc.ts`). */
import type { OperationDoc, ResponseDoc, RouteDoc } from '../../http/route-doc.ts';
import { queryParameter, stringConst } from '../../http/route-doc.ts';

const AUTHORIZATION =
  'Basic auth (with OprnApi when ATTACHMENT_REQUIRE_OPRNAPI is on), as attachment view: a study filed ' +
  "to a patient's event is seen by every such caller; an instance not filed only by the user who " +
  'sent it and by request admins (OprnEditRequestData). Every answer is audited as a read.';

const PATH_NAMES: Readonly<Record<string, string>> = {
  StudyInstanceUID: 'Study Instance UID.',
  SeriesInstanceUID: 'Series Instance UID.',
  SOPInstanceUID: 'SOP Instance UID.',
  frames: 'One frame number (1 for a single-frame image).',
};

/** The path parameters of a Fastify URL (`:name`). */
function pathParameters(url: string): unknown[] {
  return [...url.matchAll(/:(\w+)/g)].map(([, name]) => ({
    name,
    in: 'path',
    required: true,
    description: PATH_NAMES[name!] ?? name,
    schema: { type: 'string', maxLength: 64 },
  }));
}

const DICOM_JSON_ARRAY = {
  type: 'array',
  description: 'DICOM JSON model (PS3.18 F.2): one object per answer, tag -> { vr, Value }.',
  items: { type: 'object' },
};

const notFound: ResponseDoc = {
  description: 'Nothing of that UID that the caller may see.',
  schema: stringConst('Not Found'),
};
const badRequest: ResponseDoc = {
  description: 'A UID that is not one (digits and dots, at most 64 characters), or a bad parameter.',
  schema: { type: 'string' },
};
const notAcceptable: ResponseDoc = {
  description: 'The Accept header allows nothing this route produces.',
  schema: stringConst('Not Acceptable'),
};

const LEVEL_NAMES = { study: 'studies', series: 'series', instance: 'instances' } as const;

export function SEARCH_DOC(level: 'study' | 'series' | 'instance', url: string): RouteDoc {
  const search: OperationDoc = {
    summary: `Search for ${LEVEL_NAMES[level]} (QIDO-RS)`,
    description:
      `${AUTHORIZATION} Matching keys by keyword or tag (\`PatientID=123\`, \`00100020=123\`): single ` +
      'value, `*` and `?` wildcards, DA/TM ranges (`20240101-20240301`), UID lists (`,`), universal ' +
      "(empty). Patient ID is the filed patient's identifier for INSTITUTION_CODE. At most " +
      'DICOM_QR_MAX_ANSWERS answers (then a Warning header).',
    parameters: [
      ...pathParameters(url),
      queryParameter(
        'includefield',
        'Attributes to add to each answer (repeated or comma-separated), or `all`.',
      ),
      queryParameter('limit', 'At most this many answers.', { type: 'integer', minimum: 1 }),
      queryParameter('offset', 'Skip this many matches.', { type: 'integer', minimum: 0 }),
      queryParameter('fuzzymatching', 'Accepted and ignored (names match without case or accents).', {
        type: 'boolean',
      }),
    ],
    isDatabaseBacked: true,
    responses: {
      200: {
        description:
          'The matches; with a Warning header (299) when there were more matches than answered, or ' +
          'keys the service does not match on.',
        contentType: 'application/dicom+json',
        schema: DICOM_JSON_ARRAY,
      },
      204: { description: 'No match.' },
      400: badRequest,
      406: notAcceptable,
    },
  };
  return { tag: 'dicomweb', operations: { GET: search } };
}

export function RETRIEVE_DOC(url: string): RouteDoc {
  const retrieve: OperationDoc = {
    summary: 'Retrieve instances (WADO-RS)',
    description:
      `${AUTHORIZATION} The instances as received, byte for byte, one part each (with its ` +
      'Content-Length), streamed. Accept: multipart/related; type="application/dicom" (transfer-syntax ' +
      'absent or `*`: instances are not transcoded).',
    parameters: pathParameters(url),
    isDatabaseBacked: true,
    responses: {
      200: {
        description: 'The instances.',
        contentType: 'multipart/related',
        schema: { type: 'string' },
      },
      400: badRequest,
      404: notFound,
      406: notAcceptable,
      413: { description: 'More instances than one retrieve sends.', schema: { type: 'string' } },
    },
  };
  return { tag: 'dicomweb', operations: { GET: retrieve } };
}

export function METADATA_DOC(url: string): RouteDoc {
  const metadata: OperationDoc = {
    summary: 'Retrieve metadata (WADO-RS)',
    description: `${AUTHORIZATION} Each instance's data set in DICOM JSON, bulk data left out (vr only).`,
    parameters: pathParameters(`${url}/metadata`),
    isDatabaseBacked: true,
    responses: {
      200: { description: 'The metadata.', contentType: 'application/dicom+json', schema: DICOM_JSON_ARRAY },
      400: badRequest,
      404: notFound,
      406: notAcceptable,
    },
  };
  return { tag: 'dicomweb', operations: { GET: metadata } };
}

export function RENDERED_DOC(url: string): RouteDoc {
  const rendered: OperationDoc = {
    summary: 'Retrieve a rendered image (WADO-RS)',
    description:
      `${AUTHORIZATION} The image the service extracted from the instance's frame (its DICOM_IMAGE_n ` +
      'attachment, JPEG or PNG as extracted); 404 when none was extracted.',
    parameters: pathParameters(url),
    isDatabaseBacked: true,
    responses: {
      200: {
        description: 'The image.',
        contentType: 'image/*',
        schema: { type: 'string' },
      },
      400: badRequest,
      404: notFound,
      406: notAcceptable,
    },
  };
  return { tag: 'dicomweb', operations: { GET: rendered } };
}
