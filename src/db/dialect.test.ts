/**
 * The dialect adapters' pure parts and the SQL each dialect generates for the hand-tuned statements (the
 * patient search shapes and the queue claim), compiled without a server: a PostgreSQL pool opens no
 * connection until a query runs, so every dialect is checked on every machine.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../config.ts';
import { createPatientQueries } from '../modules/patient/patient.queries.ts';
import type { PageQuery } from '../modules/patient/patient.queries.ts';
import { claimQuery } from '../modules/request-queue/claim.queries.ts';
import type { Database } from './database.ts';
import { openDatabase } from './database.ts';
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
  before(async () => {
    sqlite = await openDatabase(loadConfig({ DATABASE_URL: 'sqlite::memory:' }).database);
    // Never connected: only compiled against.
    postgres = await openDatabase(
      loadConfig({ DATABASE_URL: 'postgres://nobody@127.0.0.1:9/none' }).database,
      { poolSize: 1 },
    );
  });
  after(async () => {
    await sqlite.close();
    await postgres.close();
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

    it('identifiers: (type, lower(value)) pairs and the smallest leading number as the default order', () => {
      const pg = createPatientQueries(postgres).patientsByIdentifier([{ typeId: 3, value: 'h123' }], PAGE);
      assert.match(pg.sql, /"pi"\."patient_identifier_type_id" = \$\d+ and lower\("pi"\."value"\) = \$\d+/);
      assert.match(pg.sql, /min\(coalesce\(substring\("k"\."value" from '\^\[0-9\]\+'\)::numeric, 0\)\)/);
      const lite = createPatientQueries(sqlite).patientsByIdentifier([{ typeId: 3, value: 'h123' }], PAGE);
      assert.match(lite.sql, /min\(cast\("k"\."value" as integer\)\)/);
    });
  });

  describe('queue claim', () => {
    const options = {
      queue: 'q',
      nowText: '2026-01-01 00:00:00',
      limit: 25,
      excludeRequestIds: new Set<number>(),
    };

    it('PostgreSQL locks the routine and its request, skipping rows other workers hold', () => {
      const { sql } = claimQuery(postgres.db, postgres.dialect, options).compile();
      assert.match(sql, /order by "rr"\."id" limit \$\d+ for update of "r", "rr" skip locked$/);
      assert.match(sql, /not exists \(select 1 as "one" from "request_routine" as "sibling"/);
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

  describe('error classification', () => {
    it('reads PostgreSQL SQLSTATEs and socket codes, through causes', () => {
      const classify = (error: unknown) => postgres.dialect.classifyError(error);
      assert.equal(classify({ code: '23503' }), 'foreign_key');
      assert.equal(classify({ code: '23505' }), 'unique');
      assert.equal(classify({ code: '23502' }), 'not_null');
      assert.equal(classify(new Error('wrapped', { cause: { code: 'ECONNREFUSED' } })), 'unavailable');
      assert.equal(classify({ code: '42601' }), undefined);
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
