import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, it } from 'node:test';
// Ajv comes with Fastify (its validator compiler) and is resolvable from the project root.
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ValidateFunction } from 'ajv/dist/2020.js';
import { createPatient, createUser } from '../../test/factories.ts';
import type { TestUser } from '../../test/factories.ts';
import { buildInstance, multipartRelated, newUid, stowContentType } from '../../test/dicom-instances.ts';
import { PNG_BYTES, createAttachment } from '../../test/factories-attachment.ts';
import { addIdentifier, createStandardInstitutions } from '../../test/factories-patient.ts';
import { createSignableEvent, makePng } from '../../test/factories-signature.ts';
import type { TestApp } from '../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../test/harness.ts';
import { until } from '../../test/until.ts';
import { NOT_READY } from './readiness.ts';
import type { OpenApiDocument, OpenApiOperation } from './openapi.ts';
import { DOCS_CSP } from './openapi.ts';

const ajv = new Ajv2020({ strict: true, allErrors: true });
const validators = new Map<object, ValidateFunction>();

function validatorOf(schema: object): ValidateFunction {
  let validate = validators.get(schema);
  if (validate === undefined) {
    validate = ajv.compile(schema);
    validators.set(schema, validate);
  }
  return validate;
}

async function fetchDocument(app: TestApp): Promise<OpenApiDocument> {
  const response = await app.request('/api/v1/openapi.json');
  assert.equal(response.status, 200);
  assert.match(response.headers.get('content-type') ?? '', /^application\/json/);
  return (await response.json()) as OpenApiDocument;
}

/** The operation of `method` on the documented path matching `pathname` (the router ignores case). */
function operationFor(document: OpenApiDocument, method: string, pathname: string): OpenApiOperation {
  // A route's `:name` parameter is the document's `{name}` template, which any one segment matches.
  const wanted = pathname.replace(/:(\w+)/g, '{$1}').toLowerCase();
  const path = Object.keys(document.paths).find((p) => {
    const template = p.toLowerCase();
    if (template === wanted) return true;
    const pattern = template.replace(/[.]/g, '\\.').replace(/\{\w+\}/g, '[^/]+');
    return new RegExp(`^${pattern}$`).test(wanted);
  });
  assert.ok(path !== undefined, `${pathname} is documented`);
  const operation = document.paths[path]![method.toLowerCase()];
  assert.ok(operation !== undefined, `${method} ${pathname} is documented`);
  return operation;
}

interface Case {
  readonly name: string;
  readonly method?: string;
  /** Path and query. */
  readonly path: string;
  readonly headers?: Record<string, string>;
  readonly body?: RequestInit['body'];
  readonly status: number;
}

/**
 * Sends the request and checks the answer against the document: its status is documented for the
 * operation, every documented header is present, and the body matches the documented media type and
 * schema (none when none is documented).
 */
async function assertDocumented(app: TestApp, document: OpenApiDocument, c: Case): Promise<void> {
  const method = c.method ?? 'GET';
  const response = await app.request(c.path, {
    method,
    ...(c.headers === undefined ? {} : { headers: c.headers }),
    ...(c.body === undefined ? {} : { body: c.body }),
  });
  const bytes = Buffer.from(await response.arrayBuffer());
  assert.equal(response.status, c.status, `${c.name}: status (body ${bytes.toString().slice(0, 200)})`);
  const operation = operationFor(document, method, new URL(c.path, app.baseUrl).pathname);
  const documented = operation.responses[String(response.status)];
  assert.ok(documented !== undefined, `${c.name}: ${response.status} is documented for ${method} ${c.path}`);
  for (const name of Object.keys(documented.headers ?? {}))
    assert.ok(response.headers.has(name), `${c.name}: header ${name} is sent`);

  const content = documented.content;
  if (content === undefined || method === 'HEAD') {
    assert.equal(bytes.length, 0, `${c.name}: no body`);
    return;
  }
  const contentType = response.headers.get('content-type') ?? '';
  const [mediaType, media] = Object.entries(content)[0]!;
  if (mediaType === '*/*') return;
  assert.ok(contentType.startsWith(mediaType), `${c.name}: ${contentType} is ${mediaType}`);
  const body: unknown = mediaType.endsWith('json') ? JSON.parse(bytes.toString('utf8')) : bytes.toString();
  const validate = validatorOf(media.schema);
  assert.ok(
    validate(body),
    `${c.name}: body ${JSON.stringify(body).slice(0, 300)} ${ajv.errorsText(validate.errors)}`,
  );
}

