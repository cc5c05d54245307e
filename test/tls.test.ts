/**
 * Transport security (Basic credentials must not travel in clear): HTTPS served by the app itself with a
 * self-signed certificate made by `openssl`, HSTS only over HTTPS, Basic credentials refused over plain HTTP
 * when REQUIRE_TLS is on unless a trusted proxy says the request was HTTPS, and the security headers.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { IncomingHttpHeaders } from 'node:http';
import https from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { ConfigError, loadConfig } from '../src/config.ts';
import type { ModuleOptions } from '../src/http/module.ts';
import { basicHeader, createUser } from './factories.ts';
import type { TestApp } from './harness.ts';
import { forEachDialect, startTestApp } from './harness.ts';

const hasOpenssl = spawnSync('openssl', ['version']).status === 0;
const certDir = mkdtempSync(path.join(tmpdir(), 'cra-tls-'));
const certFile = path.join(certDir, 'cert.pem');
const keyFile = path.join(certDir, 'key.pem');
const otherKeyFile = path.join(certDir, 'other-key.pem');
if (hasOpenssl) {
  const openssl = (args: string[]) => {
    const result = spawnSync('openssl', args, { encoding: 'utf8' });
    if (result.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${result.stderr}`);
  };
  openssl([
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    keyFile,
    '-out',
    certFile,
    '-days',
    '2',
    '-subj',
    '/CN=127.0.0.1',
    '-addext',
    'subjectAltName=IP:127.0.0.1',
  ]);
  openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-out', otherKeyFile]);
}
after(() => rmSync(certDir, { recursive: true, force: true }));
const skip = hasOpenssl ? false : 'openssl is not installed';

interface Answer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** One request over node:http or node:https (fetch cannot be given the test CA or a source address). */
function send(
  url: string,
  options: { headers?: Record<string, string>; localAddress?: string; ca?: Buffer } = {},
): Promise<Answer> {
  const target = new URL(url);
  const client = target.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const request = client.request(
      target,
      { headers: options.headers, localAddress: options.localAddress, ca: options.ca, agent: false },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            body: Buffer.concat(chunks).toString(),
          }),
        );
      },
    );
    request.on('error', reject);
    request.end();
  });
}

/** A route behind the real guard (no module data needed), an HTML page without the API CSP, a route CSP. */
function extraRoutes(scope: FastifyInstance, { basicAuth }: ModuleOptions): void {
  scope.get('/tls-probe', { preHandler: basicAuth({ operation: 'OprnApi' }) }, async () => ({ ok: true }));
  scope.get('/tls-probe/html', { config: { csp: false } }, async (_request, reply) =>
    reply.type('text/html').send('<p>docs</p>'),
  );
  scope.get('/tls-probe/own-csp', async (_request, reply) =>
    reply.header('content-security-policy', "default-src 'self'").send({ ok: true }),
  );
}

/** A logger whose lines the test can read. */
function capturingLogger(): { logger: pino.Logger; lines: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines: () => text };
}

function assertUnauthorized(answer: Answer): void {
  assert.equal(answer.status, 401);
  assert.equal(answer.headers['www-authenticate'], 'Basic realm="OpenEyes"');
  assert.match(answer.headers['content-type'] ?? '', /^application\/json/);
  assert.equal(JSON.parse(answer.body), '401 Unauthorized');
}

