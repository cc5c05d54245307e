import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { CONFIG_SECTIONS, ConfigError, loadConfig } from './config.ts';
import type { Setting } from './config.ts';
import { withConfigTable } from './config-table.ts';

describe('loadConfig', () => {
  it('gives defaults that run the embedded database with no environment at all', () => {
    const config = loadConfig({});
    assert.equal(config.port, 8080);
    assert.deepEqual(config.database, { kind: 'sqlite', file: path.resolve('data/records.db') });
    assert.equal(config.institutionCode, 'NEW');
    assert.equal(config.worker, 'in-process');
    assert.equal(config.demoData, 'auto');
    // What a signature needs (a tablet's PNG is well under 1 MB); more would only fill the disk.
    assert.equal(config.limits.signatureBodyBytes, 2 * 1024 * 1024);
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

  it('audits reads asynchronously by default, with bounds an operator can change, and checks them', () => {
    const config = loadConfig({});
    assert.deepEqual(
      [config.auditReads, config.auditFlushMs, config.auditMaxBacklog, config.auditMaxLagMs],
      ['async', 50, 10_000, 5_000],
    );
    const durable = loadConfig({ AUDIT_READS: 'Durable', AUDIT_FLUSH_MS: '10', AUDIT_MAX_LAG_MS: '1000' });
    assert.deepEqual(
      [durable.auditReads, durable.auditFlushMs, durable.auditMaxLagMs],
      ['durable', 10, 1000],
    );
    assert.throws(() => loadConfig({ AUDIT_READS: 'later' }), /AUDIT_READS/);
    assert.throws(() => loadConfig({ AUDIT_MAX_BACKLOG: '0' }), /AUDIT_MAX_BACKLOG/);
    assert.throws(
      () => loadConfig({ AUDIT_FLUSH_MS: '2000', AUDIT_MAX_LAG_MS: '1000' }),
      /AUDIT_MAX_LAG_MS must be larger than AUDIT_FLUSH_MS/,
    );
  });

  it('reads the DICOM receiving settings: SCP off by default, callers as TITLE@address, @subnet or @*', () => {
    const off = loadConfig({}).dicomNetwork;
    assert.deepEqual(off, {
      port: undefined,
      aeTitle: 'CRA',
      allowedCallers: [],
      duplicates: 'new-request',
      maxAssociations: 16,
      maxAssociationsPerAe: 8,
      maxAssociationsPerAddress: 8,
      maxConnections: 64,
      maxConnectionsPerAddress: 16,
      maxUnassociatedConnections: 32,
      associationTimeoutMs: 5000,
      remoteNodes: [],
      qrCallers: [],
      qrMaxAnswers: 1000,
      qrMaxRetrieve: 10_000,
      moveDestinations: [],
      commitmentMaxInstances: 10_000,
    });
    const on = loadConfig({
      DICOM_PORT: '11112',
      DICOM_AE_TITLE: ' EYE_CLINIC ',
      DICOM_ALLOWED_CALLERS: 'TOPCON1@10.1.2.3, PACS ROUTER@* ,ZEISS@::1, LAB@10.9.0.0/16',
      DICOM_DUPLICATES: 'refuse',
    }).dicomNetwork;
    assert.equal(on.port, 11112);
    assert.equal(on.aeTitle, 'EYE_CLINIC');
    assert.equal(on.duplicates, 'refuse');
    assert.deepEqual(on.allowedCallers, [
      { aeTitle: 'TOPCON1', address: '10.1.2.3' },
      { aeTitle: 'PACS ROUTER', address: '*' },
      { aeTitle: 'ZEISS', address: '::1' },
      { aeTitle: 'LAB', address: '10.9.0.0/16' },
    ]);
    // A bare title would be allowed from anywhere without anyone having said so.
    assert.throws(
      () => loadConfig({ DICOM_PORT: '11112', DICOM_ALLOWED_CALLERS: 'PACSROUTER' }),
      /"PACSROUTER" names no address: write PACSROUTER@<ip-address>/,
    );
    assert.throws(() => loadConfig({ DICOM_ALLOWED_CALLERS: 'A@10.0.0.0/33' }), /must name an IP address/);
    assert.throws(
      () => loadConfig({ DICOM_MAX_CONNECTIONS: '8', DICOM_MAX_ASSOCIATIONS: '16' }),
      /DICOM_MAX_CONNECTIONS must be at least DICOM_MAX_ASSOCIATIONS/,
    );
    assert.throws(() => loadConfig({ DICOM_PORT: '11112' }), /DICOM_ALLOWED_CALLERS must name at least one/);
    assert.throws(
      () => loadConfig({ DICOM_ALLOWED_CALLERS: 'A@not-an-address,WAY_TOO_LONG_AE_TITLE_X@*,BACK\\SLASH@*' }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.equal(error.problems.length, 3);
        return true;
      },
    );
    assert.throws(() => loadConfig({ DICOM_DUPLICATES: 'ignore' }), /DICOM_DUPLICATES/);
  });

  it('reads the remote nodes as TITLE@host:port, every bad item listed', () => {
    const { remoteNodes } = loadConfig({
      DICOM_REMOTE_NODES: 'IOLM700@10.1.2.3:104, HFA3@[::1]:11112 ,CIRRUS@cirrus-1.example:4242',
    }).dicomNetwork;
    assert.deepEqual(remoteNodes, [
      { aeTitle: 'IOLM700', host: '10.1.2.3', port: 104 },
      { aeTitle: 'HFA3', host: '::1', port: 11112 },
      { aeTitle: 'CIRRUS', host: 'cirrus-1.example', port: 4242 },
    ]);
    assert.throws(
      () => loadConfig({ DICOM_REMOTE_NODES: 'NOPORT@10.1.2.3,A@10.1.2.3:0,B@bad_host!:104,A@10.1.2.4:104' }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.deepEqual(error.problems, [
          'DICOM_REMOTE_NODES: "NOPORT@10.1.2.3" must be TITLE@host:port',
          'DICOM_REMOTE_NODES: "A@10.1.2.3:0" must end with a port from 1 to 65535',
          'DICOM_REMOTE_NODES: "B@bad_host!:104" must name an IP address or a host name before the port',
          'DICOM_REMOTE_NODES: "A" is listed twice',
        ]);
        return true;
      },
    );
  });

  it('reads the query/retrieve callers, each in DICOM_ALLOWED_CALLERS too', () => {
    const { qrCallers, qrMaxAnswers } = loadConfig({
      DICOM_ALLOWED_CALLERS: 'VIEWER@10.1.2.3,HFA3@*',
      DICOM_QR_CALLERS: 'VIEWER@10.1.2.0/24',
    }).dicomNetwork;
    assert.deepEqual(qrCallers, [{ aeTitle: 'VIEWER', address: '10.1.2.0/24' }]);
    assert.equal(qrMaxAnswers, 1000);
    assert.deepEqual(loadConfig({}).dicomNetwork.qrCallers, []);
    assert.throws(
      () => loadConfig({ DICOM_ALLOWED_CALLERS: 'HFA3@*', DICOM_QR_CALLERS: 'VIEWER,PACS@10.1.2.3' }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.deepEqual(error.problems, [
          'DICOM_QR_CALLERS: "VIEWER" names no address: write VIEWER@<ip-address>, VIEWER@<subnet>/<bits>, or VIEWER@* for any address',
          'DICOM_QR_CALLERS: "PACS" is not in DICOM_ALLOWED_CALLERS',
        ]);
        return true;
      },
    );
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

describe('the README configuration table', () => {
  it('is the one the settings of config.ts give (run npm run docs:config after changing a setting)', () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const generated = withConfigTable(readme);
    assert.ok(generated !== undefined, 'README.md has the config-table markers');
    assert.equal(readme, generated, 'README.md differs from npm run docs:config');
  });

  it('names every variable once, with a default and a line of its own', () => {
    const variables = CONFIG_SECTIONS.flatMap((section): string[] =>
      Object.values(section.settings as Record<string, Setting<unknown, unknown>>).map((setting) => {
        assert.ok(setting.shown.length > 0 && setting.doc.length > 0, setting.variable);
        return setting.variable;
      }),
    );
    assert.equal(new Set(variables).size, variables.length);
    // Every variable config.ts reads is a setting of a section (NODE_ENV only shapes REQUIRE_TLS's default).
    const source = readFileSync(new URL('./config.ts', import.meta.url), 'utf8');
    const read = new Set(
      [...source.matchAll(/(?:\(\s*'([A-Z][A-Z0-9_]+)',|read\('([A-Z][A-Z0-9_]+)'\))/g)].map(
        (match) => match[1] ?? match[2]!,
      ),
    );
    assert.ok(read.size > 60, `${read.size} variables read`);
    for (const name of read) if (name !== 'NODE_ENV') assert.ok(variables.includes(name), name);
  });
});
