// test-needs: long
/**
 * Fuzz test of every endpoint (bad input): thousands of random and malformed requests per
 * dialect (bodies, headers, query strings, methods, content types, paths), written byte for byte on raw
 * sockets. For every request: no 5xx, an answer at all, and no row or file written unless the request was
 * accepted (sign/add writes its one status-3 log row for a refused POST by design). Afterwards the app
 * is still healthy and still serves valid requests.
 *
 * Deterministic: `FUZZ_SEED` (default below) seeds fast-check; a failure prints the seed, the
 * counterexample path and the shrunk request. `FUZZ_RUNS_SCALE` scales the number of requests (e.g. 10
 * for a long local run). Body limits are lowered (see LIMIT_ENV) so that bodies at and past the limits
 * stay cheap; the code paths are those of the default limits.
 */
import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { sql } from 'kysely';
import type { TestUser } from '../factories.ts';
import { basicHeader, createUser } from '../factories.ts';
import {
  PDF_BYTES,
  PNG_BYTES,
  createAttachment,
  createEventWithElementType,
} from '../factories-attachment.ts';
import type { SignableEvent } from '../factories-signature.ts';
import { b64, createSignableEvent, makeJpeg, makePng } from '../factories-signature.ts';
import type { TestApp } from '../harness.ts';
import { forEachDialect, startTestApp } from '../harness.ts';
import { buildDicomFile } from '../factories-queue.ts';
import type { RawRequest, RawResponse } from './raw-http.ts';
import { sendRaw } from './raw-http.ts';

const SEED = Number(process.env.FUZZ_SEED ?? 20261122);
const SCALE = Number(process.env.FUZZ_RUNS_SCALE ?? 1);
const KiB = 1024;
const SIGN_LIMIT = 128 * KiB;
const JSON_LIMIT = 64 * KiB;
const RAW_LIMIT = 256 * KiB;
const LIMIT_ENV = {
  SIGN_BODY_LIMIT_BYTES: String(SIGN_LIMIT),
  JSON_BODY_LIMIT_BYTES: String(JSON_LIMIT),
  RAW_BODY_LIMIT_BYTES: String(RAW_LIMIT),
  // The overload guard stays off: any 503 is then a bug.
  MAX_CONCURRENT_HEAVY_REQUESTS: '0',
};

/** Every table a request can write. */
const WRITTEN_TABLES = [
  'request',
  'attachment_data',
  'request_routine',
  'signature_import_log',
  'protected_file',
  'ophcocvi_signature',
  'event_attachment_item',
  'event_attachment_group',
] as const;
type Table = (typeof WRITTEN_TABLES)[number];
type Snapshot = Record<Table | 'files', number>;

// -------------------------------------------------------------------------------------------------
// The world the requests run against

interface World {
  readonly app: TestApp;
  readonly port: number;
  readonly user: TestUser;
  /** Authenticated, without `OprnApi`. */
  readonly roleless: TestUser;
  readonly event: SignableEvent;
  readonly attachmentIds: readonly number[];
  readonly target: { eventId: number; elementTypeId: number };
  requestIds: number[];
  /** Files in the store after the last counted request. */
  files: number;
}

/**
 * Row counts of every written table, and the files in the store. Only the signature module writes files,
 * and only for a POST: counting them (a recursive readdir) is skipped for other requests, which keep the
 * last count; each property ends by checking that the store holds exactly one file per protected_file row,
 * so a stray file written by any request is caught there.
 */
async function snapshot(app: TestApp, filesKnown?: number): Promise<Snapshot> {
  const columns = WRITTEN_TABLES.map((t) => `(select count(*) from ${t}) as ${t}`).join(', ');
  const result = await sql.raw<Record<Table, number | string>>(`select ${columns}`).execute(app.db);
  const row = result.rows[0]!;
  const counts = Object.fromEntries(WRITTEN_TABLES.map((t) => [t, Number(row[t])])) as Record<Table, number>;
  return { ...counts, files: filesKnown ?? (await countFiles(app.filesDir)) };
}

async function countFiles(dir: string): Promise<number> {
  try {
    const entries = await readdir(dir, { recursive: true, withFileTypes: true });
    return entries.filter((e) => e.isFile()).length;
  } catch {
    return 0;
  }
}

// -------------------------------------------------------------------------------------------------
// Generators

const SIGN_PATH = '/api/v1/sign/add';
const SEARCH_PATH = '/api/v1/patient/search';
const VIEW_PATH = '/api/v1/attachmentdisplay/view';
const CREATE_PATH = '/api/v1/attachmentdisplay/create';
const ADD_PATH = '/api/v1/request/queue/add';
const STATUS_PATH = '/api/v1/request/queue/status';

/** What the generator meant; the oracle judges by the answer, not by this. */
interface FuzzCase {
  readonly request: RawRequest;
  readonly label: string;
}

const ODD_STRINGS = [
  '',
  ' ',
  '%',
  '%zz',
  '%E0%A4%A',
  '%00',
  '\u0000',
  '..%2F..%2Fetc%2Fpasswd',
  '<script>alert(1)</script>',
  "' OR 1=1 --",
  '9'.repeat(30),
  '-1',
  '0',
  '1e3',
  'NaN',
  'Infinity',
  '1.5',
  '0x10',
  ' 7',
  '[]',
  '{}',
  'null',
  'true',
  '\uD800',
  '🙂',
  'Ä'.repeat(300),
  '*',
  '%25',
  '+',
];

