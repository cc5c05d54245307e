/**
 * The one shared helper that checks the Basic-auth contract (401 with `WWW-Authenticate`, then 403 without
 * the role) on any protected route: the five cases (no header, bad password, unknown user, disabled user, no
 * role) plus malformed headers. Call it inside a `describe` of the route's test file.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { DB } from '../src/db/schema.ts';
import { basicHeader, countRows, createUser, unique } from './factories.ts';
import type { TestApp } from './harness.ts';

export interface ProtectedRoute {
  readonly method: string;
  /** Path with query string. */
  readonly path: string;
  readonly body?: () => RequestInit['body'];
  readonly headers?: Record<string, string>;
  /** The operation the route requires beyond authentication (`OprnApi`); omit when none is needed. */
  readonly operation?: string;
  /** Tables that a refused request must leave unchanged. */
  readonly tablesUnchanged?: readonly (keyof DB)[];
}

async function assertUnauthorized(response: Response): Promise<void> {
  assert.equal(response.status, 401);
  assert.equal(response.headers.get('www-authenticate'), 'Basic realm="OpenEyes"');
  assert.match(response.headers.get('content-type') ?? '', /^application\/json/);
  assert.equal(response.headers.get('set-cookie'), null);
  assert.equal(await response.json(), '401 Unauthorized');
}

export function itEnforcesBasicAuth(getApp: () => TestApp, route: ProtectedRoute): void {
  const send = async (authorization: string | undefined): Promise<Response> => {
    const app = getApp();
    const before = await Promise.all((route.tablesUnchanged ?? []).map((t) => countRows(app.db, t)));
    const response = await app.request(route.path, {
      method: route.method,
      headers: { ...route.headers, ...(authorization === undefined ? {} : { authorization }) },
      ...(route.body === undefined ? {} : { body: route.body() }),
    });
    const after = await Promise.all((route.tablesUnchanged ?? []).map((t) => countRows(app.db, t)));
    if (response.status === 401 || response.status === 403)
      assert.deepEqual(after, before, 'a refused request wrote rows');
    return response;
  };

  it('answers 401 "401 Unauthorized" with WWW-Authenticate when there is no Authorization header', async () => {
    await assertUnauthorized(await send(undefined));
  });

  it('answers 401 for a wrong password', async () => {
    const user = await createUser(getApp().db);
    await assertUnauthorized(await send(basicHeader(user.username, `${user.password}x`)));
  });

  it('answers 401 for an unknown user', async () => {
    await assertUnauthorized(await send(basicHeader(unique('nobody'), 'whatever')));
  });

  it('answers 401 for a disabled user with the right password', async () => {
    const user = await createUser(getApp().db, { isActive: false });
    await assertUnauthorized(await send(user.authorization));
  });

  if (route.operation !== undefined) {
    it(`answers 403 "403 Forbidden" when the user lacks ${route.operation}`, async () => {
      const user = await createUser(getApp().db, { roles: [] });
      const response = await send(user.authorization);
      assert.equal(response.status, 403);
      assert.equal(response.headers.get('www-authenticate'), null);
      assert.match(response.headers.get('content-type') ?? '', /^application\/json/);
      assert.equal(await response.json(), '403 Forbidden');
    });
  }

  it('answers 401 for malformed Authorization headers', async () => {
    const user = await createUser(getApp().db);
    const encoded = (text: string) => Buffer.from(text).toString('base64');
    const malformed = [
      `Bearer ${encoded(`${user.username}:${user.password}`)}`,
      `Basic ${encoded(`${user.username}${user.password}`)}`,
      'Basic !!!not-base64!!!',
      `Basic ${encoded(`:${user.password}`)}`,
      'Basic',
      'Basic =',
      `Basic ${encoded(`${user.username}:${user.password}`)} extra`,
    ];
    for (const header of malformed) await assertUnauthorized(await send(header));
  });

  it('lets a valid user through, with colons in the password, and sets no cookie', async () => {
    const user = await createUser(getApp().db, { password: 'a:b:c:' });
    const response = await send(user.authorization);
    assert.notEqual(response.status, 401);
    assert.notEqual(response.status, 403);
    assert.equal(response.headers.get('set-cookie'), null);
  });
}
