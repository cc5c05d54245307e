/**
 * `HL7_TLS`: MLLP inside TLS with the server's certificate (a self-signed one made by `openssl`), read
 * by `@medplum/hl7`'s `Hl7Connection` over a TLS socket; a plain MLLP client gets nothing.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect as connectPlain } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { connect as connectTls } from 'node:tls';
import { Hl7Message } from '@medplum/core';
import { Hl7Connection } from '@medplum/hl7';
import { createPasInstallation, newHospitalNumber } from '../../../test/factories-pasapi.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import { loadConfig } from '../../config.ts';
import { createLogger } from '../../logger.ts';
import { createAuditTrail } from '../audit/index.ts';
import type { Hl7Server } from './index.ts';
import { startHl7Server } from './index.ts';

const hasOpenssl = spawnSync('openssl', ['version']).status === 0;
const certDir = mkdtempSync(path.join(tmpdir(), 'cra-hl7-tls-'));
const certFile = path.join(certDir, 'cert.pem');
const keyFile = path.join(certDir, 'key.pem');
if (hasOpenssl) {
  const result = spawnSync(
    'openssl',
    [
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
    ],
    { encoding: 'utf8' },
  );
  if (result.status !== 0) throw new Error(`openssl: ${result.stderr}`);
}
after(() => rmSync(certDir, { recursive: true, force: true }));
const skip = hasOpenssl ? false : 'openssl is not installed';

forEachDialect((dialect) => {
  describe(`HL7 MLLP listener with HL7_TLS (${dialect})`, { skip }, () => {
    let app: TestApp;
    let server: Hl7Server;
    let typeKey: string;

    before(async () => {
      app = await startTestApp(dialect);
      typeKey = (await createPasInstallation(app.db)).typeKey;
      const loaded = loadConfig({
        TLS_CERT: certFile,
        TLS_KEY: keyFile,
        HL7_PORT: '0',
        HL7_HOST: '127.0.0.1',
        HL7_TLS: 'on',
        HL7_ALLOWED_SENDERS: 'PAS^RHS@127.0.0.1',
      });
      server = await startHl7Server({
        database: app.database,
        config: {
          ...app.config,
          ...(loaded.tls === undefined ? {} : { tls: loaded.tls }),
          hl7: {
            ...loaded.hl7,
            fieldMap: {
              ...loaded.hl7.fieldMap,
              localIdentifiers: [{ authority: 'PAS', identifierType: typeKey }],
            },
          },
        },
        logger: createLogger('silent'),
        auditTrail: createAuditTrail(app.database),
      });
    });
    after(async () => {
      await server?.stop();
      await app?.close();
    });

    it('answers AA inside TLS, and nothing to a plain MLLP client', async () => {
      const socket = connectTls({ host: '127.0.0.1', port: server.port, ca: readFileSync(certFile) });
      await once(socket, 'secureConnect');
      const connection = new Hl7Connection(socket);
      const number = newHospitalNumber();
      const ack = await connection.sendAndWait(
        Hl7Message.parse(
          `MSH|^~\\&|PAS|RHS|CRA|EYE|20260301120000||ADT^A28^ADT_A05|TLS-1|P|2.4\rPID|1||${number}^^^PAS^MR||Tlsperson^Kim||19900305|F`,
        ),
        { timeoutMs: 20_000 },
      );
      assert.equal(ack.getSegment('MSA')?.getField(1)?.toString(), 'AA');
      await connection.close();

      const plain = connectPlain(server.port, '127.0.0.1');
      await once(plain, 'connect');
      let answered = '';
      plain.on('data', (chunk: Buffer) => (answered += chunk.toString('latin1')));
      plain.on('error', () => {});
      plain.write(`\x0bMSH|^~\\&|PAS|RHS|CRA|EYE|20260301120000||ADT^A28|TLS-2|P|2.4\x1c\r`);
      await once(plain, 'close');
      assert.doesNotMatch(answered, /MSA/);
    });
  });
});
