/** The OpenAPI description of the request queue intake and status (`src/http/route-doc.ts`). */
import type { OperationDoc, RouteDoc } from '../../http/route-doc.ts';
import { envelope } from '../../http/route-doc.ts';
import { ROUTINE_STATUSES } from '../../db/schema.ts';

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
    'Content-Type header: JSON, urlencoded form, multipart, or raw bytes. The query string is kept as the ' +
    "request's REQUEST_DATA.",
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
    400: {
      description:
        'A body that does not match its Content-Length, or a query parameter whose name the service ' +
        'reserves for what its routines write (matched_patient_id, event_id, dicom_*, device_*, console_*).',
      schema: envelope(),
    },
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
    status: { type: 'string', enum: [...ROUTINE_STATUSES] },
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

const WAITING_FOR_PATIENT = {
  type: ['object', 'null'],
  description:
    'Set when the RUNNING request waits for a patient (its PATIENT_MATCH found none, or several, and waits ' +
    'for its next try), not for a worker; null otherwise.',
  required: ['message', 'reason', 'try_count', 'max_tries', 'next_try_date_time'],
  additionalProperties: false,
  properties: {
    message: { type: 'string', description: 'Waiting for a patient: <reason>; try 3 of 20, next at <time>' },
    reason: { type: ['string', 'null'] },
    try_count: { type: 'integer', description: 'Tries so far.' },
    max_tries: { type: 'integer', description: 'The try after which the routine fails for good.' },
    next_try_date_time: { type: ['string', 'null'], description: 'YYYY-MM-DD HH:MM:SS (as stored).' },
  },
};

const queueStatus: OperationDoc = {
  summary: 'Status of a queued request',
  description:
    'Basic auth + OprnApi. FAILED if a routine failed, RUNNING while one is pending. Shown only to the ' +
    "user who submitted the request and to request admins (OprnEditRequestData); another user's request " +
    'is answered 404, as an unknown id.',
  isDatabaseBacked: true,
  responses: {
    200: {
      description: 'The request and its routines in execution order.',
      schema: {
        type: 'object',
        required: ['request_id', 'status', 'waiting_for_patient', 'routines'],
        additionalProperties: false,
        properties: {
          request_id: { type: 'integer' },
          status: { type: 'string', enum: ['COMPLETE', 'RUNNING', 'FAILED'] },
          waiting_for_patient: WAITING_FOR_PATIENT,
          routines: { type: 'array', items: ROUTINE_STATUS },
        },
      },
    },
    404: {
      description: 'No such request, or one the caller neither submitted nor administers (alike).',
      schema: envelope('Request not found.'),
    },
    422: { description: 'request_id blank or not an integer.', schema: envelope() },
  },
};

/** The Store Instances Response (PS3.18 Annex I) in the DICOM JSON model. */

export const ADD_DOC: RouteDoc = {
  tag: 'request-queue',
  operations: { POST: queueAdd('POST'), PUT: queueAdd('PUT') },
};
export const STATUS_DOC: RouteDoc = { tag: 'request-queue', operations: { GET: queueStatus } };