const sizeArb = fc.constantFrom(100, 1000, 5000, 20_000);
const longString = fc.tuple(sizeArb, fc.constantFrom('a', 'é', '%', '9', '🙂')).map(([n, c]) => c.repeat(n));

const weirdString: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.string() },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 20 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) },
  { weight: 4, arbitrary: fc.constantFrom(...ODD_STRINGS) },
  { weight: 2, arbitrary: fc.integer().map(String) },
  { weight: 1, arbitrary: longString },
);

/** One query string value as it goes on the wire: encoded, raw, or with broken percent-encoding. */
function encodeValue(value: string, mode: 'encoded' | 'raw' | 'broken'): string {
  if (mode === 'raw') return value.replace(/[#&\s]/g, (c) => encodeURIComponent(c));
  let encoded: string;
  try {
    encoded = encodeURIComponent(value);
  } catch {
    encoded = value; // a lone surrogate: send it raw
  }
  return mode === 'broken' ? `${encoded}%${['', 'G', 'zz', 'E2%82'][value.length % 4]}` : encoded;
}

function queryArb(knownKeys: readonly string[], validValues: fc.Arbitrary<string>): fc.Arbitrary<string> {
  const key = fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...knownKeys) },
    { weight: 2, arbitrary: fc.constantFrom(...knownKeys).map((k) => `${k}[]`) },
    { weight: 1, arbitrary: fc.constantFrom(...knownKeys).map((k) => `${k}[0][a]`) },
    { weight: 1, arbitrary: weirdString },
  );
  const value = fc.oneof({ weight: 3, arbitrary: validValues }, { weight: 3, arbitrary: weirdString });
  const pair = fc
    .tuple(key, value, fc.constantFrom('encoded', 'encoded', 'encoded', 'raw', 'broken'), fc.boolean())
    .map(([k, v, mode, hasValue]) =>
      hasValue ? `${encodeValue(k, 'encoded')}=${encodeValue(v, mode)}` : encodeValue(k, mode),
    );
  return fc.oneof(
    { weight: 1, arbitrary: fc.constant('') },
    { weight: 8, arbitrary: fc.array(pair, { minLength: 1, maxLength: 6 }).map((p) => `?${p.join('&')}`) },
    { weight: 1, arbitrary: fc.constantFrom('?', '?&&', '?=', '?==1', '?%', '?a=%ZZ&a=%') },
  );
}

function pathArb(canonical: string): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 12, arbitrary: fc.constant(canonical) },
    { weight: 1, arbitrary: fc.constant(canonical.toUpperCase()) },
    { weight: 1, arbitrary: fc.constant(`${canonical}/`) },
    { weight: 1, arbitrary: fc.constant(canonical.replace('/api/', '//api//')) },
    { weight: 1, arbitrary: fc.constant(`${canonical}/extra`) },
    { weight: 1, arbitrary: fc.constant(canonical.replace(/\/([a-z]+)$/, '/%2F$1')) },
    { weight: 1, arbitrary: fc.constant(canonical.replace('/v1/', '/v1/../v1/')) },
    { weight: 1, arbitrary: fc.constant(`${canonical};jsessionid=1`) },
    { weight: 1, arbitrary: fc.constant(`${canonical}%`) },
  );
}

const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'APPLICATION/JSON',
  'application/json; charset=latin1',
  'application/json;;',
  'text/plain',
  'text/plain; charset=utf-8',
  'application/x-www-form-urlencoded',
  'multipart/form-data',
  'multipart/form-data; boundary=',
  'multipart/form-data; boundary=XyZ',
  'multipart/form-data; boundary="XyZ"',
  'multipart/form-data; boundary=XyZ; boundary=other',
  'image/png',
  'image/jpeg',
  'application/pdf',
  'application/dicom',
  'application/octet-stream',
  'application/xml',
  '*/*',
  'json',
  ';;;',
  '/',
  'text/html; charset="unterminated',
  'application/json, text/plain',
  '',
];
const contentTypeArb = fc.oneof(
  { weight: 10, arbitrary: fc.constantFrom(...CONTENT_TYPES) },
  { weight: 2, arbitrary: weirdString },
  { weight: 1, arbitrary: fc.constant(`${'a'.repeat(9000)}/json`) },
);

type AuthKind = 'valid' | 'none' | 'malformed' | 'roleless' | 'wrong' | 'duplicate';
const authKindArb = fc.oneof(
  { weight: 60, arbitrary: fc.constant<AuthKind>('valid') },
  { weight: 12, arbitrary: fc.constant<AuthKind>('none') },
  { weight: 18, arbitrary: fc.constant<AuthKind>('malformed') },
  { weight: 5, arbitrary: fc.constant<AuthKind>('roleless') },
  // Each costs a full bcrypt (failures are never cached): keep them rare.
  { weight: 2, arbitrary: fc.constant<AuthKind>('wrong') },
  { weight: 3, arbitrary: fc.constant<AuthKind>('duplicate') },
);
const malformedAuthArb = fc.oneof(
  fc.constantFrom(
    'Basic',
    'Basic ',
    'Basic !!!!',
    'Basic ====',
    `Basic ${Buffer.from('no-colon').toString('base64')}`,
    `Basic ${Buffer.from(':').toString('base64')}`,
    // A NUL byte in the user name (PostgreSQL text refuses it).
    `Basic ${Buffer.from('\u0000:\u0000').toString('base64')}`,
    `basic ${Buffer.from('a:b').toString('base64')}`,
    'Bearer abc.def.ghi',
    'Digest username="x"',
    `Basic ${'A'.repeat(10_000)}`,
    'Basic 🙂',
  ),
  weirdString,
);

