/**
 * `npm run cli -- pas replay FILE` as a child process on every dialect: a backlog file built here for
 * synthetic patients (plain lines, and MLLP frames), applied in order through the listener's own path.
 * Each case asserts the exit status, the counts printed and what was (or was not) written.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { countRows } from '../../../test/factories.ts';
import type { PasInstallation } from '../../../test/factories-pasapi.ts';
import { createPasInstallation, newHospitalNumber, newNhsNumber } from '../../../test/factories-pasapi.ts';
import type { TestDatabase } from '../../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../../test/harness.ts';
import { spawnCli } from '../../../test/run-cli.ts';
import { readHl7File } from './hl7-file.ts';

interface AdtValues {
  readonly event: string;
  readonly controlId: string;
  readonly hospitalNumber: string;
  readonly nhsNumber?: string;
  readonly surname: string;
  readonly given: string;
  readonly dob?: string;
  readonly application?: string;
}

let controlCounter = 0;
const newControlId = () => `R${process.pid}-${Date.now()}-${(controlCounter += 1)}`;

/** An ADT message's segments for a synthetic patient. */
function adt(values: AdtValues): string[] {
  const structure = values.event === 'A28' || values.event === 'A31' ? 'ADT_A05' : 'ADT_A01';
  const pid3 = [
    `${values.hospitalNumber}^^^PAS^MR`,
    ...(values.nhsNumber === undefined ? [] : [`${values.nhsNumber}^^^NHS^NH`]),
  ].join('~');
  return [
    `MSH|^~\\&|${values.application ?? 'OLDPAS'}|RHS|CRA|EYE|20260301120000||ADT^${values.event}^${structure}|${values.controlId}|P|2.4|||AL|NE`,
    `EVN|${values.event}|20260301120000`,
    `PID|1||${pid3}||${values.surname}^${values.given}^^^mr||${values.dob ?? '19750611'}|M|||2 Replay Street^^Testcity^^TE2 2ST^^H`,
  ];
}

/** Messages as a plain backlog: each message's segments on lines ended by `eol`. */
const plainFile = (messages: readonly string[][], eol = '\r\n') =>
  Buffer.from(messages.map((segments) => segments.join(eol) + eol).join(''), 'latin1');

/** Messages as MLLP frames, one a line (as a channel's archive writes them). */
const mllpFile = (messages: readonly string[][]) =>
  Buffer.from(messages.map((segments) => `\x0b${segments.join('\r')}\r\x1c\r\n`).join(''), 'latin1');

