import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from './config.ts';

describe('loadConfig', () => {
  it('gives defaults that run the embedded database with no environment at all', () => {
    const config = loadConfig({});
    assert.equal(config.port, 8080);
    assert.deepEqual(config.database, { kind: 'sqlite', file: path.resolve('data/records.db') });
    assert.equal(config.institutionCode, 'NEW');
    assert.equal(config.worker, 'in-process');
    assert.equal(config.demoData, 'auto');
    assert.equal(config.limits.signatureBodyBytes, 10 * 1024 * 1024);
  });

  it('reads a PostgreSQL URL', () => {
    const config = loadConfig({ DATABASE_URL: 'postgres://u:p@127.0.0.1:5432/db' });
    assert.deepEqual(config.database, { kind: 'postgres', url: 'postgres://u:p@127.0.0.1:5432/db' });
  });

  it('lists every problem at once', () => {
    assert.throws(
      () =>
        loadConfig({
          PORT: 'eighty',
          DATABASE_URL: 'mysql://x',
          WORKER: 'maybe',
          DEMO_DATA: 'sometimes',
          LOG_LEVEL: 'loud',
        }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.equal(error.problems.length, 5);
        assert.match(error.message, /PORT/);
        assert.match(error.message, /DATABASE_URL/);
        assert.match(error.message, /WORKER/);
        assert.match(error.message, /DEMO_DATA/);
        assert.match(error.message, /LOG_LEVEL/);
        return true;
      },
    );
  });

  it('refuses out-of-range numbers and unknown flags', () => {
    assert.throws(() => loadConfig({ PORT: '70000' }), /PORT/);
    assert.throws(() => loadConfig({ REQUIRE_OPRNLOGIN: 'perhaps' }), /REQUIRE_OPRNLOGIN/);
    assert.throws(() => loadConfig({ TIME_ZONE: 'Mars/Olympus' }), /TIME_ZONE/);
  });
});

describe('limits on slow clients and failed logins', () => {
  it('has defaults that bound slow requests and login attempts', () => {
    const config = loadConfig({});
    assert.deepEqual(
      [config.headersTimeoutMs, config.requestTimeoutMs, config.bodyTimeoutMs, config.bodyMinBytesPerSecond],
      [15_000, 600_000, 10_000, 16_384],
    );
    assert.equal(config.maxRequestsPerClient, 32);
    assert.deepEqual(
      [
        config.authFailureFreeAttempts,
        config.authFailureMaxBackoffSeconds,
        config.authFailureLimitPerUsername,
        config.authConcurrentVerifications,
        config.authConcurrentVerificationsPerClient,
      ],
      [5, 900, 100, 4, 2],
    );
  });

  it('refuses a request time limit shorter than the header one, and a body rate of 0', () => {
    assert.throws(
      () => loadConfig({ HEADERS_TIMEOUT_MS: '20000', REQUEST_TIMEOUT_MS: '10000' }),
      /REQUEST_TIMEOUT_MS must be 0 or at least HEADERS_TIMEOUT_MS/,
    );
    assert.equal(loadConfig({ REQUEST_TIMEOUT_MS: '0' }).requestTimeoutMs, 0);
    assert.throws(() => loadConfig({ BODY_MIN_BYTES_PER_SECOND: '0' }), /BODY_MIN_BYTES_PER_SECOND/);
  });
});
