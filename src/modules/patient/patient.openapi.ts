/** The OpenAPI description of patient search (`src/http/route-doc.ts`). */
import type { OperationDoc, RouteDoc } from '../../http/route-doc.ts';
import { queryParameter, stringConst } from '../../http/route-doc.ts';

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

const query = queryParameter;

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

/** The search route's document: GET, POST and PUT take the same parameters. */
export const SEARCH_DOC: RouteDoc = {
  tag: 'patient',
  operations: { GET: search('GET'), POST: search('POST'), PUT: search('PUT') },
};
