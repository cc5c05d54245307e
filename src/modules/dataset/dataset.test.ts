import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import bcrypt from 'bcrypt';
import { sql } from 'kysely';
import type { TestDatabase } from '../../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../../test/harness.ts';
import { countRows } from '../../../test/factories.ts';
import type { TableName } from '../../db/schema.ts';
import { verifyPassword } from '../user/index.ts';
import { readTableColumns } from './columns.ts';
import type { DatasetError } from './index.ts';
import { DATASET_FORMAT, exportDatasetToFile, importDataset } from './index.ts';
import { importDatasetFrom } from './dataset-import.ts';
import { bufferSource } from './dataset-source.ts';
import { TABLES_IN_DEPENDENCY_ORDER, TABLE_NAMES, TABLE_SPECS } from './table-specs.ts';

const ALL_BYTES = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
const FILE_UID = 'ab'.repeat(20);
const OPENEYES_PASSWORD = 'open:eyes';
// An OpenEyes-style PHP hash: `$2y$` prefix.
const OPENEYES_HASH = bcrypt.hashSync(OPENEYES_PASSWORD, 4).replace(/^\$2b\$/, '$2y$');

/** Tables deliberately listed children first: the importer must order them itself. */
function sampleDataset(): Record<string, unknown> {
  return {
    format: DATASET_FORMAT,
    tables: {
      event_attachment_item: [{ id: 40, event_attachment_group_id: 30, attachment_data_id: 20 }],
      event_attachment_group: [{ id: 30, event_id: 12, element_type_id: 50 }],
      attachment_data: [
        {
          id: 20,
          request_id: 10,
          attachment_mnemonic: 'scan',
          attachment_type: 'NONE',
          mime_type: 'application/octet-stream',
          blob_data: ALL_BYTES.toString('base64'),
          thumbnail_small_blob: '',
          hash_code: 9_007_199_254_740_991,
        },
      ],
      request: [{ id: 10, request_type: 'dicom_request', created_date: '2024-05-06T07:08:09Z' }],
      patient: [
        {
          id: 1000,
          contact_id: 500,
          dob: '1980-02-01',
          gender: 'M',
          is_deceased: true,
          date_of_death: '2020-03-04',
          primary_institution_id: 70,
        },
      ],
      contact: [
        { id: 500, first_name: 'Ada', last_name: 'Testcase', created_date: '2020-01-02T03:04:05+01:00' },
      ],
      institution: [{ id: 70, name: 'Test Hospital', remote_id: 'TST' }],
      episode: [{ id: 11, patient_id: 1000 }],
      event: [
        { id: 13, episode_id: 11, event_type_id: 60, parent_id: 12 },
        { id: 12, episode_id: 11, event_type_id: 60, parent_id: null },
      ],
      element_type: [{ id: 50, name: 'E-Sign', class_name: 'X', event_type_id: 60 }],
      event_type: [{ id: 60, name: 'CVI', class_name: 'OphCoCvi' }],
      protected_file: [{ id: 80, uid: FILE_UID, name: 'sign.png', content: ALL_BYTES.toString('base64') }],
      user: [{ id: 7, first_name: 'Api', last_name: 'Client' }],
      user_authentication: [
        { id: 5, user_id: 7, username: 'plainuser', password: 'Secr3t:pw', active: 1 },
        { id: 6, user_id: 7, username: 'hasheduser', password_hash: OPENEYES_HASH, active: false },
      ],
      authassignment: [{ itemname: 'API access', userid: '7' }],
      authitem: [{ name: 'Demo role', type: 2 }],
      authitemchild: [{ parent: 'Demo role', child: 'TaskApi' }],
    },
  };
}

async function filesIn(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir, { recursive: true, withFileTypes: true }))
      .filter((e) => e.isFile())
      .map((e) => e.name);
  } catch {
    return [];
  }
}

