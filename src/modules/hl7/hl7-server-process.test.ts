/**
 * The server process with `HL7_PORT`: the listener starts with the API, answers `mllp_send` with the
 * demo-less database's LOCAL type, closes a connection whose frame outgrows `HL7_MAX_MESSAGE_BYTES`, and
 * stops with the server on SIGTERM.
 */
// test-needs: processes
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createPasInstallation, newHospitalNumber } from '../../../test/factories-pasapi.ts';
import type { TestDatabase } from '../../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../../test/harness.ts';
import { until } from '../../../test/until.ts';

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

forEachDialect((dialect) => {
  describe(`server process with HL7_PORT [${dialect}]`, () => {
    let testDb: TestDatabase;
    before(async () => {
      testDb = await createTestDatabase(dialect);
    });
    after(() => testDb.drop());

    it('starts the listener with the server, answers mllp_send, bounds a frame, and stops on SIGTERM', async () => {
      const pas = await createPasInstallation(testDb.db);
      const mapFile = path.join(testDb.filesDir, '..', 'field-map.json');
      await writeFile(
        mapFile,
        JSON.stringify({ localIdentifiers: [{ authority: 'PAS', identifierType: pas.typeKey }] }),
      );
      const hl7Port = await freePort();
      const child = spawn(process.execPath, [new URL('../../main/server.ts', import.meta.url).pathname], {
        env: {
          ...process.env,
          ...testDb.env,
          PORT: '0',
          HOST: '127.0.0.1',
          LOG_LEVEL: 'info',
          DEMO_DATA: 'off',
          HL7_PORT: String(hl7Port),
          HL7_ALLOWED_SENDERS: 'PAS^RHS@127.0.0.1',
          HL7_FIELD_MAP_FILE: mapFile,
          HL7_MAX_MESSAGE_BYTES: '2048',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      after(() => child.kill('SIGKILL'));
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      await until(() => output.includes('clinical-records-api ready'), {
        what: 'the server',
        timeoutMs: 60_000,
      });
      assert.match(output, /"msg":"HL7 MLLP listener listening"/);

      const number = newHospitalNumber();
      const file = path.join(testDb.filesDir, '..', 'a28.hl7');
      await writeFile(
        file,
        `MSH|^~\\&|PAS|RHS|CRA|EYE|20260301120000||ADT^A28^ADT_A05|PROC-1|P|2.4\rPID|1||${number}^^^PAS^MR||Processperson^Kim||19900305|F\n`,
      );
      const sent = spawn('mllp_send', ['--loose', '-p', String(hl7Port), '-f', file, '127.0.0.1']);
      let ack = '';
      sent.stdout.on('data', (chunk: Buffer) => (ack += chunk.toString('latin1')));
      const [code] = (await once(sent, 'exit')) as [number | null];
      assert.equal(code, 0);
      assert.match(ack, /\rMSA\|AA\|PROC-1/);
      const patient = await testDb.db
        .selectFrom('patient_identifier')
        .select('patient_id')
        .where('patient_identifier_type_id', '=', pas.localTypeId)
        .where('value', '=', number)
        .executeTakeFirst();
      assert.ok(patient !== undefined, 'the patient was created');

      // A frame beyond HL7_MAX_MESSAGE_BYTES: the connection is closed, nothing answered.
      const socket = connect(hl7Port, '127.0.0.1');
      await once(socket, 'connect');
      let answered = '';
      socket.on('data', (chunk: Buffer) => (answered += chunk.toString('latin1')));
      socket.on('error', () => {});
      socket.write(Buffer.concat([Buffer.from([0x0b]), Buffer.from('MSH|^~\\&|'), Buffer.alloc(4096, 0x41)]));
      await once(socket, 'close');
      assert.equal(answered, '');

      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const [exitCode] = (await exited) as [number | null];
      assert.equal(exitCode, 0);
      assert.match(output, /"msg":"HL7 MLLP listener stopped"/);
      assert.match(output, /"msg":"HL7 message answered"/);
      assert.doesNotMatch(output, /Processperson/);
      assert.doesNotMatch(output, new RegExp(`[^0-9]${number}[^0-9]`));
    });
  });
});