function authHeaders(world: World, kind: AuthKind, malformed: string): (readonly [string, string])[] {
  switch (kind) {
    case 'valid':
      return [['Authorization', world.user.authorization]];
    case 'none':
      return [];
    case 'malformed':
      return [['Authorization', malformed]];
    case 'roleless':
      return [['Authorization', world.roleless.authorization]];
    case 'wrong':
      return [
        ['Authorization', basicHeader(malformed.length % 2 === 0 ? world.user.username : 'nobody', 'wrong')],
      ];
    case 'duplicate':
      return [
        ['Authorization', world.user.authorization],
        ['Authorization', malformed],
      ];
  }
}

const HTTP_DATES = [
  'Wed, 04 Mar 2020 05:06:07 GMT',
  'Thu, 01 Jan 1970 00:00:00 GMT',
  'Fri, 31 Dec 9999 23:59:59 GMT',
  'Wed, 31 Feb 2020 25:61:61 GMT',
  'garbage',
  '',
  '0',
  '-1',
  'Sunday, 06-Nov-94 08:49:37 GMT',
  'Sun Nov  6 08:49:37 1994',
];
const ETAGS = ['*', '"abc"', 'W/"x"', ',,,', '"unterminated', 'W/', '"a", "b", W/"c"', ''];

const extraHeaderArb: fc.Arbitrary<(readonly [string, string])[]> = fc.array(
  fc.oneof(
    fc.tuple(fc.constant('If-Modified-Since'), fc.oneof(fc.constantFrom(...HTTP_DATES), weirdString)),
    fc.tuple(fc.constant('If-None-Match'), fc.oneof(fc.constantFrom(...ETAGS), weirdString)),
    fc.tuple(
      fc.constant('X-Forwarded-For'),
      fc.oneof(fc.constantFrom('10.0.0.1', '::1', '1.2.3.4, 5.6.7.8', 'unknown', '999.1.1.1'), weirdString),
    ),
    fc.tuple(
      fc.constantFrom(
        'Accept',
        'Accept-Encoding',
        'Origin',
        'Access-Control-Request-Method',
        'Range',
        'X-Request-Id',
        'Cookie',
        'User-Agent',
        'Content-Encoding',
        'X-Forwarded-Proto',
        'Forwarded',
        'X-HTTP-Method-Override',
      ),
      weirdString,
    ),
    fc.tuple(fc.constantFrom('X-Fuzz', 'x-fuzz', 'X_Underscore', 'Bad Header', 'Ä'), weirdString),
    fc.tuple(
      fc.constant('Expect'),
      fc.constantFrom('100-continue', '100-continue', '100-continue', '100-Continue', 'garbage'),
    ),
    fc.tuple(fc.constant('Content-Encoding'), fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'x')),
  ),
  { maxLength: 4 },
);

// Bodies

function truncate(text: string, cut: number): string {
  return text.slice(0, Math.floor(cut * text.length));
}

function deepJson(depth: number, isArray: boolean): string {
  return isArray
    ? `${'['.repeat(depth)}${']'.repeat(depth)}`
    : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
}

function multipart(
  boundary: string,
  parts: readonly { name: string; fileName?: string; type?: string; data: Buffer }[],
  isTruncated: boolean,
): Buffer {
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const disposition = `form-data; name="${part.name}"${part.fileName === undefined ? '' : `; filename="${part.fileName}"`}`;
    chunks.push(
      Buffer.from(
        `--${boundary}\r\nContent-Disposition: ${disposition}\r\n${part.type === undefined ? '' : `Content-Type: ${part.type}\r\n`}\r\n`,
      ),
      part.data,
      Buffer.from('\r\n'),
    );
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  const all = Buffer.concat(chunks);
  return isTruncated ? all.subarray(0, Math.floor(all.length / 2)) : all;
}

