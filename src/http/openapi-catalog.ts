/**
 * What the routes cannot say about themselves, for the OpenAPI document (`openapi.ts`): summaries, the
 * parameters of routes that read their input by hand (patient search must answer `[]` for any malformed
 * value, the queue decodes by content type), request bodies, and the success and route-specific error
 * responses. 401/403/429 of guarded routes and 500/503 are added by the builder from the route itself.
 * Keyed by lower-case URL (the router is case-insensitive), then by method; a method of a URL that is
 * not listed is documented as refused (405 with Allow, or the endpoint's `otherMethods`).
 * `openapi.test.ts` sends real requests and checks every status and body against this file.
 */
import type { ErrorBodyShape } from '../errors.ts';

type JsonSchema = Record<string, unknown>;

export interface ResponseDoc {
  readonly description: string;
  /** Body schema; omitted for empty bodies. */
  readonly schema?: JsonSchema;
  /** Defaults to `application/json`. */
  readonly contentType?: string;
  /** Header name -> description. */
  readonly headers?: Readonly<Record<string, string>>;
}

export interface OperationDoc {
  readonly summary: string;
  readonly description?: string;
  /** Parameters not in the route's `schema.querystring` (query, header, cookie), as OpenAPI objects. */
  readonly parameters?: readonly unknown[];
  /** Descriptions of the query parameters that come from `schema.querystring`. */
  readonly queryDescriptions?: Readonly<Record<string, string>>;
  readonly requestBody?: unknown;
  readonly responses: Readonly<Record<string, ResponseDoc>>;
  /** Touches the database or the overload gate: 500 and 503 are documented. */
  readonly isDatabaseBacked?: boolean;
}

export interface EndpointDoc {
  readonly tag: string;
  readonly operations: Readonly<Record<string, OperationDoc>>;
  /** How the URL answers the methods it does not serve, when not the usual 405. */
  readonly otherMethods?: OperationDoc;
}

/** A JSON string body of exactly `text`. */
export function stringConst(text: string): JsonSchema {
  return { type: 'string', const: text };
}

const ENVELOPE_MESSAGE = {
  type: 'object',
  additionalProperties: { type: 'string' },
  description: 'Field name (or `system`, `data`) -> message.',
};

/** The queue envelope `{"success":0,"message":{...}}`; with `system` fixed when given. */
export function envelope(system?: string): JsonSchema {
  return {
    type: 'object',
    required: ['success', 'message'],
    additionalProperties: false,
    properties: {
      success: { const: 0 },
      message:
        system === undefined
          ? ENVELOPE_MESSAGE
          : {
              type: 'object',
              required: ['system'],
              additionalProperties: false,
              properties: { system: { const: system } },
            },
    },
  };
}

/** The error body of `shape` for a generic error (`message` undefined: any text). */
export function errorSchemaOf(shape: ErrorBodyShape, message: string | undefined): JsonSchema {
  if (shape === 'envelope') return envelope(message);
  return message === undefined ? { type: 'string' } : stringConst(message);
}

const IDENTIFIER = {
  type: 'object',
  required: ['title', 'value'],
  additionalProperties: false,
  properties: { title: { type: 'string' }, value: { type: 'string' } },
};

const PATIENT_RESULT = {
  type: 'object',
  required: [
    'id',
    'first_name',
    'last_name',
    'age',
    'genderletter',
    'dob',
    'is_deceased',
    'patient_identifiers',
    'primary_patient_identifiers',
  ],
  additionalProperties: false,
  properties: {
    id: { type: 'integer' },
    first_name: { type: 'string' },
    last_name: { type: 'string' },
    age: { type: 'string', description: 'Whole years, or `Deceased`.' },
    genderletter: { type: ['string', 'null'] },
    dob: { type: ['string', 'null'], description: 'YYYY-MM-DD.' },
    is_deceased: { type: 'boolean' },
    patient_identifiers: { type: 'array', items: IDENTIFIER },
    primary_patient_identifiers: {
      anyOf: [IDENTIFIER, { type: 'null' }],
      description: 'Null when `patient_identifier_type` is given.',
    },
  },
};

const query = (name: string, description: string, schema: JsonSchema = { type: 'string' }) => ({
  name,
  in: 'query',
  required: false,
  description,
  schema,
});

