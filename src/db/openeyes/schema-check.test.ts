import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { OpenEyesTestDatabase } from '../../../test/openeyes/openeyes-database.ts';
import {
  createOpenEyesDatabase,
  openKysely,
  testMysqlUrl,
} from '../../../test/openeyes/openeyes-database.ts';
import {
  OPENEYES_INDEX_NEEDS,
  findMissingIndexes,
  formatIndexSuggestions,
  indexDdl,
} from './index-advice.ts';
import { checkOpenEyesSchema, formatSchemaReport, serverVersionProblem } from './schema-check.ts';
import { OPENEYES_TABLE_NEEDS } from './schema-needs.ts';

const adminUrl = testMysqlUrl();
const skip = adminUrl === undefined ? 'TEST_MYSQL_URL is not set (no MariaDB/MySQL server)' : false;

interface Fixture {
  readonly database: OpenEyesTestDatabase;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly db: Kysely<any>;
}

async function openFixture(): Promise<Fixture> {
  const database = await createOpenEyesDatabase(adminUrl!);
  return { database, db: openKysely(database.url) };
}

async function closeFixture(fixture: Fixture | undefined): Promise<void> {
  await fixture?.db.destroy();
  await fixture?.database.drop();
}

describe('the OpenEyes test database (test/openeyes)', { skip }, () => {
  let fixture: Fixture | undefined;
  before(async () => {
    fixture = await openFixture();
  });
  after(() => closeFixture(fixture));

  it('has every row of its seed satisfy every foreign key of its schema', async () => {
    const { rows: keys } = await sql<{
      name: string;
      table_name: string;
      referenced_table_name: string;
      columns: string;
      referenced_columns: string;
    }>`
      select constraint_name as name, table_name as table_name,
        referenced_table_name as referenced_table_name,
        group_concat(column_name order by ordinal_position) as columns,
        group_concat(referenced_column_name order by ordinal_position) as referenced_columns
      from information_schema.key_column_usage
      where table_schema = database() and referenced_table_name is not null
      group by constraint_name, table_name, referenced_table_name`.execute(fixture!.db);
    assert.ok(keys.length > 100, `expected the schema's foreign keys, found ${keys.length}`);
    const broken: string[] = [];
    for (const key of keys) {
      const columns = key.columns.split(',');
      const referenced = key.referenced_columns.split(',');
      const join = sql.join(
        columns.map((c, i) => sql`r.${sql.ref(referenced[i]!)} = t.${sql.ref(c)}`),
        sql` and `,
      );
      const present = sql.join(
        columns.map((c) => sql`t.${sql.ref(c)} is not null`),
        sql` and `,
      );
      const { rows } = await sql<{ orphans: number | string }>`
        select count(*) as orphans from ${sql.table(key.table_name)} as t
        where ${present} and not exists (select 1 from ${sql.table(key.referenced_table_name)} as r where ${join})`.execute(
        fixture!.db,
      );
      if (Number(rows[0]!.orphans) > 0) broken.push(`${key.name} (${key.table_name})`);
    }
    assert.deepEqual(broken, []);
  });
});

describe('checkOpenEyesSchema (DATABASE_SCHEMA=openeyes)', { skip }, () => {
  let fixture: Fixture | undefined;
  before(async () => {
    fixture = await openFixture();
  });
  after(() => closeFixture(fixture));

  it('finds nothing to object to in an OpenEyes v6.8 database', async () => {
    const report = await checkOpenEyesSchema(fixture!.db);
    assert.deepEqual(report.problems, []);
    assert.equal(report.databaseName, fixture!.database.name);
    assert.match(formatSchemaReport(report), /is present and compatible$/);
  });

  it('names max_allowed_packet when the server cannot take the largest upload in one statement', async () => {
    const { rows } = await sql<{
      max_packet: number | string;
    }>`select @@max_allowed_packet as max_packet`.execute(fixture!.db);
    const maxPacketBytes = Number(rows[0]!.max_packet);
    const fits = await checkOpenEyesSchema(fixture!.db, { largestWriteBytes: maxPacketBytes - 1024 * 1024 });
    assert.deepEqual(fits.problems, []);
    const tooBig = await checkOpenEyesSchema(fixture!.db, { largestWriteBytes: maxPacketBytes });
    assert.equal(tooBig.problems.length, 1);
    assert.match(
      tooBig.problems[0]!,
      new RegExp(`^server max_allowed_packet is ${maxPacketBytes} bytes, too small`),
    );
  });

  it('checks every column of the list, so that an empty report means they were all seen', async () => {
    const tables = Object.keys(OPENEYES_TABLE_NEEDS);
    const { rows } = await sql<{ table_name: string; column_name: string }>`
      select table_name as table_name, column_name as column_name from information_schema.columns
      where table_schema = database() and table_name in (${sql.join(tables)})`.execute(fixture!.db);
    const present = new Set(rows.map((r) => `${r.table_name}.${r.column_name}`));
    const listed = tables.flatMap((t) =>
      Object.keys(OPENEYES_TABLE_NEEDS[t]!.columns).map((c) => `${t}.${c}`),
    );
    assert.deepEqual(
      listed.filter((c) => !present.has(c)),
      [],
    );
  });
});