const genericBodyArb: fc.Arbitrary<Buffer | undefined> = fc.oneof(
  { weight: 2, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: fc.constant(Buffer.alloc(0)) },
  { weight: 3, arbitrary: fc.uint8Array({ maxLength: 2048 }).map((b) => Buffer.from(b)) },
  { weight: 3, arbitrary: fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v) ?? 'null')) },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.jsonValue({ depthSize: 'medium' }), fc.double({ min: 0, max: 1, noNaN: true }))
      .map(([v, cut]) => Buffer.from(truncate(JSON.stringify(v) ?? '', cut))),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom(50, 500, 5000, 30_000), fc.boolean())
      .map(([depth, isArray]) => Buffer.from(deepJson(depth, isArray))),
  },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom(JSON_LIMIT - 200, JSON_LIMIT + 10, SIGN_LIMIT + 10, RAW_LIMIT - 100, RAW_LIMIT + 10)
      .map((n) => Buffer.from(`{"data":{"x":"${'x'.repeat(n - 20)}"}}`)),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]),
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"data":{}}')]),
      Buffer.from('{"__proto__":{"polluted":1},"data":{"constructor":{"prototype":{"x":1}}}}'),
      Buffer.from('a[b][c][d][e][f][g][h][i][j][k][l][m][n][o][p][q][r][s][t][u][v][w][x][y][z]=1'),
      Buffer.from(`${'a[]=1&'.repeat(3000)}data=1`),
      Buffer.from('data=%ZZ&request_type=%'),
      Buffer.from(`data${'[a]'.repeat(5000)}=1`),
      Buffer.from(`data=${encodeURIComponent(deepJson(5000, false))}`),
      Buffer.from('{"data":{"a":1},"data":[1,2],"request_type":"dicom_request","request_type":null}'),
      Buffer.from(`{"data":{"n":1${'0'.repeat(400)}}}`),
      Buffer.from('{"data":{"x":"\\ud800\\u0000"},"system_message":"\\u0000"}'),
      PNG_BYTES,
      PDF_BYTES,
    ),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(
        fc.constantFrom('XyZ', 'other'),
        fc.array(
          fc.record({
            name: fc.oneof(fc.constantFrom('data', 'file', 'image', 'request_type', ''), weirdString),
            fileName: fc.option(fc.oneof(fc.constantFrom('a.png', '../../x.dcm', ''), weirdString), {
              nil: undefined,
            }),
            type: fc.option(fc.constantFrom(...CONTENT_TYPES), { nil: undefined }),
            data: fc.oneof(
              fc.uint8Array({ maxLength: 512 }).map((b) => Buffer.from(b)),
              fc.constantFrom(PNG_BYTES, Buffer.from('{"a":1}'), Buffer.from('{"a":')),
            ),
          }),
          { maxLength: 3 },
        ),
        fc.boolean(),
      )
      .map(([boundary, parts, isTruncated]) => multipart(boundary, parts, isTruncated)),
  },
);

/** A request to one endpoint: its methods mostly, its parameters, any headers and body. */
function endpointArb(
  world: World,
  label: string,
  options: {
    path: string;
    methods: readonly string[];
    queryKeys: readonly string[];
    queryValues: fc.Arbitrary<string>;
    body?: fc.Arbitrary<Buffer | undefined>;
    contentType?: fc.Arbitrary<string>;
  },
): fc.Arbitrary<FuzzCase> {
  const methodArb = fc.oneof(
    { weight: 10, arbitrary: fc.constantFrom(...options.methods) },
    {
      weight: 2,
      arbitrary: fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE'),
    },
    { weight: 1, arbitrary: fc.constantFrom('FOO', 'get', 'PROPFIND', 'M-SEARCH', 'PURGE') },
  );
  const bodyArb =
    options.body === undefined
      ? genericBodyArb
      : fc.oneof({ weight: 3, arbitrary: options.body }, { weight: 2, arbitrary: genericBodyArb });
  const ctArb =
    options.contentType === undefined
      ? contentTypeArb
      : fc.oneof({ weight: 2, arbitrary: options.contentType }, { weight: 2, arbitrary: contentTypeArb });
  return fc
    .record({
      method: methodArb,
      path: pathArb(options.path),
      query: queryArb(options.queryKeys, options.queryValues),
      contentTypes: fc.oneof(
        { weight: 2, arbitrary: fc.constant([] as string[]) },
        { weight: 8, arbitrary: ctArb.map((ct) => [ct]) },
        { weight: 1, arbitrary: fc.tuple(ctArb, ctArb).map(([a, b]) => [a, b]) },
      ),
      auth: authKindArb,
      malformedAuth: malformedAuthArb,
      extra: extraHeaderArb,
      body: bodyArb,
      isChunked: fc.constantFrom(false, false, false, true),
      framing: fc.constantFrom<RawRequest['framing']>(
        undefined,
        undefined,
        undefined,
        undefined,
        undefined,
        'both',
        'double-length',
        'trailing-garbage',
      ),
    })
    .map((r) => ({
      label,
      request: {
        method: r.method,
        target: `${r.path}${r.query}`,
        headers: [
          ...authHeaders(world, r.auth, r.malformedAuth),
          ...r.contentTypes.map((ct) => ['Content-Type', ct] as const),
          ...r.extra,
        ],
        ...(r.body === undefined ? {} : { body: r.body }),
        isChunked: r.isChunked,
        ...(r.framing === undefined ? {} : { framing: r.framing }),
      },
    }));
}

function signBodyArb(world: World): fc.Arbitrary<Buffer | undefined> {
  const event = world.event;
  const png = b64(makePng(8, 6));
  const valid: Record<string, unknown> = {
    unique_identifier: event.code,
    extra_info: JSON.stringify({ e_id: event.elementId, e_t_id: event.esignElementTypeId }),
    image: png,
  };
  const field = (name: string) =>
    fc.oneof(
      { weight: 4, arbitrary: fc.constant(valid[name]) },
      { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
      { weight: 2, arbitrary: weirdString },
      { weight: 1, arbitrary: fc.constant(undefined) },
    );
  const imageArb = fc.oneof(
    { weight: 4, arbitrary: fc.constant(png) },
    { weight: 1, arbitrary: fc.constant(`data:image/jpeg;base64,${b64(makeJpeg())}`) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 300 }).map((b) => b64(b)) },
    {
      weight: 1,
      arbitrary: fc.constantFrom('!!!', '====', 'iVBORw0KGgo', b64(PNG_BYTES), 'A'.repeat(SIGN_LIMIT)),
    },
    { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );
  return fc
    .record({
      unique_identifier: field('unique_identifier'),
      extra_info: fc.oneof(
        field('extra_info'),
        fc
          .record({ e_id: fc.jsonValue({ maxDepth: 1 }), e_t_id: fc.jsonValue({ maxDepth: 1 }) })
          .map((v) => JSON.stringify(v)),
        fc.constant({ e_id: event.elementId, e_t_id: event.esignElementTypeId }),
        fc.constant('{"e_id":'),
      ),
      image: imageArb,
      origImage: fc.oneof(fc.constant(undefined), imageArb),
      original_log_id: fc.oneof(fc.constant(undefined), fc.jsonValue({ maxDepth: 1 }), fc.integer()),
    })
    .map((body) => Buffer.from(JSON.stringify(body)));
}

