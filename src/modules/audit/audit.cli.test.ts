import assert from 'node:assert/strict';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { TestDatabase } from '../../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../../test/harness.ts';
import type { AuditExportRecord } from './audit-export.ts';
import { parseIsoDateTime } from './audit-export.ts';
import { createAuditTrail } from './audit-trail.ts';
import { runCli } from '../../../test/run-cli.ts';

const linesOf = (text: string): AuditExportRecord[] =>
  text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as AuditExportRecord);

forEachDialect((dialect) => {
  describe(`npm run cli -- audit export (${dialect})`, () => {
    let t: TestDatabase;

    before(async () => {
      t = await createTestDatabase(dialect);
      const trail = createAuditTrail(t.database);
      const entry = (at: string, action: string, targetIds: number[], userId: number | null) =>
        trail.record({
          action,
          userId,
          targetType: targetIds.length > 0 ? 'patient' : null,
          targetIds,
          outcome: userId === null ? 401 : 200,
          clientAddress: '10.0.0.7',
          requestId: `req-${at}`,
          at: new Date(at),
        });
      await Promise.all([
        entry('2026-01-01T09:59:59Z', 'patient.search', [3], 1),
        entry('2026-01-01T10:00:00Z', 'patient.search', [4, 5, 6], 1),
        entry('2026-01-01T10:30:00Z', 'queue.add', [], null),
        entry('2026-01-01T11:00:00Z', 'attachment.view', [9], 1),
      ]);
    });
    after(async () => {
      await t.drop();
    });

    it('writes the rows from --since as JSON lines, oldest first, to stdout', async () => {
      const result = await runCli(t.env, ['audit', 'export', '--since', '2026-01-01T10:00:00Z']);
      assert.equal(result.status, 0, result.stderr);
      const records = linesOf(result.stdout);
      assert.deepEqual(
        records.map((r) => r.event_time),
        ['2026-01-01T10:00:00Z', '2026-01-01T10:30:00Z', '2026-01-01T11:00:00Z'],
      );
      const { id, ...first } = records[0]!;
      assert.ok(Number.isInteger(id));
      assert.deepEqual(first, {
        event_time: '2026-01-01T10:00:00Z',
        user_id: 1,
        action: 'patient.search',
        target_type: 'patient',
        target_ids: [4, 5, 6],
        outcome: 200,
        client_address: '10.0.0.7',
        request_id: 'req-2026-01-01T10:00:00Z',
        client_request_id: null,
        username: null,
        detail: null,
      });
      assert.deepEqual(records[1]!.target_ids, []);
      assert.equal(records[1]!.user_id, null);
      assert.match(result.stderr, /Exported 3 audit rows in \d+ s/);
      // Not a terminal: plain progress lines (the first and the last at least), with counts and rate.
      assert.match(
        result.stderr,
        /^Exporting audit rows 100% \| 3 \/ 3 rows \| [\d,]+ rows\/s \| elapsed \d+ s$/m,
      );
    });

    it('draws a progress bar with rate and ETA on a terminal', async () => {
      const result = await runCli(t.env, ['audit', 'export', '--since', '2026-01-01'], '', {
        isTerminal: true,
      });
      assert.equal(result.status, 0, result.stderr);
      assert.match(
        result.stderr,
        /Exporting audit rows \[#{30}\] 100% \| 4 \/ 4 rows \| [\d,]+ rows\/s \| elapsed \d+ s/,
      );
      assert.equal(linesOf(result.stdout).length, 4);
    });

    it('stops before --until, takes offsets into account, and writes --file', async () => {
      const file = path.join(t.filesDir, '..', 'audit.jsonl');
      const result = await runCli(t.env, [
        'audit',
        'export',
        '--since',
        '2026-01-01T11:59:59+02:00',
        '--until',
        '2026-01-01T10:30',
        '--file',
        file,
      ]);
      assert.equal(result.status, 0, result.stderr);
      assert.match(result.stdout, /Exported 2 audit rows to /);
      const records = linesOf(await readFile(file, 'utf8'));
      assert.deepEqual(
        records.map((r) => r.event_time),
        ['2026-01-01T09:59:59Z', '2026-01-01T10:00:00Z'],
      );
      assert.equal((await stat(file)).mode & 0o777, 0o600);
    });

    it('refuses a malformed --since and an --until not after it (exit 2)', async () => {
      const malformed = await runCli(t.env, ['audit', 'export', '--since', 'yesterday']);
      assert.equal(malformed.status, 2);
      assert.match(malformed.stderr, /ISO 8601/);
      const backwards = await runCli(t.env, [
        'audit',
        'export',
        '--since',
        '2026-01-02',
        '--until',
        '2026-01-01',
      ]);
      assert.equal(backwards.status, 2);
      assert.match(backwards.stderr, /--until must be later/);
    });
  });
});

describe('parseIsoDateTime', () => {
  it('reads dates, date-times with Z, offsets or none (UTC), and fractions', () => {
    const iso = (text: string) => parseIsoDateTime(text)?.toISOString();
    assert.equal(iso('2026-11-22'), '2026-11-22T00:00:00.000Z');
    assert.equal(iso('2026-11-22T03:15'), '2026-11-22T03:15:00.000Z');
    assert.equal(iso('2026-11-22T03:15:07.250Z'), '2026-11-22T03:15:07.000Z');
    assert.equal(iso('2026-11-22T03:15:07-0130'), '2026-11-22T04:45:07.000Z');
    assert.equal(iso('2026-11-22 03:15:07+01:00'), '2026-11-22T02:15:07.000Z');
  });

  it('refuses anything else', () => {
    for (const text of [
      '',
      'now',
      '2026-13-01',
      '2026-02-29',
      '2026-11-22T25:00',
      '22/11/2026',
      '2026-11-22T03',
    ]) {
      assert.equal(parseIsoDateTime(text), undefined, text);
    }
  });
});
