/**
 * The console records every record it shows: the request list, the signature import list and an
 * attachment's thumbnail each write an audit row naming the user and the ids on the page.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import type { TestUser } from './factories.ts';
import {
  ConsoleClient,
  createFailedRequest,
  createFailedUpload,
  createFiledAttachment,
  createOperator,
} from './factories-console.ts';
import type { TestApp } from './harness.ts';
import { forEachDialect, startTestApp } from './harness.ts';

forEachDialect((dialect) => {
  describe(`console reads in the audit trail [${dialect}]`, () => {
    let app: TestApp;
    let operator: TestUser;
    let browser: ConsoleClient;
    before(async () => {
      app = await startTestApp(dialect);
      operator = await createOperator(app.db);
      browser = new ConsoleClient(app);
      assert.equal((await browser.signIn(operator)).status, 303);
    });
    after(() => app.close());

    /** The newest audit row of `action`. */
    async function lastRow(action: string) {
      const { rows } = await sql<{
        user_id: number | null;
        target_type: string | null;
        target_ids: string | null;
        outcome: number;
      }>`select user_id, target_type, target_ids, outcome from audit_event where action = ${action} order by id desc`.execute(
        app.db,
      );
      return rows[0];
    }

    const idsOf = (row: { target_ids: string | null } | undefined) =>
      (row?.target_ids ?? '').split(',').filter((id) => id !== '');

    it('writes console.request.list with the ids of the requests listed', async () => {
      const failed = await createFailedRequest(app.db);
      const page = await browser.get('/console/requests?status=FAILED');
      assert.equal(page.status, 200);
      const row = await lastRow('console.request.list');
      assert.equal(row?.user_id, operator.userId);
      assert.equal(row?.target_type, 'request');
      assert.equal(Number(row?.outcome), 200);
      assert.ok(idsOf(row).includes(String(failed.requestId)), `ids ${row?.target_ids}`);
    });

    it('writes console.signature.list with the ids of the imports listed', async () => {
      const { logId } = await createFailedUpload(app);
      const page = await browser.get('/console/signatures');
      assert.equal(page.status, 200);
      const row = await lastRow('console.signature.list');
      assert.equal(row?.user_id, operator.userId);
      assert.equal(row?.target_type, 'signature_import_log');
      assert.ok(idsOf(row).includes(String(logId)), `ids ${row?.target_ids}`);
    });

    it('writes console.attachment.thumbnail with the attachment id', async () => {
      const filed = await createFiledAttachment(app.db);
      const thumbnail = await browser.get(`/console/attachments/${filed.attachmentId}/thumbnail`);
      assert.equal(thumbnail.status, 200);
      assert.equal(thumbnail.headers.get('content-type'), 'image/png');
      const row = await lastRow('console.attachment.thumbnail');
      assert.equal(row?.user_id, operator.userId);
      assert.equal(row?.target_type, 'attachment_data');
      assert.deepEqual(idsOf(row), [String(filed.attachmentId)]);
    });
  });
});