const SEARCH_PARAMETERS = [
  {
    ...query('term', 'Name ("last, first", "first last"), hospital or NHS number, or a partial match.'),
    required: true,
  },
  query('patient_identifier_type', 'Identifier type id: search within that type only.'),
  query('pageSize', 'Results per page (default 20, at most 100); malformed values fall back.'),
  query('Patient_page', 'Page number from 1; malformed values fall back to 1.'),
  query('sort_by', 'Sort column 0-5; anything else keeps the default order.'),
  query('sort_dir', '`asc` or `desc`, with sort_by.'),
  { name: 'institution_id', in: 'cookie', required: false, schema: { type: 'string' } },
  { name: 'site_id', in: 'cookie', required: false, schema: { type: 'string' } },
];

const search = (method: string): OperationDoc => ({
  summary: 'Search patients',
  description:
    'Basic auth + OprnApi. Parameters come from the query string, then (POST/PUT) an urlencoded form ' +
    'body. A malformed or unmatched term answers 200 `[]`, never 400.',
  parameters: SEARCH_PARAMETERS,
  ...(method === 'GET'
    ? {}
    : {
        requestBody: {
          required: false,
          content: {
            'application/x-www-form-urlencoded': {
              schema: { type: 'object', additionalProperties: { type: 'string' } },
            },
          },
        },
      }),
  isDatabaseBacked: true,
  responses: {
    200: {
      description: 'Matching patients; `[]` when none.',
      schema: { type: 'array', items: PATIENT_RESULT },
    },
    ...(method === 'GET'
      ? {}
      : {
          400: { description: 'A body that cannot be parsed.', schema: stringConst('Bad request') },
          413: { description: 'Form body above 16 KiB.', schema: stringConst('Payload too large') },
          415: {
            description: 'A body of a type other than a form or JSON.',
            schema: stringConst('Unsupported Media Type'),
          },
        }),
  },
});

const SIGN_ADD_BODY = {
  type: 'object',
  required: ['unique_identifier', 'extra_info', 'image'],
  properties: {
    unique_identifier: { type: 'string', description: 'Unique code of the event.' },
    extra_info: {
      description: 'JSON text (or object) with `e_id` and `e_t_id`, positive integers.',
      type: ['string', 'object'],
    },
    image: { type: 'string', description: 'Base64 PNG or JPEG (canonical base64, padded).' },
    origImage: { type: 'string', description: 'Base64 original before cropping; stored instead of image.' },
    original_log_id: { type: ['integer', 'string'], description: 'Log id of the original, for a re-crop.' },
  },
};

const SIGNATURE_MESSAGES = [
  'Missing unique_identifier',
  'Missing element and element type ids',
  'Missing element id.',
  'Missing element type id.',
  'Event not found',
  'Invalid UniqueCode or wrong event',
  'Missing image',
  'Invalid image data',
  'Invalid original_log_id',
];

const signAdd: EndpointDoc = {
  tag: 'signature',
  operations: {
    POST: {
      summary: 'Import a signature',
      description:
        'Open (no authentication), for signature pads; rate-limited per client address. The body is ' +
        'JSON whatever its Content-Type. Every answer carries `Access-Control-Allow-Origin: *`. Check ' +
        'the body as well as the status: a failed save answers 200.',
      requestBody: { required: true, content: { 'application/json': { schema: SIGN_ADD_BODY } } },
      isDatabaseBacked: true,
      responses: {
        200: {
          description: 'Saved, or the save failed.',
          schema: { type: 'string', enum: ['Correct signature saved!', 'Failed signature save!'] },
          headers: { 'Access-Control-Allow-Origin': '`*`' },
        },
        400: { description: 'Not a JSON object, or an empty body.', schema: stringConst('Bad request') },
        413: { description: 'Body above SIGN_BODY_LIMIT_BYTES.', schema: stringConst('Payload too large') },
        422: {
          description: 'Invalid signature: one or more messages, joined.',
          schema: {
            type: 'string',
            pattern: `^(${SIGNATURE_MESSAGES.map((m) => m.replace(/[.]/g, '\\.')).join('|')})`,
          },
        },
        429: {
          description: 'Too many imports from this address.',
          schema: stringConst('Too Many Requests'),
          headers: { 'Retry-After': 'Seconds to wait.' },
        },
      },
    },
    OPTIONS: {
      summary: 'CORS preflight of signature import',
      responses: {
        204: {
          description: 'Allowed: POST from any origin.',
          headers: {
            'Access-Control-Allow-Origin': '`*`',
            'Access-Control-Allow-Methods': '`POST, OPTIONS`',
            'Access-Control-Allow-Headers': '`Content-Type`',
          },
        },
      },
    },
  },
  otherMethods: {
    summary: 'Refused: signature import takes POST only',
    description: 'As the original, other methods answer 400 "Bad request" (not 405).',
    responses: { 400: { description: 'Not a POST.', schema: stringConst('Bad request') } },
  },
};