/** A DICOM file, whole or cut short, raw or as the file part of a multipart body. */
function dicomUploadArb(): fc.Arbitrary<Buffer | undefined> {
  const dicom = buildDicomFile({
    PatientID: '0012345',
    PatientName: 'Fuzz^Test',
    PatientBirthDate: '19800201',
    PatientSex: 'M',
    Modality: 'OP',
    Manufacturer: 'Fuzz',
    StudyInstanceUID: '1.2.3',
    StudyDate: '20200101',
  });
  return fc.tuple(fc.double({ min: 0, max: 1, noNaN: true }), fc.boolean()).map(([cut, isMultipart]) => {
    const bytes = cut > 0.7 ? dicom : dicom.subarray(0, Math.floor(cut * dicom.length));
    return isMultipart
      ? multipart('XyZ', [{ name: 'file', fileName: 'a.dcm', type: 'application/dicom', data: bytes }], false)
      : bytes;
  });
}

function queueBodyArb(): fc.Arbitrary<Buffer | undefined> {
  return fc
    .record({
      data: fc.oneof(
        { weight: 3, arbitrary: fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 3 })) },
        { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
        { weight: 1, arbitrary: fc.constant(undefined) },
      ),
      request_type: fc.oneof(
        fc.constant(undefined),
        fc.constant('dicom_request'),
        weirdString,
        fc.jsonValue({ maxDepth: 1 }),
      ),
      system_message: fc.oneof(fc.constant(undefined), weirdString, fc.jsonValue({ maxDepth: 1 })),
    })
    .map((body) => Buffer.from(JSON.stringify(body)));
}

function uploadBodyArb(): fc.Arbitrary<Buffer | undefined> {
  return fc.oneof(
    fc.constantFrom(PNG_BYTES, PDF_BYTES, makeJpeg(), makePng(3, 2), Buffer.from('not an image')),
    fc.constant(
      multipart('XyZ', [{ name: 'file', fileName: 'a.png', type: 'image/png', data: PNG_BYTES }], false),
    ),
  );
}

function randomRequestArb(world: World): fc.Arbitrary<FuzzCase> {
  const segment = fc.oneof(
    fc.constantFrom(
      'api',
      'v1',
      'Api',
      'patient',
      'sign',
      'attachmentdisplay',
      'request',
      'queue',
      'x',
      '..',
      '.',
      '%2e%2e',
      '',
      'healthz',
      'metrics',
      'openapi.json',
      'docs',
    ),
    fc.string({ maxLength: 12 }).map((s) => encodeValue(s, 'encoded')),
    fc.string({ unit: 'grapheme', maxLength: 6 }).map((s) => encodeValue(s, 'raw')),
  );
  const pathArbitrary = fc.oneof(
    fc.array(segment, { minLength: 1, maxLength: 6 }).map((s) => `/${s.join('/')}`),
    fc.constantFrom(
      '*',
      '/%',
      '/%%%',
      'http://evil.example/api/v1/patient/search',
      '//',
      '/api/v1/request/%ZZ/add',
      '/api/v1/request/queue/status/extra',
    ),
  );
  return fc
    .record({
      method: fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE', 'FOO'),
      path: pathArbitrary,
      query: queryArb(['term', 'id', 'request_id', 'content_type'], weirdString),
      auth: authKindArb,
      malformedAuth: malformedAuthArb,
      extra: extraHeaderArb,
      contentType: fc.option(contentTypeArb, { nil: undefined }),
      body: genericBodyArb,
    })
    .map((r) => ({
      label: 'random path',
      request: {
        method: r.method,
        target: `${r.path}${r.query}`,
        headers: [
          ...authHeaders(world, r.auth, r.malformedAuth),
          ...(r.contentType === undefined ? [] : [['Content-Type', r.contentType] as const]),
          ...r.extra,
        ],
        ...(r.body === undefined ? {} : { body: r.body }),
      },
    }));
}

// -------------------------------------------------------------------------------------------------
// The oracle

interface Tally {
  total: number;
  byStatus: Map<number, number>;
  noResponse: number;
  snapshotMs: number;
  sendMs: number;
}

function describeCase(c: FuzzCase): string {
  const body = c.request.body;
  return JSON.stringify({
    label: c.label,
    method: c.request.method,
    target: c.request.target.slice(0, 300),
    headers: c.request.headers.map(([n, v]) => [n, v.slice(0, 200)]),
    isChunked: c.request.isChunked,
    framing: c.request.framing,
    bodyLength: body?.length,
    bodyStart: body?.subarray(0, 300).toString('latin1'),
  });
}

function answerText(response: RawResponse): string {
  return response.body.toString('utf8');
}