describe('TLS configuration', { skip }, () => {
  it('reads TLS_CERT and TLS_KEY at start', () => {
    const config = loadConfig({ TLS_CERT: certFile, TLS_KEY: keyFile });
    assert.ok(config.tls?.cert.toString().includes('BEGIN CERTIFICATE'));
    assert.ok(config.tls?.key.toString().includes('PRIVATE KEY'));
  });

  it('lists a missing file, a file that is not PEM, a key of another certificate and a lone setting', () => {
    const problemsOf = (env: Record<string, string>) => {
      try {
        loadConfig(env);
      } catch (error) {
        if (error instanceof ConfigError) return error.problems.join('\n');
        throw error;
      }
      return '';
    };
    assert.match(
      problemsOf({ TLS_CERT: path.join(certDir, 'nope.pem'), TLS_KEY: keyFile }),
      /TLS_CERT cannot be read/,
    );
    const junk = path.join(certDir, 'junk.pem');
    writeFileSync(junk, 'not a certificate');
    const both = problemsOf({ TLS_CERT: junk, TLS_KEY: junk });
    assert.match(both, /TLS_CERT is not a PEM certificate/);
    assert.match(both, /TLS_KEY is not a PEM private key/);
    assert.match(problemsOf({ TLS_CERT: certFile, TLS_KEY: otherKeyFile }), /TLS_KEY does not match/);
    assert.match(problemsOf({ TLS_CERT: certFile }), /TLS_CERT and TLS_KEY must be set together/);
  });

  it('requires TLS for credentials by default in production only, and REQUIRE_TLS overrides it', () => {
    assert.equal(loadConfig({}).requireTls, false);
    assert.equal(loadConfig({ NODE_ENV: 'production' }).requireTls, true);
    assert.equal(loadConfig({ NODE_ENV: 'production', REQUIRE_TLS: 'off' }).requireTls, false);
    assert.equal(loadConfig({ REQUIRE_TLS: 'on' }).requireTls, true);
  });
});