describe('readHl7File', () => {
  it('splits plain (CR LF, LF, CR) and MLLP files into the same messages whatever the chunk size', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'cra-hl7file-'));
    try {
      const messages = Array.from({ length: 5 }, (_, i) =>
        adt({ event: 'A28', controlId: `C${i}`, hospitalNumber: `H${i}`, surname: 'Chunk', given: 'Z' }),
      );
      const expected = messages.map((segments) => segments.join('\r'));
      const files: [string, Buffer][] = [
        ['crlf', Buffer.concat([Buffer.from('\r\n\r\n'), plainFile(messages, '\r\n\r\n')])],
        ['lf', plainFile(messages, '\n')],
        ['cr', plainFile(messages, '\r')],
        ['mllp', mllpFile(messages)],
      ];
      for (const [name, bytes] of files) {
        const file = path.join(dir, `${name}.hl7`);
        await writeFile(file, bytes);
        for (const chunkBytes of [1, 2, 7, 64 * 1024]) {
          const read: string[] = [];
          const lines: number[] = [];
          for await (const item of readHl7File(file, { maxMessageBytes: 1024, chunkBytes })) {
            assert.ok(item.bytes !== undefined, `${name} ${chunkBytes}: ${item.problem}`);
            read.push(item.bytes.toString('latin1'));
            lines.push(item.line);
          }
          // A frame keeps its last segment's CR; plain lines are joined by CR.
          const want = name === 'mllp' ? expected.map((m) => `${m}\r`) : expected;
          assert.deepEqual(read, want, `${name} in chunks of ${chunkBytes}`);
          if (name === 'lf') assert.deepEqual(lines, [1, 4, 7, 10, 13]);
          if (name === 'mllp') assert.deepEqual(lines, [1, 2, 3, 4, 5]);
        }
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

forEachDialect((dialect) => {
  describe(`npm run cli -- pas replay (${dialect})`, () => {
    let t: TestDatabase;
    let pas: PasInstallation;
    let dir: string;
    let env: Record<string, string>;

    before(async () => {
      t = await createTestDatabase(dialect);
      pas = await createPasInstallation(t.db);
      dir = await mkdtemp(path.join(tmpdir(), 'cra-replay-'));
      const mapFile = path.join(dir, 'field-map.json');
      await writeFile(
        mapFile,
        JSON.stringify({ localIdentifiers: [{ authority: 'PAS', identifierType: pas.typeKey }] }),
      );
      // No HL7_PORT and no HL7_ALLOWED_SENDERS: a replay is an operator's action, senders are not checked.
      env = { ...t.env, HL7_FIELD_MAP_FILE: mapFile };
    });
    after(async () => {
      await t?.drop();
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    });

    let fileCounter = 0;
    async function replay(bytes: Buffer, ...options: string[]) {
      const file = path.join(dir, `backlog-${(fileCounter += 1)}.hl7`);
      await writeFile(file, bytes);
      return spawnCli(env, ['pas', 'replay', file, ...options]);
    }

    async function patientOf(hospitalNumber: string) {
      return t.db
        .selectFrom('patient_identifier as pi')
        .innerJoin('patient as p', 'p.id', 'pi.patient_id')
        .innerJoin('contact as c', 'c.id', 'p.contact_id')
        .select(['p.id', 'p.dob', 'c.first_name', 'c.last_name'])
        .where('pi.patient_identifier_type_id', '=', pas.localTypeId)
        .where('pi.value', '=', hospitalNumber)
        .executeTakeFirst();
    }

    const loggedAnswers = async (sender: string) =>
      (
        await sql<{ control_id: string; ack_code: string }>`
          select control_id, ack_code from ${sql.table('hl7_message')} where sender = ${sender}
          order by id`.execute(t.db)
      ).rows;

    it('creates and updates patients, answers a duplicate without applying it twice, reports a bad message and applies the rest', async () => {
      const [n1, n2, n3] = [newHospitalNumber(), newHospitalNumber(), newHospitalNumber()];
      const nhs1 = newNhsNumber();
      const ids = Array.from({ length: 6 }, newControlId);
      const people = [
        { surname: 'Replayone', given: 'Quentin' },
        { surname: 'Replaytwo', given: 'Rosalind' },
        { surname: 'Replaythree', given: 'Sebastian' },
      ];
      const messages = [
        adt({ event: 'A28', controlId: ids[0]!, hospitalNumber: n1, nhsNumber: nhs1, ...people[0]! }),
        adt({ event: 'A28', controlId: ids[1]!, hospitalNumber: n2, ...people[1]! }),
        // The same control id again, with other values: answered as the first time, not applied.
        adt({ event: 'A08', controlId: ids[1]!, hospitalNumber: n2, surname: 'Notapplied', given: 'Never' }),
        // An impossible date of birth: AE, nothing changed, and the replay goes on.
        adt({ event: 'A08', controlId: ids[2]!, hospitalNumber: n1, ...people[0]!, dob: '19751341' }),
        // A message type not handled: AR.
        [`MSH|^~\\&|OLDPAS|RHS|CRA|EYE|20260301120000||ORU^R01^ORU_R01|${ids[3]!}|P|2.4`, 'PID|1||x'],
        adt({ event: 'A28', controlId: ids[4]!, hospitalNumber: n3, ...people[2]! }),
        adt({ event: 'A08', controlId: ids[5]!, hospitalNumber: n1, surname: 'Replayone', given: 'Quincy' }),
      ];
      const patientsBefore = await countRows(t.db, 'patient');
      const result = await replay(plainFile(messages), '--progress-every', '1');

      assert.equal(result.status, 1, 'an AE or AR makes the exit status 1');
      assert.match(
        result.stdout,
        /Replayed 7 message\(s\) in .*: 4 applied, 1 answered AA before \(duplicates\), 1 AE, 1 AR/,
      );
      assert.equal(await countRows(t.db, 'patient'), patientsBefore + 3);
      assert.deepEqual(
        { ...(await patientOf(n1)), id: 0 },
        { id: 0, dob: '1975-06-11', first_name: 'Quincy', last_name: 'Replayone' },
      );
      assert.equal((await patientOf(n2))?.last_name, 'Replaytwo', 'the duplicate was not applied');
      assert.equal((await patientOf(n3))?.last_name, 'Replaythree', 'messages after the bad ones applied');
      assert.deepEqual(await loggedAnswers('OLDPAS^RHS'), [
        { control_id: ids[0], ack_code: 'AA' },
        { control_id: ids[1], ack_code: 'AA' },
        { control_id: ids[2], ack_code: 'AE' },
        { control_id: ids[4], ack_code: 'AA' },
        { control_id: ids[5], ack_code: 'AA' },
      ]);

      // One audit row per message, the operator's command line as the request.
      const audit = await sql<{ action: string; request_id: string; client_address: string | null }>`
        select action, request_id, client_address from ${sql.table('audit_event')}
        where action like 'hl7.%' order by id`.execute(t.db);
      assert.deepEqual(
        audit.rows.map((r) => r.action),
        [
          'hl7.patient',
          'hl7.patient',
          'hl7.patient',
          'hl7.patient',
          'hl7.refused',
          'hl7.patient',
          'hl7.patient',
        ],
      );
      assert.equal(new Set(audit.rows.map((r) => r.request_id)).size, 1);
      assert.match(audit.rows[0]!.request_id, /^cli-/);
      assert.deepEqual(new Set(audit.rows.map((r) => r.client_address)), new Set([null]));

      // Progress with the counts, the bad messages by number, line and control id; no patient data.
      const progress = result.stderr.split('\n').filter((l) => l.startsWith('pas replay: '));
      assert.ok(progress.length >= 7, result.stderr);
      assert.match(
        progress.at(-1)!,
        /pas replay: 7 messages \(100% of the file\), \d+\/s; AA 5 \(duplicates 1\), AE 1, AR 1/,
      );
      assert.match(result.stderr, new RegExp(`message 4 \\(line 10, MSH-10 ${ids[2]!}\\): AE 102`));
      assert.match(result.stderr, new RegExp(`message 5 \\(line 13, MSH-10 ${ids[3]!}\\): AR 200`));
      for (const value of [
        n1,
        n2,
        n3,
        nhs1,
        'Replayone',
        'Replaytwo',
        'Replaythree',
        'Quentin',
        'Rosalind',
        'Notapplied',
        '1975',
        'Street',
      ])
        assert.equal(result.stderr.includes(value) || result.stdout.includes(value), false, value);
    });

    it('reads MLLP frames, exits 0 when all are applied, and answers a second replay as duplicates, changing nothing', async () => {
      const numbers = [newHospitalNumber(), newHospitalNumber(), newHospitalNumber()];
      const messages = numbers.map((hospitalNumber, i) =>
        adt({
          event: 'A28',
          controlId: newControlId(),
          hospitalNumber,
          surname: `Framed${'abc'[i]!}`,
          given: 'Tess',
          application: 'MLLPPAS',
        }),
      );
      // One transaction per message, as the listener commits them.
      const first = await replay(mllpFile(messages), '--batch', '1');
      assert.equal(first.status, 0, first.stderr);
      assert.match(
        first.stdout,
        /Replayed 3 message\(s\) .*: 3 applied, 0 answered AA before \(duplicates\), 0 AE, 0 AR/,
      );
      for (const [i, number] of numbers.entries())
        assert.equal((await patientOf(number))?.last_name, `Framed${'abc'[i]!}`);

      const counts = async () =>
        Promise.all(
          ['patient', 'contact', 'address', 'patient_identifier'].map((n) => countRows(t.db, n as 'patient')),
        );
      const before = await counts();
      const again = await replay(mllpFile(messages));
      assert.equal(again.status, 0, again.stderr);
      assert.match(again.stdout, /: 0 applied, 3 answered AA before \(duplicates\), 0 AE, 0 AR/);
      assert.deepEqual(await counts(), before);
      assert.equal((await loggedAnswers('MLLPPAS^RHS')).length, 3);
    });

    it('stops at the first AE with --stop-on-error, the messages before it applied and none after', async () => {
      const [good, bad, later] = [newHospitalNumber(), newHospitalNumber(), newHospitalNumber()];
      const messages = [
        adt({
          event: 'A28',
          controlId: newControlId(),
          hospitalNumber: good,
          surname: 'Stopa',
          given: 'Uma',
        }),
        adt({
          event: 'A28',
          controlId: newControlId(),
          hospitalNumber: bad,
          surname: 'Stopb',
          given: 'Uma',
          dob: '2026-99',
        }),
        adt({
          event: 'A28',
          controlId: newControlId(),
          hospitalNumber: later,
          surname: 'Stopc',
          given: 'Uma',
        }),
      ];
      // LF line ends, as a backlog edited on Unix has them.
      const result = await replay(plainFile(messages, '\n'), '--stop-on-error');
      assert.equal(result.status, 1);
      assert.match(result.stderr, /stopped at message 2 \(line 4\), answered AE \(--stop-on-error\)/);
      assert.match(
        result.stdout,
        /Replayed 2 message\(s\) .*: 1 applied, 0 answered AA before \(duplicates\), 1 AE, 0 AR/,
      );
      assert.ok((await patientOf(good)) !== undefined);
      assert.equal(await patientOf(bad), undefined);
      assert.equal(await patientOf(later), undefined, 'nothing after the stop is applied');
    });

    it('answers AR for lines that are not HL7 and for a message longer than HL7_MAX_MESSAGE_BYTES, and applies the rest', async () => {
      const number = newHospitalNumber();
      const long = adt({
        event: 'A28',
        controlId: newControlId(),
        hospitalNumber: newHospitalNumber(),
        surname: 'Long',
        given: 'X',
      });
      long.push(`NTE|1||${'x'.repeat(2048)}`);
      const text = Buffer.concat([
        Buffer.from('this is not a message\r\n'),
        plainFile([
          long,
          adt({
            event: 'A28',
            controlId: newControlId(),
            hospitalNumber: number,
            surname: 'Afterlong',
            given: 'Y',
          }),
        ]),
      ]);
      const result = await spawnCli({ ...env, HL7_MAX_MESSAGE_BYTES: '1024' }, [
        'pas',
        'replay',
        await (async () => {
          const file = path.join(dir, 'garbage.hl7');
          await writeFile(file, text);
          return file;
        })(),
      ]);
      assert.equal(result.status, 1);
      assert.match(
        result.stdout,
        /Replayed 3 message\(s\) .*: 1 applied, 0 answered AA before \(duplicates\), 0 AE, 2 AR/,
      );
      assert.match(result.stderr, /message 1 \(line 1\): AR 100/);
      assert.match(result.stderr, /message 2 \(line 2\): AR longer than HL7_MAX_MESSAGE_BYTES/);
      assert.equal((await patientOf(number))?.last_name, 'Afterlong');
    });

    it('refuses a file that cannot be read with exit 2', async () => {
      const result = await spawnCli(env, ['pas', 'replay', path.join(dir, 'no-such-file.hl7')]);
      assert.equal(result.status, 2);
      assert.match(result.stderr, /cannot read .*no-such-file\.hl7/);
    });
  });
});