/** Sends one case and checks the answer and what it wrote. Throws (with the case) on a violation. */
async function check(world: World, c: FuzzCase, tally: Tally): Promise<void> {
  const t0 = performance.now();
  // Only sign/add writes files: other requests keep the last count (see snapshot).
  const isRead = c.request.method !== 'POST' || !/sign/i.test(c.request.target);
  const before = await snapshot(world.app, isRead ? world.files : undefined);
  const t1 = performance.now();
  const outcome = await sendRaw(world.port, c.request);
  const t2 = performance.now();
  const after = await snapshot(world.app, isRead ? world.files : undefined);
  world.files = after.files;
  tally.snapshotMs += t1 - t0 + (performance.now() - t2);
  tally.sendMs += t2 - t1;
  const fail = (why: string) => {
    throw new Error(
      `${why}\n  answer: ${outcome.kind === 'response' ? `${outcome.response.status} ${answerText(outcome.response).slice(0, 300)}` : outcome.error}\n  case: ${describeCase(c)}\n  before: ${JSON.stringify(before)}\n  after:  ${JSON.stringify(after)}`,
    );
  };
  tally.total += 1;
  if (outcome.kind === 'no-response') {
    // The server may close (RST) before reading a body it refuses: acceptable only for a large body.
    tally.noResponse += 1;
    if ((c.request.body?.length ?? 0) < 16 * KiB) fail(`no answer at all (${outcome.error})`);
    assertNothingWritten(before, after, [], fail);
    return;
  }
  const { response } = outcome;
  tally.byStatus.set(response.status, (tally.byStatus.get(response.status) ?? 0) + 1);
  if (response.status >= 500) fail(`answered ${response.status}: ${answerText(response).slice(0, 300)}`);

  const method = c.request.method;
  const isSignAnswer = response.headers['access-control-allow-origin'] === '*';
  if (isSignAnswer && method === 'POST') {
    // sign/add logs every POST whose body is a JSON object (status 3 when refused) and nothing for a
    // body refused before validation (400, 413) or throttled (429); it writes the signature only on success.
    const expectedLogs = [400, 413, 429].includes(response.status) ? 0 : 1;
    if (after.signature_import_log !== before.signature_import_log + expectedLogs)
      fail(
        `sign/add POST answered ${response.status} with ${after.signature_import_log - before.signature_import_log} log rows`,
      );
    const isSaved = response.status === 200 && answerText(response) === '"Correct signature saved!"';
    if (isSaved) {
      const added = after.protected_file - before.protected_file;
      if (
        after.ophcocvi_signature !== before.ophcocvi_signature + 1 ||
        added < 1 ||
        added > 2 ||
        after.files - before.files !== added
      )
        fail('a saved signature wrote the wrong rows or files');
      assertNothingWritten(
        before,
        after,
        ['signature_import_log', 'protected_file', 'ophcocvi_signature', 'files'],
        fail,
      );
    } else if (response.status === 422 && carriesImage(c.request.body)) {
      // A refused post keeps at most its decodable original image (for a resolved event), for a manual crop.
      const added = after.protected_file - before.protected_file;
      if (added > 1 || after.files - before.files !== added)
        fail('a refused signature kept more than its original');
      assertNothingWritten(before, after, ['signature_import_log', 'protected_file', 'files'], fail);
    } else {
      assertNothingWritten(before, after, ['signature_import_log'], fail);
    }
    return;
  }
  if (response.status === 200 && (method === 'POST' || method === 'PUT')) {
    const parsed = parseJson(answerText(response));
    if (typeof parsed === 'object' && parsed !== null && 'request_id' in parsed) {
      const id = parsed.request_id;
      if (
        typeof id !== 'number' ||
        after.request !== before.request + 1 ||
        after.request_routine <= before.request_routine
      )
        fail('an accepted queue submission wrote the wrong rows');
      world.requestIds.push(id as number);
      assertNothingWritten(before, after, ['request', 'request_routine', 'attachment_data'], fail);
      return;
    }
    if (typeof parsed === 'object' && parsed !== null && 'id' in parsed) {
      if (after.attachment_data !== before.attachment_data + 1)
        fail('an accepted upload wrote the wrong rows');
      assertNothingWritten(
        before,
        after,
        ['request', 'attachment_data', 'event_attachment_item', 'event_attachment_group'],
        fail,
      );
      return;
    }
  }
  assertNothingWritten(before, after, [], fail);
}

function assertNothingWritten(
  before: Snapshot,
  after: Snapshot,
  allowed: readonly (keyof Snapshot)[],
  fail: (why: string) => never,
): void {
  for (const key of Object.keys(before) as (keyof Snapshot)[]) {
    if (allowed.includes(key)) {
      if (after[key] < before[key]) fail(`${key} shrank`);
    } else if (after[key] !== before[key]) {
      fail(`${key} changed by ${after[key] - before[key]} for a request that was not accepted`);
    }
  }
}

