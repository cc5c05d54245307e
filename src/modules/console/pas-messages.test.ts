/**
 * The console's PAS messages over HTTP on every dialect: the messages a real MLLP listener answered
 * (sent by the HL7 library's client) and the PASAPI calls (over HTTP) listed with their outcome and
 * reason, filtered and paged, and an AE corrected and applied again by a request admin through the
 * listener's own code.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { formatDateTime } from '../../db/database.ts';
import { countRows, createUser } from '../../../test/factories.ts';
import { ConsoleClient, createOperator, csrfOf } from '../../../test/factories-console.ts';
import type { PasFeed } from '../../../test/factories-hl7.ts';
import {
  FEED_TYPE_KEY,
  adtMessage,
  createFeedIdentifierType,
  newControlId,
  pasFeedEnv,
  startPasFeed,
} from '../../../test/factories-hl7.ts';
import {
  createGpAndPractice,
  fullPatientXml,
  newHospitalNumber,
  pasapiPut,
} from '../../../test/factories-pasapi.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';

interface MessageRow {
  id: number;
  ack_code: string;
  ack_text: string | null;
  patient_id: number | null;
  message_text: string | null;
  message_type: string;
}

forEachDialect((dialect) => {
  describe(`console: PAS messages [${dialect}]`, () => {
    let app: TestApp;
    let feed: PasFeed;
    let dir: string;
    let typeId: number;

    before(async () => {
      dir = await mkdtemp(path.join(tmpdir(), 'cra-pas-messages-'));
      app = await startTestApp(dialect, { env: { TIME_ZONE: 'Europe/London', ...(await pasFeedEnv(dir)) } });
      typeId = await createFeedIdentifierType(app.db);
      feed = await startPasFeed(app);
    });
    after(async () => {
      await feed?.stop();
      await app?.close();
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    });

    const messageRow = async (controlId: string) =>
      (
        await sql<MessageRow>`select id, ack_code, ack_text, patient_id, message_text, message_type
          from hl7_message where control_id = ${controlId}`.execute(app.db)
      ).rows[0];

    const patientOf = (hospitalNumber: string) =>
      app.db
        .selectFrom('patient_identifier as pi')
        .innerJoin('patient as p', 'p.id', 'pi.patient_id')
        .select(['p.id', 'p.dob'])
        .where('pi.patient_identifier_type_id', '=', typeId)
        .where('pi.value', '=', hospitalNumber)
        .executeTakeFirst();

    /** A new patient's A28 with an impossible date of birth, answered AE; its row. */
    async function failedA28(): Promise<{
      number: string;
      controlId: string;
      text: string;
      row: MessageRow;
    }> {
      const number = newHospitalNumber();
      const controlId = newControlId();
      const text = adtMessage({ event: 'A28', controlId, hospitalNumber: number, dob: '19800231' });
      const ack = await feed.send(text);
      assert.equal(ack.code, 'AE');
      return { number, controlId, text, row: (await messageRow(controlId))! };
    }

    async function operatorClient(roles?: readonly string[]) {
      const client = new ConsoleClient(app);
      await client.signIn(await createOperator(app.db, roles));
      return client;
    }

    /** The fields of the correction form on message `id`'s page. */
    async function correctionForm(client: ConsoleClient, id: number) {
      const html = await (await client.get(`/console/pas-messages/${id}`)).text();
      const action = `/console/pas-messages/${id}/reapply`;
      const scope = html.slice(html.indexOf(`action="${action}"`));
      return {
        html,
        action,
        csrf: csrfOf(html, action),
        version: /name="version" value="([^"]*)"/.exec(scope)![1]!,
      };
    }

    it('keeps the text of a message answered AE, and none of one answered AA', async () => {
      const failed = await failedA28();
      assert.equal(failed.row.message_text, failed.text);
      assert.match(failed.row.ack_text ?? '', /PID-7\.1 is not a date of the calendar/);
      const controlId = newControlId();
      assert.equal(
        (await feed.send(adtMessage({ event: 'A28', controlId, hospitalNumber: newHospitalNumber() }))).code,
        'AA',
      );
      assert.equal((await messageRow(controlId))?.message_text, null);
    });

    it('lists the messages newest first with source, type, patient, outcome and reason, and links the AE to its page', async () => {
      const number = newHospitalNumber();
      const okId = newControlId();
      assert.equal(
        (
          await feed.send(
            adtMessage({ event: 'A28', controlId: okId, hospitalNumber: number, surname: 'Listedperson' }),
          )
        ).code,
        'AA',
      );
      const failed = await failedA28();
      const client = await operatorClient();
      const response = await client.get('/console/pas-messages');
      assert.equal(response.status, 200);
      const html = await response.text();
      assert.match(html, /<a href="\/console\/pas-messages"[^>]*aria-current="page">PAS messages<\/a>/);
      const okAt = html.indexOf(okId);
      const failedAt = html.indexOf(failed.controlId);
      assert.ok(okAt > 0 && failedAt > 0 && failedAt < okAt, 'newest first');
      const okRow = html.slice(okAt, html.indexOf('</tr>', okAt));
      assert.match(okRow, /HL7 <span class="hint">PAS\^RHS<\/span>/);
      assert.match(okRow, /ADT\^A28/);
      assert.match(okRow, /Listedperson, Alex/);
      assert.match(okRow, />AA</);
      const failedRow = html.slice(failedAt, html.indexOf('</tr>', failedAt));
      assert.match(failedRow, />AE</);
      assert.match(failedRow, /PID-7\.1 is not a date of the calendar: &#39;19800231&#39;/);
      assert.match(
        failedRow,
        new RegExp(`href="/console/pas-messages/${failed.row.id}">Correct and apply again`),
      );
      const [audit] = (
        await sql<{
          user_id: number | null;
          target_type: string;
        }>`select user_id, target_type from audit_event
          where action = 'console.pas-message.list' order by id desc`.execute(app.db)
      ).rows;
      assert.equal(audit?.target_type, 'hl7_message');
    });

    it('filters by outcome, and answers 400 for an outcome that is not one', async () => {
      const failed = await failedA28();
      const okId = newControlId();
      await feed.send(adtMessage({ event: 'A28', controlId: okId, hospitalNumber: newHospitalNumber() }));
      const client = await operatorClient();
      const ae = await (await client.get('/console/pas-messages?outcome=AE')).text();
      assert.ok(ae.includes(failed.controlId));
      assert.ok(!ae.includes(okId));
      assert.match(ae, /<option value="AE" selected>/);
      const aa = await (await client.get('/console/pas-messages?outcome=aa')).text();
      assert.ok(aa.includes(okId));
      assert.ok(!aa.includes(failed.controlId));
      const bad = await client.get('/console/pas-messages?outcome=XX');
      assert.equal(bad.status, 400);
      assert.match(await bad.text(), /The outcome must be AA, AE or AR\./);
      assert.equal((await client.get('/console/pas-messages?before=1')).status, 400);
    });

    it('pages HL7 messages and PASAPI calls merged by time: older pages continue where the last ended, without repeats', async () => {
      // An hour ago, older than every other row of this database: 120 HL7 messages one second apart and
      // 60 PASAPI calls in every other of those seconds (an HL7 message comes first within a second).
      const base = Date.now() - 3_600_000;
      const expected: string[] = [];
      for (let i = 0; i < 120; i += 1) {
        const at = formatDateTime(new Date(base - (120 - i) * 1000));
        const controlId = `PAGE-${process.pid}-${i}`;
        await app.db
          .withTables<{ hl7_message: Record<string, unknown> }>()
          .insertInto('hl7_message')
          .values({
            sender: 'PAS^RHS',
            control_id: controlId,
            message_type: 'ADT^A08',
            received_date: at,
            ack_code: 'AA',
            ack_text: null,
            patient_id: null,
          })
          .execute();
        expected.push(controlId);
        if (i % 2 === 0) {
          const requestId = `PAGEP-${process.pid}-${i}`;
          await sql`insert into audit_event (event_time, user_id, action, target_type, target_ids, outcome, client_address, request_id)
            values (${at}, null, 'pasapi.patient', null, null, 200, '127.0.0.1', ${requestId})`.execute(
            app.db,
          );
          expected.push(requestId);
        }
      }
      const client = await operatorClient();
      const walk = async (first: string) => {
        const seen: string[] = [];
        let url: string | undefined = first;
        let pages = 0;
        while (url !== undefined && pages < 20) {
          const html: string = await (await client.get(url)).text();
          pages += 1;
          for (const match of html.matchAll(/<span class="hint">(PAGEP?-\d+-\d+)<\/span>/g))
            seen.push(match[1]!);
          const next: RegExpExecArray | null = /<a href="([^"]+)">Older messages<\/a>/.exec(html);
          url = next === null ? undefined : next[1]!.replaceAll('&amp;', '&');
        }
        return { seen, pages };
      };
      // Within a second an HL7 message is listed before a PASAPI call; the seconds newest first.
      const merged: string[] = [];
      for (let i = 119; i >= 0; i -= 1) {
        merged.push(`PAGE-${process.pid}-${i}`);
        if (i % 2 === 0) merged.push(`PAGEP-${process.pid}-${i}`);
      }
      const all = await walk('/console/pas-messages?outcome=AA');
      assert.deepEqual(all.seen, merged);
      assert.ok(all.pages >= 4);
      const hl7 = await walk('/console/pas-messages?source=HL7');
      assert.deepEqual(
        hl7.seen,
        merged.filter((id) => id.startsWith('PAGE-')),
      );
      const pasapi = await walk('/console/pas-messages?source=PASAPI');
      assert.deepEqual(
        pasapi.seen,
        merged.filter((id) => id.startsWith('PAGEP-')),
      );
      assert.equal(expected.length, merged.length);
      const next = /<a href="([^"]+)">Older messages<\/a>/.exec(
        await (await client.get('/console/pas-messages')).text(),
      );
      assert.match(next?.[1] ?? '', /before=\d{4}-\d\d-\d\dT\d\d%3A\d\d%3A\d\d_[hp]_\d+$/);
      assert.equal((await client.get('/console/pas-messages?source=FTP')).status, 400);
    });

    it('lists PASAPI calls read-only beside the HL7 messages: account, resource, patient and HTTP status', async () => {
      await createGpAndPractice(app.db, 'G3258868', 'C82103');
      const account = await createUser(app.db);
      const number = newHospitalNumber();
      const url = (id: string) => `Patient/${id}/identifier-type/${FEED_TYPE_KEY}`;
      const created = await pasapiPut(
        app,
        url(number),
        fullPatientXml({ hospitalNumber: number, surname: 'Pasapiperson' }),
        {
          authorization: account.authorization,
        },
      );
      assert.equal(created.status, 201, await created.text());
      const refusedNumber = newHospitalNumber();
      const refused = await pasapiPut(
        app,
        url(refusedNumber),
        fullPatientXml({ hospitalNumber: refusedNumber, dob: '1980-02-31' }),
        {
          authorization: account.authorization,
        },
      );
      assert.equal(refused.status, 400, await refused.text());
      const [ok, bad] = (
        await sql<{ request_id: string; outcome: number }>`select request_id, outcome from audit_event
          where action = 'pasapi.patient' and username = ${account.username} order by id`.execute(app.db)
      ).rows;
      assert.equal(ok?.outcome, 201);
      assert.equal(bad?.outcome, 400);
      const failed = await failedA28();
      const client = await operatorClient();
      const html = await (await client.get('/console/pas-messages')).text();
      const rowOf = (page: string, marker: string) => {
        const at = page.indexOf(marker);
        return at === -1 ? undefined : page.slice(page.lastIndexOf('<tr>', at), page.indexOf('</tr>', at));
      };
      const okRow = rowOf(html, ok.request_id)!;
      assert.match(okRow, new RegExp(`PASAPI <span class="hint">${account.username}</span>`));
      assert.match(okRow, /<td>PAS patient<\/td>/);
      assert.match(okRow, /Pasapiperson, Test/);
      assert.match(okRow, />201</);
      assert.doesNotMatch(okRow, /<a /, 'read-only: no page, no correction');
      assert.match(rowOf(html, bad.request_id)!, />400</);
      assert.ok(html.indexOf(failed.controlId) < html.indexOf(bad.request_id), 'newest first');

      const ae = await (await client.get('/console/pas-messages?outcome=AE')).text();
      assert.ok(ae.includes(bad.request_id) && ae.includes(failed.controlId));
      assert.ok(!ae.includes(ok.request_id));
      const aa = await (await client.get('/console/pas-messages?outcome=AA')).text();
      assert.ok(aa.includes(ok.request_id) && !aa.includes(bad.request_id));
      const ar = await (await client.get('/console/pas-messages?outcome=AR')).text();
      assert.ok(!ar.includes(ok.request_id) && !ar.includes(bad.request_id));
      const hl7Only = await (await client.get('/console/pas-messages?source=HL7')).text();
      assert.ok(hl7Only.includes(failed.controlId) && !hl7Only.includes(ok.request_id));
      const pasapiOnly = await (await client.get('/console/pas-messages?source=pasapi')).text();
      assert.ok(pasapiOnly.includes(ok.request_id) && !pasapiOnly.includes(failed.controlId));
    });

    it('refuses a user without the request admin operation (403), and applies nothing', async () => {
      const failed = await failedA28();
      const admin = await operatorClient();
      const form = await correctionForm(admin, failed.row.id);
      const client = await operatorClient(['View Audit Log']);
      assert.equal((await client.get('/console/pas-messages')).status, 403);
      const page = await client.get(`/console/pas-messages/${failed.row.id}`);
      assert.equal(page.status, 403);
      const html = await page.text();
      assert.match(html, /Edit Payload Processor/);
      const home = await (await client.get('/console/')).text();
      assert.doesNotMatch(home, /href="\/console\/pas-messages"/);
      const refused = await client.post(form.action, {
        _csrf: csrfOf(home),
        version: form.version,
        message_text: failed.text.replace('19800231', '19800213'),
      });
      assert.equal(refused.status, 403);
      assert.deepEqual(await messageRow(failed.controlId), failed.row);
      assert.equal(await patientOf(failed.number), undefined);
    });

    it('applies a corrected AE message: AA replaces the AE, the patient is created, the audit names who', async () => {
      const failed = await failedA28();
      assert.equal(await patientOf(failed.number), undefined);
      const user = await createOperator(app.db);
      const client = new ConsoleClient(app);
      await client.signIn(user);
      const form = await correctionForm(client, failed.row.id);
      assert.match(form.html, /<textarea id="fix-message"[^>]*>MSH\|\^~\\&amp;\|PAS\|RHS\|/);
      const corrected = failed.text.replaceAll('\r', '\r\n').replace('19800231', '19800213');
      const response = await client.post(form.action, {
        _csrf: form.csrf,
        version: form.version,
        message_text: corrected,
      });
      assert.equal(response.status, 303);
      assert.equal(response.headers.get('location'), `/console/pas-messages/${failed.row.id}?result=applied`);
      const page = await (await client.get(response.headers.get('location')!)).text();
      assert.match(page, /The corrected message is applied \(AA\)\./);
      assert.doesNotMatch(page, /<textarea/);
      const patient = await patientOf(failed.number);
      assert.equal(patient?.dob, '1980-02-13');
      const row = await messageRow(failed.controlId);
      assert.deepEqual(row, {
        id: failed.row.id,
        ack_code: 'AA',
        ack_text: null,
        patient_id: patient.id,
        message_text: null,
        message_type: 'ADT^A28',
      });
      const [audit] = (
        await sql<{
          user_id: number | null;
          target_type: string;
          target_ids: string;
          detail: string | null;
          outcome: number;
        }>`
          select user_id, target_type, target_ids, detail, outcome from audit_event
          where action = 'console.pas-message.reapply' order by id desc`.execute(app.db)
      ).rows;
      assert.deepEqual(audit, {
        user_id: user.userId,
        target_type: 'hl7_message',
        target_ids: String(failed.row.id),
        detail: `ADT^A28 AE -> AA; patients: ${patient.id}`,
        outcome: 303,
      });
      // The PAS sending the first text again gets the answer that replaced the AE, and nothing is applied twice.
      const patientsBefore = await countRows(app.db, 'patient');
      assert.deepEqual(await feed.send(failed.text), { code: 'AA', text: '' });
      assert.equal(await countRows(app.db, 'patient'), patientsBefore);
      // Applied once: the form is gone, and a second POST of the old form changes nothing.
      const again = await client.post(form.action, {
        _csrf: form.csrf,
        version: form.version,
        message_text: corrected,
      });
      assert.equal(again.status, 409);
      assert.match(await again.text(), /answered AA now\. Nothing was changed\./);
    });

    it('requires the CSRF token of the session (403), and applies nothing', async () => {
      const failed = await failedA28();
      const client = await operatorClient();
      const form = await correctionForm(client, failed.row.id);
      const fixed = failed.text.replace('19800231', '19800213');
      const missing = await client.post(form.action, { version: form.version, message_text: fixed });
      assert.equal(missing.status, 403);
      assert.match(await missing.text(), /Form refused/);
      const other = await operatorClient();
      const forged = await client.post(form.action, {
        _csrf: csrfOf(await (await other.get('/console/')).text()),
        version: form.version,
        message_text: fixed,
      });
      assert.equal(forged.status, 403);
      assert.deepEqual(await messageRow(failed.controlId), failed.row);
      assert.equal(await patientOf(failed.number), undefined);
    });

    it('answers a correction still refused with its AE reason (422) and the edit, and changes nothing', async () => {
      const failed = await failedA28();
      const client = await operatorClient();
      const form = await correctionForm(client, failed.row.id);
      const patients = await countRows(app.db, 'patient');
      const stillBad = failed.text.replace('19800231', '19801301');
      const response = await client.post(form.action, {
        _csrf: form.csrf,
        version: form.version,
        message_text: stillBad,
      });
      assert.equal(response.status, 422);
      const html = await response.text();
      assert.match(
        html,
        /Not applied \(AE\): PID-7\.1 is not a date of the calendar: &#39;19801301&#39;.* Nothing was changed\./,
      );
      assert.ok(html.includes('|19801301|'), 'the edit stays in the editor');
      assert.deepEqual(await messageRow(failed.controlId), failed.row);
      assert.equal(await countRows(app.db, 'patient'), patients);

      // A text that is no HL7 message, and one that changes the control id, are refused the same way.
      const unreadable = await client.post(form.action, {
        _csrf: form.csrf,
        version: form.version,
        message_text: 'not HL7',
      });
      assert.equal(unreadable.status, 422);
      assert.match(await unreadable.text(), /Not applied \(AR\)/);
      const moved = await client.post(form.action, {
        _csrf: form.csrf,
        version: form.version,
        message_text: failed.text
          .replace(failed.controlId, `${failed.controlId}X`)
          .replace('19800231', '19800213'),
      });
      assert.equal(moved.status, 422);
      assert.match(await moved.text(), /MSH-10/);
      // A form older than the message's text: 409, nothing applied.
      const stale = await client.post(form.action, {
        _csrf: form.csrf,
        version: 'stale',
        message_text: failed.text.replace('19800231', '19800213'),
      });
      assert.equal(stale.status, 409);
      assert.deepEqual(await messageRow(failed.controlId), failed.row);
      assert.equal(await patientOf(failed.number), undefined);
      assert.equal(await countRows(app.db, 'patient'), patients);
    });

    it('answers 404 for a message that does not exist', async () => {
      const client = await operatorClient();
      assert.equal((await client.get('/console/pas-messages/999999999')).status, 404);
      assert.equal((await client.get('/console/pas-messages/abc')).status, 404);
    });
  });
});