async function expectRefused(
  t: TestDatabase,
  document: unknown,
  where: RegExp,
  options: { upsert?: boolean } = {},
): Promise<void> {
  const tables: TableName[] = [
    'patient',
    'contact',
    'institution',
    'protected_file',
    'user',
    'attachment_data',
  ];
  const before = await Promise.all(tables.map((table) => countRows(t.db, table)));
  const filesBefore = await filesIn(t.filesDir);
  await assert.rejects(importDataset(t, document, options), (error: DatasetError) => {
    assert.equal(error.name, 'DatasetError');
    assert.match(error.message, where);
    return true;
  });
  assert.deepEqual(await Promise.all(tables.map((table) => countRows(t.db, table))), before);
  assert.deepEqual(await filesIn(t.filesDir), filesBefore);
}

function withTables(tables: Record<string, unknown[]>): unknown {
  return { format: DATASET_FORMAT, tables };
}

forEachDialect((dialect) => {
  describe(`dataset import and export (${dialect})`, () => {
    let source: TestDatabase;
    let target: TestDatabase;
    before(async () => {
      source = await createTestDatabase(dialect);
      target = await createTestDatabase(dialect);
    });
    after(async () => {
      await source.drop();
      await target.drop();
    });

    it('imports tables in foreign-key order whatever the document order, and exports them back byte for byte', async () => {
      const summary = await importDataset(source, sampleDataset());
      assert.equal(summary.filesWritten, 1);
      assert.equal(summary.tables.patient?.inserted, 1);

      const first = path.join(path.dirname(source.filesDir), 'export-1.json');
      const second = path.join(path.dirname(source.filesDir), 'export-2.json');
      await exportDatasetToFile(source, first);
      const exported = JSON.parse(await readFile(first, 'utf8')) as { tables: Record<string, unknown[]> };
      assert.deepEqual(Object.keys(exported.tables), TABLES_IN_DEPENDENCY_ORDER);

      // Into a database that only has the migrations' seed: seeded rows are identical, so skipped.
      await importDataset(target, exported);
      await exportDatasetToFile(target, second);
      assert.equal(await readFile(second, 'utf8'), await readFile(first, 'utf8'));

      const blob = await target.db
        .selectFrom('attachment_data')
        .select(['blob_data', 'thumbnail_small_blob', 'hash_code'])
        .executeTakeFirstOrThrow();
      assert.deepEqual(blob.blob_data, ALL_BYTES);
      assert.deepEqual(blob.thumbnail_small_blob, Buffer.alloc(0));
      assert.equal(blob.hash_code, 9_007_199_254_740_991);
      assert.deepEqual(await target.files.read(FILE_UID), ALL_BYTES);
    });

    it('normalises ISO 8601 date-times to UTC and flags to 0/1', async () => {
      const contact = await source.db
        .selectFrom('contact')
        .select('created_date')
        .where('id', '=', 500)
        .executeTakeFirstOrThrow();
      assert.equal(contact.created_date, '2020-01-02 02:04:05');
      const patient = await source.db
        .selectFrom('patient')
        .select(['is_deceased', 'dob', 'last_modified_date'])
        .where('id', '=', 1000)
        .executeTakeFirstOrThrow();
      assert.deepEqual(patient, {
        is_deceased: 1,
        dob: '1980-02-01',
        last_modified_date: '1901-01-01 00:00:00',
      });
    });

    it('hashes a plain password and keeps a given $2y$ hash, both verifying', async () => {
      const rows = await source.db
        .selectFrom('user_authentication')
        .select(['username', 'password_hash', 'active'])
        .orderBy('id')
        .execute();
      const plain = rows.find((r) => r.username === 'plainuser')!;
      const hashed = rows.find((r) => r.username === 'hasheduser')!;
      assert.match(plain.password_hash!, /^\$2y\$/);
      assert.equal(await verifyPassword('Secr3t:pw', plain.password_hash), true);
      assert.equal(hashed.password_hash, OPENEYES_HASH);
      assert.equal(hashed.active, 0);
      assert.equal(await verifyPassword(OPENEYES_PASSWORD, hashed.password_hash), true);
    });

    it('moves id sequences past the highest imported id', async () => {
      const row = await target.db
        .insertInto('patient')
        .values({ contact_id: 500 })
        .returning('id')
        .executeTakeFirstOrThrow();
      assert.ok(row.id > 1000, `new id ${row.id}`);
      const request = await target.db
        .insertInto('request')
        .values({ request_type: 'dicom_request' })
        .returning('id')
        .executeTakeFirstOrThrow();
      assert.ok(request.id > 10);
    });

    it('assigns ids to rows that omit them, after the given ones', async () => {
      await importDataset(
        source,
        withTables({
          contact: [
            { first_name: 'No', last_name: 'Id' },
            { id: 900, first_name: 'Given' },
          ],
        }),
      );
      const rows = await source.db
        .selectFrom('contact')
        .select(['id', 'first_name'])
        .where('first_name', 'in', ['No', 'Given'])
        .orderBy('id')
        .execute();
      assert.deepEqual(
        rows.map((r) => r.first_name),
        ['Given', 'No'],
      );
      assert.ok(rows[1]!.id > 900);
    });

    it('refuses an unknown table, naming it', async () => {
      await expectRefused(source, withTables({ patients: [{ id: 1 }] }), /tables\.patients: unknown table/);
    });

    it('refuses an unknown column, naming table, row and column, and writes nothing', async () => {
      await expectRefused(
        source,
        withTables({
          contact: [{ id: 601, first_name: 'A' }],
          patient: [
            { id: 1601, contact_id: 601 },
            { id: 1602, contact_id: 601, colour: 'blue' },
          ],
        }),
        /tables\.patient\[1\]\.colour: unknown column/,
      );
    });

    it('refuses a value of the wrong type, naming table, row and column', async () => {
      await expectRefused(
        source,
        withTables({ contact: [{ id: 602, first_name: 'A', created_user_id: '1' }] }),
        /tables\.contact\[0\]\.created_user_id: expected an integer/,
      );
      await expectRefused(
        source,
        withTables({ patient: [{ id: 1603, contact_id: 500, dob: '1980-02-30' }] }),
        /tables\.patient\[0\]\.dob: expected a date/,
      );
      await expectRefused(
        source,
        withTables({
          attachment_data: [
            {
              id: 603,
              request_id: 10,
              attachment_mnemonic: 'x',
              attachment_type: 'NONE',
              mime_type: 'text/plain',
              blob_data: 'abc',
            },
          ],
        }),
        /tables\.attachment_data\[0\]\.blob_data: expected standard base64/,
      );
    });

    it('imports a binary value of several MB, and refuses base64 with trailing bits set', async () => {
      const bytes = Buffer.alloc(6 * 1024 * 1024 + 1);
      for (let i = 0; i + 4 <= bytes.length; i += 4096) bytes.writeUInt32BE(i, i);
      const row = (blob: string) => ({
        id: 650,
        request_id: 10,
        attachment_mnemonic: 'large',
        attachment_type: 'NONE',
        mime_type: 'application/octet-stream',
        blob_data: blob,
      });
      await expectRefused(
        source,
        withTables({ attachment_data: [row('AAA')] }),
        /tables\.attachment_data\[0\]\.blob_data: expected standard base64/,
      );
      await expectRefused(
        source,
        withTables({ attachment_data: [row('AB==')] }),
        /tables\.attachment_data\[0\]\.blob_data: expected canonical standard base64/,
      );
      await importDataset(source, withTables({ attachment_data: [row(bytes.toString('base64'))] }));
      const stored = await source.db
        .selectFrom('attachment_data')
        .select('blob_data')
        .where('id', '=', 650)
        .executeTakeFirstOrThrow();
      assert.ok(stored.blob_data !== null && Buffer.compare(stored.blob_data, bytes) === 0);
    });

    it('streams a 6 MiB value cut across read chunks at every offset mod 4, and exports it back byte for byte', async () => {
      const bytes = Buffer.alloc(6 * 1024 * 1024 + 2);
      for (let i = 0; i < bytes.length; i += 1) bytes[i] = (i * 131 + (i >> 10)) & 0xff;
      const text = bytes.toString('base64');
      const document = Buffer.from(
        JSON.stringify(
          withTables({
            request: [{ id: 661, request_type: 'dicom_request' }],
            attachment_data: [
              {
                id: 661,
                request_id: 661,
                attachment_mnemonic: 'streamed',
                attachment_type: 'NONE',
                mime_type: 'application/octet-stream',
                blob_data: text,
              },
            ],
          }),
        ),
      );
      const start = document.indexOf(text);
      for (let shift = 0; shift < 4; shift += 1) {
        // The first cut falls `shift` characters past a group of four, the others 64 KiB apart.
        const cuts = [start + 4 * 1000 + shift];
        while (cuts.at(-1)! < document.length) cuts.push(cuts.at(-1)! + 64 * 1024);
        const summary = await importDatasetFrom(source, {
          sizeBytes: document.length,
          async *read(from, to) {
            let at = from;
            for (const cut of [...cuts.filter((c) => c > from && c < to), to]) {
              yield document.subarray(at, cut);
              at = cut;
            }
          },
        });
        // The first import writes the row; the others find it there with the very same bytes.
        const count = summary.tables.attachment_data!;
        assert.equal(shift === 0 ? count.inserted : count.unchanged, 1, `shift ${shift}`);
      }
      const stored = await source.db
        .selectFrom('attachment_data')
        .select('blob_data')
        .where('id', '=', 661)
        .executeTakeFirstOrThrow();
      assert.ok(stored.blob_data !== null && Buffer.compare(stored.blob_data, bytes) === 0);

      const file = path.join(path.dirname(source.filesDir), 'export-large.json');
      await exportDatasetToFile(source, file, { tables: ['request', 'attachment_data'] });
      const exported = JSON.parse(await readFile(file, 'utf8')) as {
        tables: { attachment_data: { id: number; blob_data: string }[] };
      };
      assert.equal(exported.tables.attachment_data.find((r) => r.id === 661)?.blob_data, text);
    });

    it('refuses invalid base64 in the middle of a large value, naming table, row and column, and writes nothing', async () => {
      const text = Buffer.alloc(3 * 1024 * 1024, 7).toString('base64');
      const row = (id: number, blob: string) => ({
        id,
        request_id: 662,
        attachment_mnemonic: 'large',
        attachment_type: 'NONE',
        mime_type: 'application/octet-stream',
        blob_data: blob,
      });
      const middle = 2_000_001;
      for (const bad of ['!', '=', '\n', 'é']) {
        await expectRefused(
          source,
          withTables({
            request: [{ id: 662, request_type: 'dicom_request' }],
            attachment_data: [
              row(662, text),
              row(663, `${text.slice(0, middle)}${bad}${text.slice(middle + 1)}`),
            ],
          }),
          /tables\.attachment_data\[1\]\.blob_data: expected standard base64/,
        );
      }
      assert.equal(
        (await source.db.selectFrom('request').select('id').where('id', '=', 662).execute()).length,
        0,
      );
    });

    it('refuses a broken reference, naming table, row and column', async () => {
      await expectRefused(
        source,
        withTables({
          contact: [{ id: 604, first_name: 'A' }],
          patient: [
            { id: 1604, contact_id: 604 },
            { id: 1605, contact_id: 99_999 },
          ],
        }),
        /tables\.patient\[1\]\.contact_id: broken reference: no contact\.id = 99999/,
      );
    });

    it('refuses a duplicate key in the document and against the database', async () => {
      await expectRefused(
        source,
        withTables({
          contact: [
            { id: 605, first_name: 'A' },
            { id: 605, first_name: 'B' },
          ],
        }),
        /tables\.contact\[1\]\.id: duplicate primary key/,
      );
      await expectRefused(
        source,
        withTables({ contact: [{ id: 500, first_name: 'Changed' }] }),
        /tables\.contact\[0\]\.id: duplicate key/,
      );
      await expectRefused(
        source,
        withTables({
          authitemchild: [
            { parent: 'TaskApi', child: 'OprnApi' },
            { parent: 'TaskApi', child: 'OprnApi' },
          ],
        }),
        /tables\.authitemchild\[1\]\.parent,child: duplicate primary key/,
      );
    });

    it('removes the files it wrote when a later row fails in the database', async () => {
      // Two attachments with the same request and mnemonic break a unique index the importer does not
      // pre-check; the protected file written before must go.
      const attachment = (id: number) => ({
        id,
        request_id: 10,
        attachment_mnemonic: 'dup',
        attachment_type: 'NONE',
        mime_type: 'text/plain',
      });
      await expectRefused(
        source,
        withTables({
          protected_file: [{ id: 81, uid: 'cd'.repeat(20), content: 'AAEC' }],
          attachment_data: [attachment(606), attachment(607)],
        }),
        /tables\.attachment_data\[1\]\S*: duplicate key/,
      );
      assert.equal(await source.files.exists('cd'.repeat(20)), false);
    });

    it('replaces rows by primary key with --upsert', async () => {
      const summary = await importDataset(
        source,
        withTables({
          contact: [{ id: 500, first_name: 'Changed' }],
          authitemchild: [{ parent: 'TaskApi', child: 'OprnApi' }],
        }),
        { upsert: true },
      );
      assert.equal(summary.tables.contact?.updated, 1);
      assert.equal(summary.tables.authitemchild?.unchanged, 1);
      const contact = await source.db
        .selectFrom('contact')
        .select(['first_name', 'last_name'])
        .where('id', '=', 500)
        .executeTakeFirstOrThrow();
      assert.deepEqual(contact, { first_name: 'Changed', last_name: 'Testcase' });
    });

    it('refuses a document without the format marker', async () => {
      await expectRefused(source, { tables: {} }, /"format" must be/);
    });

    it('refuses text that is not a whole JSON document, a table given twice, and tables that are not arrays', async () => {
      const refuseText = async (text: string, where: RegExp) => {
        const before = await countRows(source.db, 'contact');
        await assert.rejects(importDatasetFrom(source, bufferSource(Buffer.from(text))), (error: Error) => {
          assert.equal(error.name, 'DatasetError');
          assert.match(error.message, where);
          return true;
        });
        assert.equal(await countRows(source.db, 'contact'), before);
      };
      const head = `{"format":"${DATASET_FORMAT}","tables":{"contact":[{"id":700,"first_name":"Cut"}`;
      await refuseText(head, /not valid JSON/);
      await refuseText(`${head}]}} trailing`, /not valid JSON/);
      await refuseText('', /expected a JSON object/);
      await refuseText('[1, 2]', /expected a JSON object/);
      await refuseText(`${head}],"contact":[]}}`, /tables\.contact: table given twice/);
      await refuseText(
        `{"format":"${DATASET_FORMAT}","tables":{"contact":{"id":701}}}`,
        /tables\.contact: expected an array of rows/,
      );
      await refuseText(
        `{"format":"${DATASET_FORMAT}","tables":[],"extra":1}`,
        /unknown member "extra"[\s\S]*"tables" must be an object/,
      );
    });

    it('imports rows whose self reference points to a row later in the table, and refuses one that points nowhere', async () => {
      const episode = await source.db.selectFrom('episode').select('id').executeTakeFirstOrThrow();
      const event = (id: number, parent: number | null) => ({
        id,
        episode_id: episode.id,
        event_type_id: 60,
        parent_id: parent,
      });
      await importDataset(
        source,
        withTables({ event: [event(803, 802), event(802, 801), event(801, null)] }),
      );
      const rows = await source.db
        .selectFrom('event')
        .select(['id', 'parent_id'])
        .where('id', 'in', [801, 802, 803])
        .orderBy('id')
        .execute();
      assert.deepEqual(rows, [
        { id: 801, parent_id: null },
        { id: 802, parent_id: 801 },
        { id: 803, parent_id: 802 },
      ]);
      await expectRefused(
        source,
        withTables({ event: [event(804, null), event(805, 9999)] }),
        /tables\.event\[1\]\.parent_id: broken reference: no event\.id = 9999/,
      );
      assert.equal(
        await source.db.selectFrom('event').select('id').where('id', '=', 804).executeTakeFirst(),
        undefined,
      );
    });

    it('has table specs listing every foreign key of the migrated schema', async () => {
      const t = source;
      const postgresKeys =
        dialect === 'postgres'
          ? (
              await sql<{ source: string; from: string; table: string; to: string }>`
                select tc.table_name as source, kcu.column_name as "from", ccu.table_name as "table",
                  ccu.column_name as "to"
                from information_schema.table_constraints tc
                join information_schema.key_column_usage kcu on kcu.constraint_name = tc.constraint_name
                  and kcu.table_schema = tc.table_schema
                join information_schema.constraint_column_usage ccu on ccu.constraint_name = tc.constraint_name
                  and ccu.table_schema = tc.table_schema
                where tc.constraint_type = 'FOREIGN KEY' and tc.table_schema = current_schema()`.execute(t.db)
            ).rows
          : [];
      const mysqlKeys =
        dialect === 'mysql'
          ? (
              await sql<{ source: string; from: string; table: string; to: string }>`
                select table_name as source, column_name as \`from\`, referenced_table_name as \`table\`,
                  referenced_column_name as \`to\`
                from information_schema.key_column_usage
                where table_schema = database() and referenced_table_name is not null`.execute(t.db)
            ).rows
          : [];
      for (const table of TABLE_NAMES) {
        const live =
          dialect === 'sqlite'
            ? (
                await sql<{ from: string; table: string; to: string }>`
                  select "from", "table", "to" from pragma_foreign_key_list(${table})`.execute(t.db)
              ).rows
            : [...postgresKeys, ...mysqlKeys].filter((k) => k.source === table);
        const liveRefs = Object.fromEntries(live.map((r) => [r.from, `${r.table}.${r.to}`]));
        const specRefs = Object.fromEntries(
          Object.entries(TABLE_SPECS[table].references).map(([c, r]) => [c, `${r.table}.${r.column}`]),
        );
        assert.deepEqual(specRefs, liveRefs, `foreign keys of ${table}`);
      }
    });

    it('has table specs naming every date and date-time column, and only existing columns', async () => {
      const t = source;
      for (const table of TABLE_NAMES) {
        const columns = await readTableColumns(t.database, table);
        const spec = TABLE_SPECS[table];
        for (const c of [...spec.dates, ...spec.dateTimes, ...spec.primaryKey]) {
          assert.ok(columns.has(c), `${table}.${c} exists`);
        }
        if (dialect !== 'sqlite') {
          const { rows } = await sql<{ column_name: string; data_type: string }>`
            select column_name as column_name, data_type as data_type from information_schema.columns
            where table_schema = ${dialect === 'mysql' ? sql`database()` : sql`current_schema()`}
              and table_name = ${table}`.execute(t.db);
          const dates = rows.filter((r) => r.data_type === 'date').map((r) => r.column_name);
          const dateTimes = rows
            .filter((r) => r.data_type.startsWith('timestamp') || r.data_type === 'datetime')
            .map((r) => r.column_name);
          assert.deepEqual([...dates].sort(), [...spec.dates].sort(), `dates of ${table}`);
          assert.deepEqual([...dateTimes].sort(), [...spec.dateTimes].sort(), `date-times of ${table}`);
        }
      }
    });
  });
});