/** Whether a sign/add body holds an `image` or `origImage` that decodes to PNG or JPEG bytes. */
function carriesImage(body: Buffer | undefined): boolean {
  const parsed = parseJson(body?.toString('utf8') ?? '');
  if (typeof parsed !== 'object' || parsed === null) return false;
  return ['image', 'origImage'].some((name) => {
    const value = (parsed as Record<string, unknown>)[name];
    if (typeof value !== 'string') return false;
    const bytes = Buffer.from(value.replace(/^data:[^,]*;base64,/, ''), 'base64');
    return (bytes[0] === 0x89 && bytes[1] === 0x50) || (bytes[0] === 0xff && bytes[1] === 0xd8);
  });
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

async function runProperty(
  world: World,
  name: string,
  arb: fc.Arbitrary<FuzzCase>,
  numRuns: number,
  tally: Tally,
  seedOffset: number,
): Promise<void> {
  const seed = SEED + seedOffset;
  try {
    await fc.assert(
      fc.asyncProperty(arb, (c) => check(world, c, tally)),
      { seed, numRuns: Math.max(1, Math.round(numRuns * SCALE)), endOnFailure: false },
    );
    const now = await snapshot(world.app);
    assert.equal(now.files, now.protected_file, 'every stored file has its protected_file row, and no more');
  } catch (error) {
    process.stderr.write(`\nfuzz "${name}" failed: rerun with FUZZ_SEED=${SEED} (property seed ${seed})\n`);
    throw error;
  }
}

// -------------------------------------------------------------------------------------------------

forEachDialect((dialect) => {
  describe(`fuzz: random and malformed requests to every endpoint (${dialect})`, () => {
    let world: World;
    const tally: Tally = { total: 0, byStatus: new Map(), noResponse: 0, snapshotMs: 0, sendMs: 0 };

    before(async () => {
      const app = await startTestApp(dialect, { env: LIMIT_ENV });
      const user = await createUser(app.db);
      const roleless = await createUser(app.db, { roles: [] });
      const event = await createSignableEvent(app.db);
      const attachmentIds = [
        await createAttachment(app.db),
        await createAttachment(app.db, { mime_type: 'application/pdf', blob_data: PDF_BYTES }),
      ];
      const target = await createEventWithElementType(app.db);
      const port = (app.app.server.address() as AddressInfo).port;
      world = { app, port, user, roleless, event, attachmentIds, target, requestIds: [], files: 0 };
      // Fill the credential cache so that valid requests cost no bcrypt.
      for (const u of [user, roleless]) {
        await app.request(`${SEARCH_PATH}?term=x`, { headers: { authorization: u.authorization } });
      }
    });

    after(async () => {
      process.stdout.write(
        `fuzz ${dialect}: ${tally.total} requests, statuses ${JSON.stringify(Object.fromEntries([...tally.byStatus].sort(([a], [b]) => a - b)))}, no answer (large body refused early) ${tally.noResponse}, seed ${SEED}; ${(tally.sendMs / 1000).toFixed(1)} s sending, ${(tally.snapshotMs / 1000).toFixed(1)} s counting\n`,
      );
      await world?.app.close();
    });

    it('patient search never answers 5xx and writes nothing', async () => {
      const arb = endpointArb(world, 'search', {
        path: SEARCH_PATH,
        methods: ['GET'],
        queryKeys: ['term', 'patient_identifier_type'],
        queryValues: fc.oneof(
          fc.constantFrom('Smith', 'smi', '0012345', 'Smith John', '1980-02-01', '1', '2'),
          weirdString,
        ),
      });
      await runProperty(world, 'search', arb, 450, tally, 1);
    });

    it('sign/add never answers 5xx, logs exactly one row per POST and saves only valid images', async () => {
      const arb = endpointArb(world, 'sign/add', {
        path: SIGN_PATH,
        methods: ['POST', 'POST', 'POST', 'OPTIONS'],
        queryKeys: ['unique_identifier', 'x'],
        queryValues: weirdString,
        body: signBodyArb(world),
        contentType: fc.constantFrom('application/json', 'text/plain'),
      });
      await runProperty(world, 'sign/add', arb, 450, tally, 2);
    });

    it('attachment view never answers 5xx and writes nothing', async () => {
      const ids = world.attachmentIds.map(String);
      const arb = endpointArb(world, 'view', {
        path: VIEW_PATH,
        methods: ['GET', 'HEAD'],
        queryKeys: ['id', 'mime', 'attachment'],
        queryValues: fc.oneof(
          fc.constantFrom(...ids, '999999', '9223372036854775807', '99999999999999999999'),
          fc.constantFrom(
            'image/png',
            'application/pdf',
            'IMAGE/JPEG',
            'text/html',
            'image/png; charset=x',
            'a/b/c',
          ),
          fc.constantFrom(
            'blob_data',
            'text_data',
            'thumbnail_small_blob',
            'thumbnail_medium_blob',
            'thumbnail_large_blob',
            'id',
            'request_id',
            'password',
          ),
        ),
        body: fc.constant(undefined),
      });
      await runProperty(world, 'view', arb, 400, tally, 3);
    });

    it('attachment create never answers 5xx and writes only what it accepts', async () => {
      const { eventId, elementTypeId } = world.target;
      const arb = endpointArb(world, 'create', {
        path: CREATE_PATH,
        methods: ['POST'],
        queryKeys: ['event_id', 'element_type_id'],
        queryValues: fc.constantFrom(
          String(eventId),
          String(elementTypeId),
          String(world.event.eventId),
          '999999',
          '-1',
          'abc',
        ),
        body: uploadBodyArb(),
        contentType: fc.constantFrom(
          'image/png',
          'application/pdf',
          'image/jpeg',
          'multipart/form-data; boundary=XyZ',
          'application/octet-stream',
        ),
      });
      await runProperty(world, 'create', arb, 300, tally, 4);
    });

    it('queue add never answers 5xx and writes only what it accepts', async () => {
      const arb = endpointArb(world, 'queue add', {
        path: ADD_PATH,
        methods: ['POST', 'PUT'],
        queryKeys: [
          'request_type',
          'system_message',
          'content_type',
          'file_name',
          'institution_id',
          'identifier_type',
          'source_platform',
        ],
        queryValues: fc.constantFrom(
          'dicom_request',
          'application/json',
          'application/dicom',
          'multipart/form-data',
          'application/x-www-form-urlencoded',
          'a.dcm',
          '1',
          'LOCAL-1-0',
          'mirth',
        ),
        body: fc.oneof(
          queueBodyArb(),
          fc.constant(Buffer.from('request_type=dicom_request&data[a]=1&data[b][]=2')),
          dicomUploadArb(),
        ),
        contentType: fc.constantFrom(
          'application/json',
          'application/x-www-form-urlencoded',
          'multipart/form-data; boundary=XyZ',
          'application/dicom',
        ),
      });
      await runProperty(world, 'queue add', arb, 450, tally, 5);
    });

    it('queue status never answers 5xx and writes nothing', async () => {
      const arb = endpointArb(world, 'queue status', {
        path: STATUS_PATH,
        methods: ['GET'],
        queryKeys: ['request_id'],
        queryValues: fc.oneof(
          fc.constantFrom('1', '999999', '9223372036854775807', '1e2', '01'),
          fc.integer({ min: 1, max: 50 }).map(String),
        ),
        body: fc.constant(undefined),
      });
      await runProperty(world, 'queue status', arb, 250, tally, 6);
    });

    it('random paths and methods never answer 5xx and write nothing', async () => {
      await runProperty(world, 'random', randomRequestArb(world), 350, tally, 7);
    });

    // Found by this fuzz test on PostgreSQL: the user name reached a text parameter with its NUL byte.
    it('answers 401, not 500, to a Basic user name holding a NUL byte, on every guarded route', async () => {
      const authorization = `Basic ${Buffer.from('\u0000:\u0000').toString('base64')}`;
      for (const [method, target] of [
        ['GET', `${SEARCH_PATH}?term=x`],
        ['GET', `${VIEW_PATH}?id=${world.attachmentIds[0]}`],
        ['POST', CREATE_PATH],
        ['POST', ADD_PATH],
        ['GET', `${STATUS_PATH}?request_id=1`],
      ] as const) {
        const outcome = await sendRaw(world.port, {
          method,
          target,
          headers: [['Authorization', authorization]],
        });
        assert.equal(outcome.kind, 'response');
        assert.equal(outcome.kind === 'response' && outcome.response.status, 401, `${method} ${target}`);
      }
    });

    // Found by this fuzz test: a valid request followed on the same connection by bytes that do not parse
    // is stored, but Fastify's default clientError handler answered 400 at once and closed the connection,
    // before the stored request's own answer: the client saw a refusal for a request that was written.
    // src/http/client-error.ts answers the stored request first, then closes.
    it('never answers a refusal for a request it stored (a valid queue add followed by garbage)', async () => {
      const before = await snapshot(world.app, world.files);
      const outcome = await sendRaw(world.port, {
        method: 'POST',
        target: ADD_PATH,
        headers: [
          ['Authorization', world.user.authorization],
          ['Content-Type', 'application/json'],
        ],
        body: Buffer.from('{"data":{"a":1}}'),
        framing: 'trailing-garbage',
      });
      await new Promise((resolve) => setTimeout(resolve, 200));
      const after = await snapshot(world.app, world.files);
      const status = outcome.kind === 'response' ? outcome.response.status : 0;
      assert.ok(
        status === 200 || after.request === before.request,
        `answered ${status} but wrote ${after.request - before.request} request row(s)`,
      );
      assert.equal(status, 200, 'the complete request is served, not refused');
      assert.equal(after.request, before.request + 1);
    });

    it('is still healthy and serving afterwards', async () => {
      const { app, user, event } = world;
      assert.equal((await app.request('/healthz')).status, 200);
      assert.equal((await app.request('/readyz')).status, 200);
      const search = await app.request(`${SEARCH_PATH}?term=${encodeURIComponent(event.code)}`, {
        headers: { authorization: user.authorization },
      });
      assert.equal(search.status, 200);
      await search.body?.cancel();
      const sign = await app.request(SIGN_PATH, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          unique_identifier: event.code,
          extra_info: JSON.stringify({ e_id: event.elementId, e_t_id: event.esignElementTypeId }),
          image: b64(makePng(4, 3)),
        }),
      });
      assert.equal(sign.status, 200);
      assert.equal(await sign.json(), 'Correct signature saved!');
      const add = await app.request(`${ADD_PATH}`, {
        method: 'POST',
        headers: { authorization: user.authorization, 'content-type': 'application/json' },
        body: JSON.stringify({ data: { a: 1 } }),
      });
      assert.equal(add.status, 200);
      const { request_id: requestId } = (await add.json()) as { request_id: number };
      const status = await app.request(`${STATUS_PATH}?request_id=${requestId}`, {
        headers: { authorization: user.authorization },
      });
      assert.equal(status.status, 200);
      await status.body?.cancel();
      assert.ok(tally.total >= 100, `only ${tally.total} requests were sent`);
    });
  });
});