describe('checkOpenEyesSchema on a database that differs from what the service needs', { skip }, () => {
  let fixture: Fixture | undefined;
  before(async () => {
    fixture = await openFixture();
    const run = (statement: string) => sql.raw(statement).execute(fixture!.db);
    await run('alter table patient drop column dob');
    await run('alter table event modify info varchar(64) null');
    await run('alter table attachment_data modify text_data text null');
    await run('alter table attachment_data modify hash_code int(11) null');
    await run("alter table request add site_code varchar(10) not null default ''");
    await run('alter table request add column approved_by int(10) unsigned not null');
    await run('alter table event_attachment_item modify event_document_view_set varchar(45) not null');
    await run('alter table contact modify last_name varchar(100) character set utf8 collate utf8_bin null');
    await run('alter table request_details modify name varchar(100) character set latin1 null');
    await run('set foreign_key_checks = 0');
    await run('drop table request_routine_lock');
    await run('drop table event_version');
    await run('set foreign_key_checks = 1');
  });
  after(() => closeFixture(fixture));

  it('lists every missing or incompatible table and column in one report, naming each', async () => {
    const report = await checkOpenEyesSchema(fixture!.db);
    const expected = [
      'column patient.dob is missing',
      'column event.info is varchar(64), shorter than the 1024 characters the service writes',
      'table event_version is missing: the service changes event rows and keeps their history there',
      `column attachment_data.text_data is text, which holds 65535 bytes; the service writes up to ${100 * 1024 * 1024}`,
      'column attachment_data.hash_code is int(11), the service needs bigint',
      'column request.approved_by is NOT NULL without a default, and the service does not fill it when it inserts into request',
      'column event_attachment_item.event_document_view_set is NOT NULL, and the service writes NULL there',
      'column contact.last_name has collation utf8mb3_bin, which is case-sensitive; the service matches it regardless of case',
      'column request_details.name has character set latin1, which cannot hold all the text the service writes',
      'table request_routine_lock is missing (or this account has no privilege on it)',
    ];
    for (const line of expected)
      assert.ok(report.problems.includes(line), `missing problem: ${line}\n${report.problems.join('\n')}`);
    assert.equal(report.problems.length, expected.length, report.problems.join('\n'));
    const message = formatSchemaReport(report);
    assert.match(message, new RegExp(`cannot be served: ${expected.length} problems\\n`));
    for (const line of expected) assert.ok(message.includes(`\n  - ${line}`));
  });

  it('accepts a NOT NULL column it does not fill when the column has a default', async () => {
    const report = await checkOpenEyesSchema(fixture!.db);
    assert.ok(!report.problems.some((p) => p.includes('request.site_code')));
  });
});

describe('serverVersionProblem', () => {
  it('accepts MariaDB 10.6+ and MySQL 8.0+, and names the server otherwise', () => {
    assert.equal(serverVersionProblem('10.11.19-MariaDB-0+deb12u1'), undefined);
    assert.equal(serverVersionProblem('11.4.2-MariaDB'), undefined);
    assert.equal(serverVersionProblem('8.0.36'), undefined);
    assert.equal(serverVersionProblem('8.4.0-commercial'), undefined);
    assert.match(serverVersionProblem('10.5.23-MariaDB')!, /^server MariaDB 10.5 is too old/);
    assert.match(serverVersionProblem('5.7.44-log')!, /^server MySQL 5.7 is too old/);
    assert.match(serverVersionProblem('unknown')!, /not recognised/);
  });
});

describe('findMissingIndexes (openeyes suggest-indexes)', { skip }, () => {
  let fixture: Fixture | undefined;
  before(async () => {
    fixture = await openFixture();
  });
  after(() => closeFixture(fixture));

  it('suggests the indexes an OpenEyes v6.8 database lacks, and none once their DDL has run', async () => {
    const missing = await findMissingIndexes(fixture!.db);
    assert.deepEqual(
      missing.map((n) => n.name),
      OPENEYES_INDEX_NEEDS.map((n) => n.name),
    );
    const text = formatIndexSuggestions(fixture!.database.name, missing);
    assert.match(
      text,
      /ALTER TABLE `contact` ADD INDEX `cra_contact_last_first_name` \(`last_name`, `first_name`\), ALGORITHM=INPLACE, LOCK=NONE;/,
    );
    for (const need of missing) {
      const statement = indexDdl(need).split('\n').at(-1)!;
      await sql.raw(statement).execute(fixture!.db);
    }
    assert.deepEqual(await findMissingIndexes(fixture!.db), []);
    assert.match(formatIndexSuggestions(fixture!.database.name, []), /has every index/);
  });

  it('counts an existing index whose leading columns are the needed ones', async () => {
    const [need] = await findMissingIndexes(fixture!.db, [
      {
        name: 'x',
        table: 'patient_identifier',
        columns: ['patient_identifier_type_id', 'value'],
        purpose: 'x',
      },
      { name: 'y', table: 'patient_identifier', columns: ['value'], purpose: 'y' },
    ]);
    assert.equal(need?.name, 'y');
  });
});
