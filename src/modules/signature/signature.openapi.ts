/** The OpenAPI description of signature import (`src/http/route-doc.ts`). */
import type { RouteDoc } from '../../http/route-doc.ts';
import { stringConst } from '../../http/route-doc.ts';

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

/** The document of sign/add (both URLs). */
export const SIGN_ADD_DOC: RouteDoc = {
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
};

/** sign/add keeps the original's 400 for the methods it does not serve. */
export const SIGN_ADD_REFUSAL_DOC: RouteDoc = {
  tag: 'signature',
  refusal: {
    summary: 'Refused: signature import takes POST only',
    description: 'As the original, other methods answer 400 "Bad request" (not 405).',
    responses: { 400: { description: 'Not a POST.', schema: stringConst('Bad request') } },
  },
};