forEachDialect((dialect) => {
  describe(`HTTPS served by the app [${dialect}]`, { skip }, () => {
    let app: TestApp;
    let ca: Buffer;
    before(async () => {
      app = await startTestApp(dialect, {
        env: { TLS_CERT: certFile, TLS_KEY: keyFile, REQUIRE_TLS: 'on' },
        extraRoutes,
      });
      ca = app.config.tls!.cert;
    });
    after(() => app.close());

    it('answers over HTTPS with HSTS and the security headers, and accepts Basic credentials', async () => {
      assert.match(app.baseUrl, /^https:/);
      const user = await createUser(app.db);
      const answer = await send(`${app.baseUrl}/tls-probe`, {
        headers: { authorization: user.authorization },
        ca,
      });
      assert.equal(answer.status, 200);
      assert.deepEqual(JSON.parse(answer.body), { ok: true });
      assert.equal(answer.headers['strict-transport-security'], 'max-age=31536000; includeSubDomains');
      assert.equal(answer.headers['x-content-type-options'], 'nosniff');
      assert.equal(answer.headers['x-frame-options'], 'DENY');
      assert.equal(answer.headers['referrer-policy'], 'no-referrer');
      assert.equal(answer.headers['content-security-policy'], "default-src 'none'; frame-ancestors 'none'");
      assert.equal(answer.headers['cache-control'], 'no-store');
    });

    it('a real protected route works over HTTPS', async () => {
      const user = await createUser(app.db);
      const answer = await send(`${app.baseUrl}/api/v1/patient/search?term=zzzznotfound`, {
        headers: { authorization: user.authorization },
        ca,
      });
      assert.equal(answer.status, 200);
      assert.equal(answer.headers['strict-transport-security'], 'max-age=31536000; includeSubDomains');
    });

    it('refuses a plain-HTTP connection to the HTTPS port', async () => {
      await assert.rejects(send(app.baseUrl.replace('https:', 'http:') + '/healthz'));
    });
  });

  describe(`REQUIRE_TLS=on behind a trusted proxy [${dialect}]`, () => {
    let app: TestApp;
    let log: ReturnType<typeof capturingLogger>;
    before(async () => {
      log = capturingLogger();
      app = await startTestApp(dialect, {
        // A failure brake of one per minute: refusals over plain HTTP must not count as failed logins.
        env: { REQUIRE_TLS: 'on', TRUSTED_PROXIES: '127.0.0.1', AUTH_FAILURE_LIMIT_PER_MINUTE: '1' },
        extraRoutes,
        logger: log.logger,
      });
    });
    after(() => app.close());

    it('refuses valid Basic credentials over plain HTTP with the 401 contract, logging plain_http only', async () => {
      const user = await createUser(app.db);
      const answer = await send(`${app.baseUrl}/tls-probe`, {
        headers: { authorization: user.authorization },
      });
      assertUnauthorized(answer);
      assert.equal(answer.headers['strict-transport-security'], undefined);
      assert.match(log.lines(), /"reason":"plain_http"/);
      assert.ok(!log.lines().includes(user.password));
      assert.ok(!log.lines().includes(user.authorization.slice('Basic '.length)));
    });

    it('refuses them on a real route too, and a request without credentials gets the usual 401', async () => {
      const user = await createUser(app.db);
      assertUnauthorized(
        await send(`${app.baseUrl}/api/v1/patient/search?term=zzzznotfound`, {
          headers: { authorization: user.authorization },
        }),
      );
      assertUnauthorized(await send(`${app.baseUrl}/tls-probe`));
    });

    it('refuses before any password check: wrong passwords over plain HTTP are never throttled', async () => {
      const user = await createUser(app.db);
      // One client behind the trusted proxy, apart from the other tests' address.
      const client = { 'x-forwarded-for': '198.51.100.7' };
      const wrong = { ...client, authorization: basicHeader(user.username, 'not-the-password') };
      for (let i = 0; i < 3; i += 1) {
        assertUnauthorized(await send(`${app.baseUrl}/tls-probe`, { headers: wrong }));
      }
      const answer = await send(`${app.baseUrl}/tls-probe`, {
        headers: { ...client, authorization: user.authorization, 'x-forwarded-proto': 'https' },
      });
      assert.equal(answer.status, 200);
    });

    it('accepts them when the trusted proxy says X-Forwarded-Proto: https, and sends HSTS', async () => {
      const user = await createUser(app.db);
      const answer = await send(`${app.baseUrl}/tls-probe`, {
        headers: {
          authorization: user.authorization,
          'x-forwarded-proto': 'https',
          'x-forwarded-for': '198.51.100.8',
        },
        localAddress: '127.0.0.1',
      });
      assert.equal(answer.status, 200);
      assert.equal(answer.headers['strict-transport-security'], 'max-age=31536000; includeSubDomains');
    });

    it('ignores X-Forwarded-Proto from a peer that is not a trusted proxy', async () => {
      const user = await createUser(app.db);
      const answer = await send(`${app.baseUrl}/tls-probe`, {
        headers: { authorization: user.authorization, 'x-forwarded-proto': 'https' },
        localAddress: '127.0.0.2',
      });
      assertUnauthorized(answer);
      assert.equal(answer.headers['strict-transport-security'], undefined);
    });

    it('leaves a route without the API CSP when its config says so, and never overwrites a route CSP', async () => {
      const html = await send(`${app.baseUrl}/tls-probe/html`);
      assert.equal(html.status, 200);
      assert.equal(html.headers['content-security-policy'], undefined);
      assert.equal(html.headers['x-frame-options'], 'DENY');
      const own = await send(`${app.baseUrl}/tls-probe/own-csp`);
      assert.equal(own.headers['content-security-policy'], "default-src 'self'");
    });

    it('sends the security headers on errors too (404), without HSTS over plain HTTP', async () => {
      const answer = await send(`${app.baseUrl}/no/such/route`);
      assert.equal(answer.status, 404);
      assert.equal(answer.headers['x-frame-options'], 'DENY');
      assert.equal(answer.headers['referrer-policy'], 'no-referrer');
      assert.equal(answer.headers['content-security-policy'], "default-src 'none'; frame-ancestors 'none'");
      assert.equal(answer.headers['strict-transport-security'], undefined);
    });
  });

  describe(`REQUIRE_TLS off (development) [${dialect}]`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect, { env: { REQUIRE_TLS: 'off' }, extraRoutes });
    });
    after(() => app.close());

    it('accepts Basic credentials over plain HTTP and sends no HSTS', async () => {
      const user = await createUser(app.db);
      const answer = await send(`${app.baseUrl}/tls-probe`, {
        headers: { authorization: user.authorization },
      });
      assert.equal(answer.status, 200);
      assert.equal(answer.headers['strict-transport-security'], undefined);
    });
  });
});