const VIEW_QUERY_DESCRIPTIONS = {
  id: 'Attachment data id.',
  attachment: 'Field holding the bytes; the default field when omitted.',
  mime: 'Content-Type to answer with (type/subtype); the stored type when omitted.',
};

const attachmentView: OperationDoc = {
  summary: 'View an attachment',
  description:
    'Basic auth (OprnApi too when ATTACHMENT_REQUIRE_OPRNAPI=on). The raw bytes, with validators for ' +
    'conditional requests (`If-None-Match`, `If-Modified-Since`).',
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
      description:
        "A queued request's payload part (not filed under an event) to a caller who is neither a " +
        'request admin (OprnEditRequestData) nor the user who stored it; or the user lacks OprnApi ' +
        'when ATTACHMENT_REQUIRE_OPRNAPI=on.',
      schema: stringConst('403 Forbidden'),
    },
    404: { description: 'No such attachment, or the field is empty.', schema: stringConst('Not Found') },
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

const QUEUE_ADD_BODY = {
  type: 'object',
  properties: {
    request_type: {
      type: 'string',
      description: 'Kind of request, when not in the query; DEFAULT_REQUEST_TYPE when omitted.',
    },
    system_message: { type: 'string', description: 'Free text, when not in the query.' },
    data: { description: 'The payload (a JSON object, or `data[...]` form fields). Required.' },
  },
};

const QUEUE_ADD_MULTIPART = {
  type: 'object',
  description:
    'Any number of file parts, each stored as its own payload row named after its field (`file[]` ' +
    'parts become file, file_2, ...), plus text fields: `data[...]`, `request_type`, `system_message`.',
  properties: {
    request_type: QUEUE_ADD_BODY.properties.request_type,
    system_message: QUEUE_ADD_BODY.properties.system_message,
    data: { description: 'Form fields, nested with brackets: `data[patient][hos_num]`.' },
  },
  additionalProperties: { type: 'string', contentMediaType: 'application/octet-stream' },
};

const queueAdd = (method: string): OperationDoc => ({
  summary: `Add to the request queue${method === 'PUT' ? ' (PUT)' : ''}`,
  description:
    'Basic auth + OprnApi. The handler is chosen by the `content_type` query parameter, else the ' +
    'Content-Type header: JSON, urlencoded form, multipart, or raw bytes.',
  requestBody: {
    required: true,
    content: {
      'application/json': { schema: QUEUE_ADD_BODY },
      'application/x-www-form-urlencoded': { schema: QUEUE_ADD_BODY },
      'multipart/form-data': { schema: QUEUE_ADD_MULTIPART },
      '*/*': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } },
    },
  },
  isDatabaseBacked: true,
  responses: {
    200: {
      description: 'Queued.',
      schema: {
        type: 'object',
        required: ['request_id'],
        additionalProperties: false,
        properties: { request_id: { type: 'integer' } },
      },
    },
    400: { description: 'A body that does not match its Content-Length.', schema: envelope() },
    413: { description: 'Body above its limit.', schema: envelope() },
    422: { description: 'Validation failure: field -> message.', schema: envelope() },
  },
});

const ROUTINE_STATUS = {
  type: 'object',
  required: [
    'routine_name',
    'status',
    'try_count',
    'execute_sequence',
    'next_try_date_time',
    'execution_log',
  ],
  additionalProperties: false,
  properties: {
    routine_name: { type: 'string' },
    status: { type: 'string', enum: ['NEW', 'RETRY', 'COMPLETE', 'FAILED', 'VOID', 'PAUSE'] },
    try_count: { type: 'integer' },
    execute_sequence: { type: 'integer' },
    next_try_date_time: { type: ['string', 'null'], description: 'YYYY-MM-DD HH:MM:SS (UTC).' },
    execution_log: {
      type: ['string', 'null'],
      description:
        "The last execution's log: routine lines and the failure reason; stacks, messages that could " +
        'quote request data, and credentials are left out. Null before the first try.',
    },
  },
};