forEachDialect((dialect) => {
  describe(`GET /api/v1/openapi.json and /docs [${dialect}]`, () => {
    let app: TestApp;
    let document: OpenApiDocument;
    before(async () => {
      app = await startTestApp(dialect, {
        env: { METRICS: 'basic' },
        extraRoutes: (scope) => {
          scope.get('/test-only/route', async () => 'x');
        },
      });
      document = await fetchDocument(app);
    });
    after(() => app.close());

    it('is an OpenAPI 3.1 document: info, paths, unique operation ids, responses on every operation', () => {
      assert.equal(document.openapi, '3.1.0');
      assert.equal(typeof document.info.title, 'string');
      assert.equal(typeof document.info.version, 'string');
      const ids = new Set<string>();
      for (const [path, item] of Object.entries(document.paths)) {
        assert.match(path, /^\//);
        for (const [method, operation] of Object.entries(item)) {
          assert.match(method, /^(get|put|post|delete|options|head|patch)$/);
          assert.ok(!ids.has(operation.operationId), `${operation.operationId} is unique`);
          ids.add(operation.operationId);
          assert.ok(Object.keys(operation.responses).length > 0, `${method} ${path} has responses`);
          for (const [status, response] of Object.entries(operation.responses)) {
            assert.match(status, /^[1-5]\d\d$/);
            assert.equal(typeof response.description, 'string');
            for (const media of Object.values(response.content ?? {})) validatorOf(media.schema);
          }
          for (const requirement of operation.security)
            for (const scheme of Object.keys(requirement))
              assert.ok(scheme in document.components.securitySchemes, `${scheme} is declared`);
        }
      }
    });

    it('documents every registered route, and no endpoint that is not registered', () => {
      const routes = app.app.openapiRoutes ?? [];
      assert.ok(routes.length > 20);
      for (const route of routes) operationFor(document, route.method, route.url);
      const registered = new Set(routes.map((r) => r.url.toLowerCase()));
      // Every route describes itself, or is one that refuses the methods a URL does not serve (405).
      for (const route of routes) {
        const operation = operationFor(document, route.method, route.url);
        assert.ok(
          route.doc !== undefined || operation.responses['405'] !== undefined,
          `${route.method} ${route.url} declares config.doc`,
        );
      }
      assert.ok(registered.has('/readyz'));
      assert.ok(!registered.has('/test-only/route'));
      assert.equal(document.paths['/test-only/route'], undefined, 'test-only routes stay out');
    });

    it('documents every cause of a /readyz 503: database unreachable, not writable, audit trail behind', () => {
      const unready = operationFor(document, 'GET', '/readyz').responses['503'];
      assert.ok(unready !== undefined);
      for (const cause of ['database unreachable', 'database not writable', 'audit trail behind']) {
        assert.ok(NOT_READY.includes(cause), `${cause} is an answer`);
        assert.ok(unready.description.includes(cause), `the description names ${cause}`);
      }
      const schema = unready.content?.['application/json']?.schema as {
        properties: { status: { enum: string[] } };
      };
      assert.deepEqual(schema.properties.status.enum, [...NOT_READY]);
    });

    it('says which operations need Basic credentials and OprnApi, from the guard the route really uses', () => {
      const search = operationFor(document, 'GET', '/api/v1/patient/search');
      assert.deepEqual(search.security, [{ basicAuth: [] }]);
      assert.equal(search['x-required-operation'], 'OprnApi');
      assert.ok(search.responses['401'] !== undefined && search.responses['403'] !== undefined);
      // Attachment view needs any authenticated user unless ATTACHMENT_REQUIRE_OPRNAPI is on.
      const view = operationFor(document, 'GET', '/api/v1/attachmentdisplay/view');
      assert.deepEqual(view.security, [{ basicAuth: [] }]);
      assert.equal(view['x-required-operation'], undefined);
      const sign = operationFor(document, 'POST', '/api/v1/sign/add');
      assert.deepEqual(sign.security, []);
      assert.equal(sign.responses['401'], undefined);
      assert.deepEqual(operationFor(document, 'GET', '/metrics').security, [{ basicAuth: [] }]);
      assert.deepEqual(operationFor(document, 'GET', '/healthz').security, []);
    });

    it('takes the query parameters of attachment view from its route schema', () => {
      const view = operationFor(document, 'GET', '/api/v1/attachmentdisplay/view');
      const names = (view.parameters as { name: string; in: string; required: boolean }[])
        .filter((p) => p.in === 'query')
        .map((p) => [p.name, p.required]);
      assert.deepEqual(names, [
        ['id', true],
        ['attachment', false],
        ['mime', false],
      ]);
    });

    it('describes every parameter each endpoint accepts, queue add and status from their route schemas', () => {
      const namesOf = (method: string, path: string) =>
        ((operationFor(document, method, path).parameters ?? []) as { name: string; in: string }[]).map(
          (p) => `${p.in}:${p.name}`,
        );
      const queueQuery = ['query:request_type', 'query:system_message', 'query:content_type'];
      assert.deepEqual(namesOf('POST', '/api/v1/request/queue/add'), queueQuery);
      assert.deepEqual(namesOf('PUT', '/api/v1/request/queue/add'), queueQuery);
      assert.deepEqual(namesOf('GET', '/api/v1/request/queue/status'), ['query:request_id']);
      assert.deepEqual(namesOf('POST', '/api/v1/attachmentdisplay/create'), [
        'query:event_id',
        'query:element_type_id',
      ]);
      assert.deepEqual(namesOf('GET', '/api/v1/attachmentdisplay/view'), [
        'header:If-None-Match',
        'header:If-Modified-Since',
        'query:id',
        'query:attachment',
        'query:mime',
      ]);
      assert.deepEqual(namesOf('GET', '/api/v1/patient/search'), [
        'query:term',
        'query:patient_identifier_type',
        'query:pageSize',
        'query:Patient_page',
        'query:sort_by',
        'query:sort_dir',
        'cookie:institution_id',
        'cookie:site_id',
      ]);
      // Every queue parameter is described, and the two that can also come in the body are in its schemas.
      const add = operationFor(document, 'POST', '/api/v1/request/queue/add');
      for (const parameter of add.parameters as { name: string; description?: string }[])
        assert.ok((parameter.description ?? '').length > 0, parameter.name);
      const content = (add.requestBody as { content: Record<string, { schema: { properties?: object } }> })
        .content;
      for (const type of ['application/json', 'application/x-www-form-urlencoded', 'multipart/form-data'])
        assert.deepEqual(
          Object.keys(content[type]!.schema.properties ?? {}).sort(),
          ['data', 'request_type', 'system_message'],
          type,
        );
      const signBody = (
        operationFor(document, 'POST', '/api/v1/sign/add').requestBody as {
          content: Record<string, { schema: { properties: object } }>;
        }
      ).content['application/json']!.schema.properties;
      assert.deepEqual(Object.keys(signBody), [
        'unique_identifier',
        'extra_info',
        'image',
        'origImage',
        'original_log_id',
      ]);
    });

    it('serves /docs as a self-contained HTML page with its own CSP, listing every path', async () => {
      const response = await app.request('/docs');
      assert.equal(response.status, 200);
      assert.match(response.headers.get('content-type') ?? '', /^text\/html/);
      assert.equal(response.headers.get('content-security-policy'), DOCS_CSP);
      assert.equal(response.headers.get('x-content-type-options'), 'nosniff');
      const html = await response.text();
      assert.match(html, /^<!doctype html>/);
      for (const path of Object.keys(document.paths)) assert.ok(html.includes(`<code>${path}</code>`), path);
      assert.doesNotMatch(html, /<script|src="http|href="http|@import/i);
    });
  });

  describe(`documented responses match real ones [${dialect}]`, () => {
    let app: TestApp;
    let document: OpenApiDocument;
    let user: TestUser;
    let noRole: TestUser;
    let standard: Awaited<ReturnType<typeof createStandardInstitutions>>;
    before(async () => {
      app = await startTestApp(dialect, { env: { METRICS: 'on', INSTITUTION_CODE: 'DOCS' } });
      document = await fetchDocument(app);
      standard = await createStandardInstitutions(app.db, 'DOCS');
      user = await createUser(app.db);
      noRole = await createUser(app.db, { roles: [] });
    });
    after(() => app.close());

    const check = (c: Case) => assertDocumented(app, document, c);
    const auth = () => ({ authorization: user.authorization });

    it('operations endpoints', async () => {
      await check({ name: 'healthz', path: '/healthz', status: 200 });
      await check({ name: 'readyz', path: '/readyz', status: 200 });
      await check({ name: 'readyz HEAD', method: 'HEAD', path: '/readyz', status: 200 });
      await check({ name: 'document', path: '/api/v1/openapi.json', status: 200 });
      await check({ name: 'docs', path: '/docs', status: 200 });
      await check({ name: 'metrics', path: '/metrics', status: 200 });
    });

    it('patient search', async () => {
      // Names are letters only (digits make the term an identifier search).
      const lastName = `Docs${Date.now()
        .toString(36)
        .replace(/\d/g, (d) => 'abcdefghij'[Number(d)]!)}`;
      const { patientId } = await createPatient(app.db, { firstName: 'Ann', lastName });
      await addIdentifier(app.db, patientId, standard.localTypeId, '0987123');
      await addIdentifier(app.db, patientId, standard.globalTypeId, '4871234567');
      const search = '/api/v1/patient/search';
      await check({ name: 'no credentials', path: `${search}?term=x`, status: 401 });
      await check({
        name: 'no role',
        path: `${search}?term=x`,
        headers: { authorization: noRole.authorization },
        status: 403,
      });
      await check({ name: 'no match', path: `${search}?term=Nobodyxyz`, headers: auth(), status: 200 });
      await check({ name: 'a match', path: `${search}?term=${lastName}`, headers: auth(), status: 200 });
      const found = (await (
        await app.request(`${search}?term=${lastName}`, { headers: auth() })
      ).json()) as unknown[];
      assert.equal(found.length, 1, 'the match case really returned a patient');
      await check({ name: 'by number', path: `${search}?term=0987123`, headers: auth(), status: 200 });
      await check({
        name: 'within a type',
        path: `${search}?term=0987123&patient_identifier_type=${standard.localTypeId}`,
        headers: auth(),
        status: 200,
      });
      await check({ name: 'HEAD', method: 'HEAD', path: `${search}?term=x`, headers: auth(), status: 200 });
      await check({
        name: 'form POST',
        method: 'POST',
        path: search,
        headers: { ...auth(), 'content-type': 'application/x-www-form-urlencoded' },
        body: `term=${lastName}`,
        status: 200,
      });
      await check({
        name: 'XML body',
        method: 'POST',
        path: search,
        headers: { ...auth(), 'content-type': 'text/xml' },
        body: '<a/>',
        status: 415,
      });
      await check({
        name: 'bad JSON',
        method: 'PUT',
        path: search,
        headers: { ...auth(), 'content-type': 'application/json' },
        body: '{',
        status: 400,
      });
      await check({ name: 'DELETE', method: 'DELETE', path: search, status: 405 });
    });

    it('signature import', async () => {
      const event = await createSignableEvent(app.db);
      const body = {
        unique_identifier: event.code,
        extra_info: JSON.stringify({ e_id: event.elementId, e_t_id: event.esignElementTypeId }),
        image: makePng().toString('base64'),
      };
      for (const path of ['/api/v1/sign/add', '/Api/sign/add']) {
        await check({ name: 'not JSON', method: 'POST', path, body: 'nope', status: 400 });
        await check({ name: 'empty object', method: 'POST', path, body: '{}', status: 422 });
        await check({ name: 'GET', path, status: 400 });
        await check({ name: 'preflight', method: 'OPTIONS', path, status: 204 });
      }
      await check({
        name: 'saved',
        method: 'POST',
        path: '/api/v1/sign/add',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        status: 200,
      });
    });

    it('attachment view and create', async () => {
      const id = await createAttachment(app.db);
      const view = '/api/v1/attachmentdisplay/view';
      await check({ name: 'no credentials', path: `${view}?id=${id}`, status: 401 });
      await check({ name: 'bad id', path: `${view}?id=abc`, headers: auth(), status: 400 });
      await check({ name: 'unknown id', path: `${view}?id=987654321`, headers: auth(), status: 404 });
      await check({ name: 'bytes', path: `${view}?id=${id}`, headers: auth(), status: 200 });
      await check({ name: 'HEAD', method: 'HEAD', path: `${view}?id=${id}`, headers: auth(), status: 200 });
      const etag = (await app.request(`${view}?id=${id}`, { method: 'HEAD', headers: auth() })).headers.get(
        'etag',
      );
      await check({
        name: 'not modified',
        path: `${view}?id=${id}`,
        headers: { ...auth(), 'if-none-match': etag! },
        status: 304,
      });
      await check({ name: 'POST', method: 'POST', path: view, status: 405 });

      const create = '/api/v1/attachmentdisplay/create';
      await check({ name: 'no credentials', method: 'POST', path: create, body: PNG_BYTES, status: 401 });
      await check({
        name: 'stored',
        method: 'POST',
        path: create,
        headers: { ...auth(), 'content-type': 'image/png' },
        body: PNG_BYTES,
        status: 200,
      });
      await check({
        name: 'malformed type',
        method: 'POST',
        path: create,
        headers: { ...auth(), 'content-type': 'not a type' },
        body: PNG_BYTES,
        status: 422,
      });
      await check({ name: 'GET', path: create, status: 405 });
    });

    it('request queue add and status', async () => {
      const add = '/api/v1/request/queue/add';
      const json = { ...auth(), 'content-type': 'application/json' };
      await check({ name: 'no credentials', method: 'POST', path: add, body: '{}', status: 401 });
      await check({
        name: 'no role',
        method: 'POST',
        path: add,
        headers: { authorization: noRole.authorization },
        status: 403,
      });
      await check({ name: 'no data', method: 'POST', path: add, headers: json, body: '{}', status: 422 });
      const accepted = await app.request(add, {
        method: 'POST',
        headers: json,
        body: JSON.stringify({ data: { a: 'b' } }),
      });
      const { request_id: requestId } = (await accepted.json()) as { request_id: number };
      await check({
        name: 'queued',
        method: 'PUT',
        path: add,
        headers: json,
        body: JSON.stringify({ data: { a: 'b' } }),
        status: 200,
      });
      await check({ name: 'GET', path: add, status: 405 });

      const status = '/api/v1/request/queue/status';
      await check({ name: 'no credentials', path: `${status}?request_id=1`, status: 401 });
      await check({ name: 'no id', path: status, headers: auth(), status: 422 });
      await check({ name: 'unknown', path: `${status}?request_id=987654321`, headers: auth(), status: 404 });
      await check({ name: 'known', path: `${status}?request_id=${requestId}`, headers: auth(), status: 200 });
      await check({ name: 'DELETE', method: 'DELETE', path: status, status: 405 });
    });

    it('DICOMweb STOW-RS', async () => {
      const studies = '/api/v1/dicomweb/studies';
      const stow = { ...auth(), 'content-type': stowContentType() };
      const instance = () => buildInstance();
      await check({ name: 'no credentials', method: 'POST', path: studies, status: 401 });
      await check({
        name: 'stored',
        method: 'POST',
        path: studies,
        headers: stow,
        body: multipartRelated([instance()]),
        status: 200,
      });
      await check({
        name: 'some stored',
        method: 'POST',
        path: studies,
        headers: stow,
        body: multipartRelated([instance(), Buffer.from('x')]),
        status: 202,
      });
      await check({
        name: 'none stored',
        method: 'POST',
        path: `${studies}/${newUid()}`,
        headers: stow,
        body: multipartRelated([instance()]),
        status: 409,
      });
      await check({
        name: 'no boundary',
        method: 'POST',
        path: studies,
        headers: { ...auth(), 'content-type': 'multipart/related; type="application/dicom"' },
        body: 'x',
        status: 400,
      });
      await check({
        name: 'wrong type',
        method: 'POST',
        path: studies,
        headers: { ...auth(), 'content-type': 'application/dicom' },
        body: instance(),
        status: 415,
      });
      await check({ name: 'DELETE', method: 'DELETE', path: studies, status: 405 });
    });

    it('DICOMweb QIDO-RS and WADO-RS', async () => {
      const root = '/api/v1/dicomweb';
      const study = newUid();
      const stored = await app.request(`${root}/studies`, {
        method: 'POST',
        headers: { ...auth(), 'content-type': stowContentType() },
        body: multipartRelated([buildInstance({ studyInstanceUid: study })]),
      });
      assert.equal(stored.status, 200);
      await check({ name: 'no credentials', path: `${root}/studies`, status: 401 });
      await check({
        name: 'found',
        path: `${root}/studies?StudyInstanceUID=${study}`,
        headers: auth(),
        status: 200,
      });
      await check({
        name: 'none',
        path: `${root}/series?StudyInstanceUID=${newUid()}`,
        headers: auth(),
        status: 204,
      });
      await check({ name: 'bad parameter', path: `${root}/instances?Nope=1`, headers: auth(), status: 400 });
      await check({
        name: 'XML',
        path: `${root}/studies/${study}/series`,
        headers: { ...auth(), accept: 'application/dicom+xml' },
        status: 406,
      });
      await check({ name: 'retrieved', path: `${root}/studies/${study}`, headers: auth(), status: 200 });
      await check({
        name: 'metadata',
        path: `${root}/studies/${study}/metadata`,
        headers: auth(),
        status: 200,
      });
      await check({
        name: 'unknown',
        path: `${root}/studies/${newUid()}/metadata`,
        headers: auth(),
        status: 404,
      });
      await check({ name: 'bad UID', path: `${root}/studies/x`, headers: auth(), status: 400 });
      await check({
        name: 'transcoding',
        path: `${root}/studies/${study}`,
        headers: {
          ...auth(),
          accept: 'multipart/related; type="application/dicom"; transfer-syntax=1.2.840.10008.1.2',
        },
        status: 406,
      });
      await check({ name: 'DELETE', method: 'DELETE', path: `${root}/series`, status: 405 });
    });
  });

  describe(`documented limits match real ones [${dialect}]`, () => {
    let app: TestApp;
    let document: OpenApiDocument;
    before(async () => {
      app = await startTestApp(dialect, {
        env: {
          AUTH_FAILURE_LIMIT_PER_MINUTE: '1',
          SIGN_RATE_LIMIT_PER_MINUTE: '2',
          SIGN_BODY_LIMIT_BYTES: '1024',
          JSON_BODY_LIMIT_BYTES: '1024',
          METRICS: 'basic',
        },
      });
      document = await fetchDocument(app);
    });
    after(() => app.close());

    const check = (c: Case) => assertDocumented(app, document, c);

    it('413 and 429 on signature import', async () => {
      const path = '/api/v1/sign/add';
      await check({ name: 'too large', method: 'POST', path, body: 'x'.repeat(2048), status: 413 });
      await check({ name: 'empty object', method: 'POST', path, body: '{}', status: 422 });
      await check({ name: 'throttled', method: 'POST', path, body: '{}', status: 429 });
    });

    it('413 on queue add, and 429 after failed logins in each route shape', async () => {
      const user = await createUser(app.db);
      await check({
        name: 'too large',
        method: 'POST',
        path: '/api/v1/request/queue/add',
        headers: { authorization: user.authorization, 'content-type': 'application/json' },
        body: JSON.stringify({ data: 'x'.repeat(2048) }),
        status: 413,
      });
      // Another user: the address is known for `user` (it logged in above), which the brake lets through.
      const other = await createUser(app.db);
      const wrong = { authorization: `Basic ${Buffer.from(`${other.username}:wrong`).toString('base64')}` };
      await check({
        name: 'first failure',
        path: '/api/v1/patient/search?term=x',
        headers: wrong,
        status: 401,
      });
      await check({ name: 'braked', path: '/api/v1/patient/search?term=x', headers: wrong, status: 429 });
      await check({ name: 'braked', path: '/api/v1/request/queue/status', headers: wrong, status: 429 });
      await check({ name: 'braked', path: '/metrics', headers: wrong, status: 429 });
    });
  });

  describe(`documented overload answers match real ones [${dialect}]`, () => {
    let app: TestApp;
    let document: OpenApiDocument;
    before(async () => {
      app = await startTestApp(dialect, {
        env: { MAX_CONCURRENT_HEAVY_REQUESTS: '1', HEAVY_QUEUE_TIMEOUT_MS: '0', BODY_TIMEOUT_MS: '60000' },
      });
      document = await fetchDocument(app);
    });
    after(() => app.close());

    it('503 with Retry-After in each route shape while the only heavy slot is held', async () => {
      // A signature upload whose body never finishes holds the one slot (a slot is taken once 64 KiB of
      // the body have arrived).
      const { port } = new URL(app.baseUrl);
      const held = request({
        host: '127.0.0.1',
        port: Number(port),
        method: 'POST',
        path: '/api/v1/sign/add',
        headers: { 'content-type': 'application/json', 'content-length': '200000' },
      });
      held.on('error', () => {});
      held.write(Buffer.alloc(100_000, 0x20));
      try {
        await until(() => app.app.heavyGate?.active === 1);
        const user = await createUser(app.db);
        const auth = { authorization: user.authorization };
        const check = (c: Case) => assertDocumented(app, document, c);
        await check({ name: 'sign/add', method: 'POST', path: '/api/v1/sign/add', body: '{}', status: 503 });
        await check({
          name: 'queue add',
          method: 'POST',
          path: '/api/v1/request/queue/add',
          headers: { ...auth, 'content-type': 'application/json' },
          body: '{}',
          status: 503,
        });
        await check({
          name: 'attachment create',
          method: 'POST',
          path: '/api/v1/attachmentdisplay/create',
          headers: { ...auth, 'content-type': 'image/png' },
          body: PNG_BYTES,
          status: 503,
        });
        await check({
          name: 'attachment view',
          path: '/api/v1/attachmentdisplay/view?id=1',
          headers: auth,
          status: 503,
        });
      } finally {
        held.destroy();
      }
    });
  });
});
