/** The OpenAPI description of attachment view and upload (`src/http/route-doc.ts`). */
import type { OperationDoc, RouteDoc } from '../../http/route-doc.ts';
import { envelope, stringConst } from '../../http/route-doc.ts';

const VIEW_QUERY_DESCRIPTIONS = {
  id: 'Attachment data id.',
  attachment: 'Field holding the bytes; the default field when omitted.',
  mime: 'Content-Type to answer with (type/subtype); the stored type when omitted.',
};

const attachmentView: OperationDoc = {
  summary: 'View an attachment',
  description:
    'Basic auth (OprnApi too when ATTACHMENT_REQUIRE_OPRNAPI=on). The raw bytes, with validators for ' +
    "conditional requests (`If-None-Match`, `If-Modified-Since`). A request's private rows (its payload " +
    'parts until filed under an event, an upload filed under no event) are served only to the user who ' +
    'submitted them and to request admins (OprnEditRequestData); anyone else gets the 404 of an unknown id.',
  queryDescriptions: VIEW_QUERY_DESCRIPTIONS,
  parameters: [
    {
      name: 'If-None-Match',
      in: 'header',
      required: false,
      description: 'ETags the client holds.',
      schema: { type: 'string' },
    },
    {
      name: 'If-Modified-Since',
      in: 'header',
      required: false,
      description: 'HTTP date of the client copy (used when If-None-Match is absent).',
      schema: { type: 'string' },
    },
  ],
  isDatabaseBacked: true,
  responses: {
    200: {
      description: 'The bytes, as the stored type or the `mime` asked for.',
      contentType: '*/*',
      schema: { type: 'string', contentMediaType: 'application/octet-stream' },
      headers: {
        'Content-Length': 'Size in bytes.',
        'Cache-Control': '`private, max-age=31536000, immutable` (or `no-cache` for a recent write).',
        'Last-Modified': 'HTTP date.',
        ETag: 'Strong validator.',
        'Content-Transfer-Encoding': '`binary`',
        'Content-Disposition': '`inline` for raster images and PDF, `attachment` for every other type.',
      },
    },
    304: { description: 'The client copy is current.' },
    400: {
      description: 'Missing or malformed id, unknown field, or malformed mime.',
      schema: stringConst('Bad request'),
    },
    403: {
      description: 'The user lacks OprnApi when ATTACHMENT_REQUIRE_OPRNAPI=on.',
      schema: stringConst('403 Forbidden'),
    },
    404: {
      description:
        "No such attachment, or the field is empty; or a request's private row (a queued request's " +
        'payload part until filed under an event, an upload filed under no event) to a caller who is ' +
        'neither the user who submitted it nor a request admin (OprnEditRequestData), answered as an ' +
        'unknown id.',
      schema: stringConst('Not Found'),
    },
  },
};

const attachmentCreate: OperationDoc = {
  summary: 'Upload an attachment',
  description:
    'Basic auth + OprnApi. The body is the file: raw bytes with their Content-Type, or multipart with ' +
    "exactly one file part. A missing Content-Type or a form type (curl's default) is replaced by the " +
    'type the bytes prove, or refused with 415. Errors use the queue envelope.',
  queryDescriptions: {
    event_id: 'Event to attach to (with element_type_id).',
    element_type_id: 'Element type of the attachment group.',
  },
  requestBody: {
    required: true,
    content: {
      '*/*': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } },
      'multipart/form-data': {
        schema: {
          type: 'object',
          description: 'Exactly one file part, under any field name; its type and file name are stored.',
        },
      },
    },
  },
  isDatabaseBacked: true,
  responses: {
    200: {
      description: 'Stored; the attachment data id.',
      schema: {
        type: 'object',
        required: ['id'],
        additionalProperties: false,
        properties: { id: { type: 'integer' } },
      },
    },
    400: { description: 'A malformed query parameter.', schema: envelope('Bad request') },
    413: { description: 'Body above RAW_BODY_LIMIT_BYTES.', schema: envelope() },
    415: {
      description: 'No Content-Type (or a form type) and bytes of no type the service can identify.',
      schema: envelope(),
    },
    422: { description: 'Invalid upload: field -> message.', schema: envelope() },
  },
};

export const VIEW_DOC: RouteDoc = { tag: 'attachment', operations: { GET: attachmentView } };
export const CREATE_DOC: RouteDoc = { tag: 'attachment', operations: { POST: attachmentCreate } };
