/**
 * The dialect adapters' pure parts and the SQL each dialect generates for the hand-tuned statements (the
 * patient search shapes, the queue claim, MySQL's upserts and RETURNING), compiled without a server: a
 * PostgreSQL or MySQL pool opens no connection until a query runs, so every dialect is checked on every
 * machine.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { InsertQueryNode } from 'kysely';
import { MysqlQueryCompiler } from 'kysely';
import { loadConfig } from '../config.ts';
import { createPatientQueries } from '../modules/patient/patient.queries.ts';
import type { PageQuery } from '../modules/patient/patient.queries.ts';
import { claimQuery, compileClaim } from '../modules/request-queue/engine/claim.queries.ts';
import type { Database } from './database.ts';
import { openDatabase } from './database.ts';
import { planInsertReturning } from './dialects/mysql-driver.ts';
import { prefixUpperBound } from './dialects/prefix-range.ts';

const PAGE: PageQuery = {
  sortColumn: 'default',
  isDescending: false,
  limit: 20,
  offset: 0,
  restrictTypeId: undefined,
};

describe('dialect adapters', () => {
  let sqlite: Database;
  let postgres: Database;
  let mysql: Database;
  before(async () => {
    sqlite = await openDatabase(loadConfig({ DATABASE_URL: 'sqlite::memory:' }).database);
    // Never connected: only compiled against.
    postgres = await openDatabase(
      loadConfig({ DATABASE_URL: 'postgres://nobody@127.0.0.1:9/none' }).database,
      { poolSize: 1 },
    );
    mysql = await openDatabase(loadConfig({ DATABASE_URL: 'mysql://nobody@127.0.0.1:9/none' }).database, {
      poolSize: 1,
    });
  });
  after(async () => {
    await sqlite.close();
    await postgres.close();
    await mysql.close();
  });

  describe('name prefixes', () => {
    it('prefixUpperBound increments the last code point, skipping surrogates, past U+10FFFF', () => {
      assert.equal(prefixUpperBound('smi'), 'smj');
      assert.equal(prefixUpperBound('a\u{10ffff}'), 'b');
      assert.equal(prefixUpperBound('\u{10ffff}'), undefined);
      assert.equal(prefixUpperBound('a\ud7ff'), 'a\ue000');
    });

    it('folds case as the database lower() does: ASCII only on SQLite, every letter on PostgreSQL', () => {
      assert.equal(sqlite.dialect.foldCase('SMITH Élodie'), 'smith Élodie');
      assert.equal(postgres.dialect.foldCase('SMITH Élodie'), 'smith élodie');
      assert.deepEqual(postgres.dialect.namePrefixBounds('SMI'), { low: 'smi', high: 'smj' });
      assert.deepEqual(sqlite.dialect.namePrefixBounds('Ém'), { low: 'Ém', high: 'Én' });
    });

    it('MySQL: a LIKE pattern with its wildcards escaped, compared through the collation', () => {
      assert.deepEqual(mysql.dialect.namePrefixBounds('SMI'), { low: 'smi%', high: undefined });
      assert.deepEqual(mysql.dialect.namePrefixBounds('o_b%r\\'), { low: 'o\\_b\\%r\\\\%', high: undefined });
    });
  });

  describe('patient search shapes', () => {
    const byName = (database: Database) =>
      createPatientQueries(database).patientsByName(
        {
          lastName: database.dialect.namePrefixBounds('smi'),
          firstName: undefined,
          dob: '1970-01-02',
        },
        PAGE,
      );

    it('PostgreSQL: name prefix as a range on lower(name) in byte order, bound parameters, page', () => {
      const query = byName(postgres);
      assert.match(
        query.sql,
        /lower\("c"\."last_name"\) collate "C" >= \$\d+ and lower\("c"\."last_name"\) collate "C" < \$\d+/,
      );
      assert.match(query.sql, /order by s0 asc, s1 asc, "p"\."id" asc limit \$\d+ offset \$\d+/);
      assert.ok(query.parameters.includes('smi') && query.parameters.includes('smj'));
      assert.ok(query.parameters.includes('1970-01-02'));
    });

    it('SQLite: the same range without a collation, and the same parameters', () => {
      const query = byName(sqlite);
      assert.match(query.sql, /lower\("c"\."last_name"\) >= \? and lower\("c"\."last_name"\) < \?/);
      assert.doesNotMatch(query.sql, /collate/);
      assert.deepEqual(
        [...query.parameters].filter((p) => typeof p === 'string'),
        [...byName(postgres).parameters].filter((p) => typeof p === 'string'),
      );
    });

    it('MySQL: the name columns as they are (their collation folds case), LIKE, NULLs sorting low by default', () => {
      const query = byName(mysql);
      assert.match(query.sql, /`c`\.`last_name` like \?/);
      assert.doesNotMatch(query.sql, /lower\(|nulls (first|last)/);
      assert.match(query.sql, /order by s0 asc, s1 asc, `p`\.`id` asc limit \? offset \?/);
      assert.ok(query.parameters.includes('smi%'));
      const byDob = createPatientQueries(mysql).patientsByName(
        { lastName: mysql.dialect.namePrefixBounds('smi'), firstName: undefined, dob: undefined },
        { ...PAGE, sortColumn: 4, isDescending: true },
      );
      assert.match(byDob.sql, /order by s0 desc, `p`\.`id` asc/);
    });

    it('identifiers: (type, lower(value)) pairs and the smallest leading number as the default order', () => {
      const pg = createPatientQueries(postgres).patientsByIdentifier([{ typeId: 3, value: 'h123' }], PAGE);
      assert.match(pg.sql, /"pi"\."patient_identifier_type_id" = \$\d+ and lower\("pi"\."value"\) = \$\d+/);
      assert.match(pg.sql, /min\(coalesce\(substring\("k"\."value" from '\^\[0-9\]\+'\)::numeric, 0\)\)/);
      const lite = createPatientQueries(sqlite).patientsByIdentifier([{ typeId: 3, value: 'h123' }], PAGE);
      assert.match(lite.sql, /min\(cast\("k"\."value" as integer\)\)/);
      const my = createPatientQueries(mysql).patientsByIdentifier([{ typeId: 3, value: 'h123' }], PAGE);
      assert.match(my.sql, /`pi`\.`patient_identifier_type_id` = \? and `pi`\.`value` = \?/);
      assert.match(
        my.sql,
        /min\(coalesce\(cast\(nullif\(regexp_substr\(`k`\.`value`, '\^\[0-9\]\+'\), ''\) as decimal\(65, 0\)\), 0\)\)/,
      );
    });
  });

  describe('queue claim', () => {
    const options = {
      queue: 'q',
      status: 'NEW' as const,
      nowText: '2026-01-01 00:00:00',
      limit: 25,
      excludeRequestIds: new Set<number>(),
    };

    it('PostgreSQL locks the routine and its request, skipping rows other workers hold', () => {
      const { sql } = claimQuery(postgres.db, postgres.dialect, options).compile();
      assert.match(
        sql,
        /order by "rr"\."request_id", "rr"\."id" limit 25 for update of "r", "rr" skip locked$/,
      );
      assert.match(sql, /not exists \(select 1 as "one" from "request_routine" as "sibling"/);
    });

    it("reads one status oldest request first, looking up each routine's request and siblings by row", () => {
      const { sql } = claimQuery(postgres.db, postgres.dialect, { ...options, status: 'RETRY' }).compile();
      assert.match(sql, /"rr"\."status" = 'RETRY'/);
      assert.doesNotMatch(sql, /"rr"\."status" in/);
      assert.match(sql, /inner join "request" as "r" on "r"\."id" = "rr"\."request_id" \+ 0/);
      assert.match(sql, /"sibling"\."request_id" = "rr"\."request_id" \+ 0/);
    });

    it('writes the queue, the statuses and the limit into the SQL, so that a plan made once knows them', () => {
      const { sql, parameters } = claimQuery(postgres.db, postgres.dialect, options).compile();
      assert.match(sql, /"rr"\."status" = 'NEW'/);
      assert.match(sql, /"sibling"\."status" not in \('COMPLETE', 'VOID'\)/);
      assert.match(sql, /"rr"\."execute_request_queue" = 'q'/);
      assert.deepEqual(parameters, ['2026-01-01 00:00:00']);
      assert.doesNotMatch(sql, /"rr"\.\*/);
    });

    it('compiles one statement per queue and shape and binds each call its own time and excluded requests', () => {
      const first = compileClaim(sqlite.db, sqlite, { ...options, excludeRequestIds: new Set([7, 8]) });
      const second = compileClaim(sqlite.db, sqlite, {
        ...options,
        nowText: '2026-02-02 00:00:00',
        excludeRequestIds: new Set([9, 10]),
      });
      assert.equal(second.sql, first.sql);
      assert.deepEqual(first.parameters, ['2026-01-01 00:00:00', 7, 8]);
      assert.deepEqual(second.parameters, ['2026-02-02 00:00:00', 9, 10]);
      const other = compileClaim(sqlite.db, sqlite, {
        ...options,
        queue: "o'q",
        excludeRequestIds: new Set([7, 8]),
      });
      assert.match(
        other.sql,
        /"rr"\."execute_request_queue" = 'o''q'/,
        'a quote in a name stays inside the literal',
      );
      const pg = compileClaim(postgres.db, postgres, { ...options, limit: 5 });
      assert.match(pg.sql, /limit 5 for update of "r", "rr" skip locked$/);
      assert.deepEqual(pg.parameters, ['2026-01-01 00:00:00']);
    });

    it('MySQL locks with a plain FOR UPDATE (MariaDB has no OF), which locks both joined rows', () => {
      const { sql } = claimQuery(mysql.db, mysql.dialect, options).compile();
      assert.match(sql, /order by `rr`\.`request_id`, `rr`\.`id` limit \d+ for update skip locked$/);
    });

    it('SQLite takes no row lock and leaves out the requests this process runs', () => {
      const { sql } = claimQuery(sqlite.db, sqlite.dialect, {
        ...options,
        excludeRequestIds: new Set([7, 8]),
      }).compile();
      assert.doesNotMatch(sql, /for update/);
      assert.match(sql, /"rr"\."request_id" not in \(\?, \?\)/);
    });
  });

  describe('MySQL writes', () => {
    it('upserts with ON DUPLICATE KEY UPDATE and values(); ignores a duplicate with a no-op assignment', () => {
      const { dialect, db } = mysql;
      const insert = db.insertInto('routine_library').values({ routine_name: 'X', hash_code: 1 });
      const upsert = dialect
        .upsert(insert, ['routine_name'], { hash_code: dialect.insertedValue('hash_code') })
        .compile();
      assert.match(upsert.sql, /on duplicate key update `hash_code` = values\(`hash_code`\)$/);
      const ignore = dialect.insertOrIgnore(insert, ['routine_name']).compile();
      assert.match(ignore.sql, /on duplicate key update `routine_name` = `routine_name`$/);
      assert.doesNotMatch(ignore.sql, /insert ignore/i);
    });

    it('emulates INSERT ... RETURNING for MySQL as one insert per row, then one read by the new ids', () => {
      const query = mysql.db
        .insertInto('protected_file')
        .values([
          { uid: 'a', name: 'x', mimetype: 'image/png', size: '1' },
          { uid: 'b', name: 'y', mimetype: 'image/png', size: '2' },
        ])
        .returning(['uid'])
        .compile();
      const plan = planInsertReturning(new MysqlQueryCompiler(), query.query as InsertQueryNode);
      assert.equal(plan.inserts.length, 2);
      for (const insert of plan.inserts) {
        assert.match(
          insert.sql,
          /^insert into `protected_file` \(`uid`, `name`, `mimetype`, `size`\) values \(\?, \?, \?, \?\)$/,
        );
      }
      assert.deepEqual(plan.inserts[1]!.parameters, ['b', 'y', 'image/png', '2']);
      assert.equal(plan.isIdReturned, false);
      const select = plan.selectByIds([7, 9]);
      assert.equal(select.sql, 'select `uid`, `id` from `protected_file` where `id` in (?, ?)');
      assert.deepEqual(select.parameters, [7, 9]);
      const upsert = mysql.dialect
        .upsert(mysql.db.insertInto('routine_library').values({ routine_name: 'X' }), ['routine_name'], {
          hash_code: mysql.dialect.insertedValue('hash_code'),
        })
        .returning('routine_name')
        .compile();
      assert.throws(
        () => planInsertReturning(new MysqlQueryCompiler(), upsert.query as InsertQueryNode),
        /needs MariaDB/,
      );
    });
  });

  describe('error classification', () => {
    it('reads PostgreSQL SQLSTATEs and socket codes, through causes', () => {
      const classify = (error: unknown) => postgres.dialect.classifyError(error);
      assert.equal(classify({ code: '23503' }), 'foreign_key');
      assert.equal(classify({ code: '23505' }), 'unique');
      assert.equal(classify({ code: '23502' }), 'not_null');
      assert.equal(classify(new Error('wrapped', { cause: { code: 'ECONNREFUSED' } })), 'unavailable');
      assert.equal(classify({ code: '42601' }), undefined);
    });

    it('reads MySQL error numbers, never SQLSTATE class 08 (packet too large is not an outage)', () => {
      const classify = (error: unknown) => mysql.dialect.classifyError(error);
      const server = (errno: number, sqlState = 'HY000') => ({ errno, sqlState, code: 'ER_X' });
      assert.equal(classify(server(1062, '23000')), 'unique');
      assert.equal(classify(server(1452, '23000')), 'foreign_key');
      assert.equal(classify(server(1451, '23000')), 'foreign_key');
      assert.equal(classify(server(1048, '23000')), 'not_null');
      assert.equal(classify(server(1364)), 'not_null');
      assert.equal(classify(server(1040, '08004')), 'unavailable');
      assert.equal(classify(server(1927, '70100')), 'unavailable');
      assert.equal(classify(server(1153, '08S01')), undefined);
      assert.equal(
        classify(new Error('wrapped', { cause: { code: 'PROTOCOL_CONNECTION_LOST' } })),
        'unavailable',
      );
      assert.equal(classify({ code: 'ECONNREFUSED', errno: -111 }), 'unavailable');
      assert.equal(classify(server(1064, '42000')), undefined);
      // The other dialects' classifiers leave MySQL errors alone.
      assert.equal(postgres.dialect.classifyError(server(1153, '08S01')), undefined);
    });

    it('reads SQLite extended result codes', async () => {
      const error = await sqlite.db.schema
        .createTable('t')
        .addColumn('x', 'integer', (c) => c.primaryKey())
        .execute()
        .then(() =>
          sqlite.db
            .insertInto('t' as never)
            .values({ x: 1 } as never)
            .execute(),
        )
        .then(() =>
          sqlite.db
            .insertInto('t' as never)
            .values({ x: 1 } as never)
            .execute(),
        )
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      assert.equal(sqlite.dialect.classifyError(error), 'unique');
      assert.equal(sqlite.dialect.classifyError(new Error('boom')), undefined);
    });
  });
});