const queueStatus: OperationDoc = {
  summary: 'Status of a queued request',
  description: 'Basic auth + OprnApi. FAILED if a routine failed, RUNNING while one is pending.',
  isDatabaseBacked: true,
  responses: {
    200: {
      description: 'The request and its routines in execution order.',
      schema: {
        type: 'object',
        required: ['request_id', 'status', 'routines'],
        additionalProperties: false,
        properties: {
          request_id: { type: 'integer' },
          status: { type: 'string', enum: ['COMPLETE', 'RUNNING', 'FAILED'] },
          routines: { type: 'array', items: ROUTINE_STATUS },
        },
      },
    },
    404: { description: 'No such request.', schema: envelope('Request not found.') },
    422: { description: 'request_id blank or not an integer.', schema: envelope() },
  },
};

/** The Store Instances Response (PS3.18 Annex I) in the DICOM JSON model. */
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
      description: 'A body that is not a readable multipart body (boundary, framing), or a bad study UID.',
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

const STATUS_BODY = (values: string[]) => ({
  type: 'object',
  required: ['status'],
  additionalProperties: false,
  properties: { status: { type: 'string', enum: values } },
});

export const ENDPOINT_DOCS = new Map<string, EndpointDoc>([
  [
    '/api/v1/patient/search',
    { tag: 'patient', operations: { GET: search('GET'), POST: search('POST'), PUT: search('PUT') } },
  ],
  ['/api/v1/sign/add', signAdd],
  ['/api/sign/add', { ...signAdd, tag: 'signature' }],
  ['/api/v1/attachmentdisplay/view', { tag: 'attachment', operations: { GET: attachmentView } }],
  ['/api/v1/attachmentdisplay/create', { tag: 'attachment', operations: { POST: attachmentCreate } }],
  [
    '/api/v1/request/queue/add',
    { tag: 'request-queue', operations: { POST: queueAdd('POST'), PUT: queueAdd('PUT') } },
  ],
  ['/api/v1/request/queue/status', { tag: 'request-queue', operations: { GET: queueStatus } }],
  ['/api/v1/dicomweb/studies', { tag: 'dicomweb', operations: { POST: stowStore(false) } }],
  ['/api/v1/dicomweb/studies/:studyinstanceuid', { tag: 'dicomweb', operations: { POST: stowStore(true) } }],
  [
    '/healthz',
    {
      tag: 'operations',
      operations: {
        GET: {
          summary: 'Liveness',
          responses: { 200: { description: 'The process answers.', schema: STATUS_BODY(['ok']) } },
        },
      },
    },
  ],
  [
    '/readyz',
    {
      tag: 'operations',
      operations: {
        GET: {
          summary: 'Readiness',
          description: 'Ready when the database answers.',
          responses: {
            200: { description: 'Ready.', schema: STATUS_BODY(['ready']) },
            503: {
              description: 'The database is unreachable.',
              schema: STATUS_BODY(['database unreachable']),
            },
          },
        },
      },
    },
  ],
  [
    '/metrics',
    {
      tag: 'operations',
      operations: {
        GET: {
          summary: 'Prometheus metrics',
          description:
            'Text exposition format 0.0.4. Served only when METRICS=on (open, or the METRICS_TOKEN bearer ' +
            'token when set) or METRICS=basic (Basic + OprnApi, or the bearer token).',
          isDatabaseBacked: false,
          responses: {
            200: {
              description: 'The metrics.',
              contentType: 'text/plain; version=0.0.4',
              schema: { type: 'string' },
            },
          },
        },
      },
    },
  ],
  [
    '/api/v1/openapi.json',
    {
      tag: 'operations',
      operations: {
        GET: {
          summary: 'This OpenAPI 3.1 document',
          responses: {
            200: {
              description: 'The document.',
              schema: {
                type: 'object',
                required: ['openapi', 'info', 'paths'],
                properties: {
                  openapi: { const: '3.1.0' },
                  info: { type: 'object' },
                  paths: { type: 'object' },
                },
              },
            },
          },
        },
      },
    },
  ],
  [
    '/docs',
    {
      tag: 'operations',
      operations: {
        GET: {
          summary: 'This documentation as an HTML page',
          responses: {
            200: { description: 'The page.', contentType: 'text/html', schema: { type: 'string' } },
          },
        },
      },
    },
  ],
]);
