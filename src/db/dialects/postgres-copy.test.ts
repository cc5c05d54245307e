import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { RawBuilder } from 'kysely';
import { sql } from 'kysely';
import pg from 'pg';
import type { TestDatabase } from '../../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../../test/harness.ts';
import type { CopyRow } from './postgres-copy.ts';
import { BinaryCopyParser, copyOutRows } from './postgres-copy.ts';

const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');

/** A binary COPY stream as PostgreSQL writes it, with an optional header extension. */
function copyStream(rows: CopyRow[], extension = Buffer.alloc(0)): Buffer {
  const word = (bytes: number, value: number) => {
    const buffer = Buffer.alloc(bytes);
    if (bytes === 2) buffer.writeInt16BE(value);
    else buffer.writeInt32BE(value);
    return buffer;
  };
  const parts = [SIGNATURE, word(4, 0), word(4, extension.length), extension];
  for (const row of rows) {
    parts.push(word(2, row.length));
    for (const field of row)
      parts.push(field === null ? word(4, -1) : Buffer.concat([word(4, field.length), field]));
  }
  parts.push(word(2, -1));
  return Buffer.concat(parts);
}

function parse(messages: Buffer[]): CopyRow[] {
  const parser = new BinaryCopyParser();
  for (const message of messages) parser.push(message);
  assert.ok(parser.isComplete);
  return parser.rows;
}

describe('BinaryCopyParser', () => {
  const everyByte = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
  const rows: CopyRow[] = [
    [Buffer.from('2020-03-04 05:06:07'), everyByte, null, Buffer.alloc(0)],
    [Buffer.from('x'), Buffer.from([0xff, 0xfe, 0x00, 0xc3]), Buffer.from([0x80]), null],
  ];

  it('reads every field of every row, with NULLs and empty values, bytes untouched', () => {
    assert.deepEqual(parse([copyStream(rows)]), rows);
    assert.deepEqual(parse([copyStream([])]), []);
  });

  it('reads the same rows however the stream is split into messages', () => {
    const stream = copyStream(rows, Buffer.from('ext'));
    assert.deepEqual(parse([...stream].map((byte) => Buffer.from([byte]))), rows);
    for (let a = 1; a < stream.length; a += 7)
      for (let b = a; b < stream.length; b += 11)
        assert.deepEqual(parse([stream.subarray(0, a), stream.subarray(a, b), stream.subarray(b)]), rows);
  });

  it('owns the bytes it returns: reusing a message buffer afterwards changes nothing', () => {
    const stream = copyStream(rows);
    const parser = new BinaryCopyParser();
    parser.push(stream);
    stream.fill(0);
    assert.deepEqual(parser.rows, rows);
  });

  it('copies each field into the Buffer its allocator gives', () => {
    const pieces: CopyRow[] = [
      [Buffer.from('a'), Buffer.from([1, 2, 3])],
      [Buffer.from('b'), Buffer.from([0xff, 0x00])],
    ];
    const target = Buffer.alloc(5);
    let used = 0;
    const parser = new BinaryCopyParser((bytes, column) => {
      if (column === 0) return Buffer.alloc(bytes);
      used += bytes;
      return target.subarray(used - bytes, used);
    });
    const stream = copyStream(pieces);
    for (let i = 0; i < stream.length; i += 3) parser.push(stream.subarray(i, i + 3));
    assert.deepEqual(parser.rows, pieces);
    assert.deepEqual(target, Buffer.from([1, 2, 3, 0xff, 0x00]));
    const wrongSize = new BinaryCopyParser((bytes) => Buffer.alloc(bytes + 1));
    assert.throws(() => wrongSize.push(stream), /wrong size/);
  });

  it('refuses a stream that is not binary COPY, and data after the trailer', () => {
    assert.throws(() => new BinaryCopyParser().push(Buffer.from('id\tbytes\n1\t\\x00\n' + ' '.repeat(8))));
    const parser = new BinaryCopyParser();
    parser.push(copyStream([]));
    assert.throws(() => parser.push(Buffer.from([0])));
    const unfinished = new BinaryCopyParser();
    unfinished.push(copyStream(rows).subarray(0, 40));
    assert.equal(unfinished.isComplete, false);
  });
});

// The statement side needs a server: PostgreSQL only.
forEachDialect((dialect) => {
  if (dialect !== 'postgres') return;
  describe('copyOutRows (postgres)', () => {
    let testDb: TestDatabase;
    let pool: pg.Pool;
    before(async () => {
      testDb = await createTestDatabase(dialect);
      pool = new pg.Pool({ connectionString: testDb.url, max: 2 });
    });
    after(async () => {
      await pool.end();
      await testDb.drop();
    });

    const copyOf = (select: RawBuilder<unknown>) =>
      sql`copy (${select}) to stdout (format binary)`.compile(testDb.db);

    it('brings every row with its bytes as stored', async () => {
      const everyByte = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
      const hex = everyByte.toString('hex');
      const rows = await copyOutRows(
        pool,
        copyOf(sql`select cast('a' as text), decode(${sql.lit(hex)}, 'hex'), null::bytea
          union all select 'é', ''::bytea, '\\x00'::bytea`),
      );
      assert.deepEqual(rows, [
        [Buffer.from('a'), everyByte, null],
        [Buffer.from('é'), Buffer.alloc(0), Buffer.from([0])],
      ]);
      assert.deepEqual(await copyOutRows(pool, copyOf(sql`select 1 where false`)), []);
    });

    it('rejects on an SQL error, refuses parameters, and leaves the pool usable', async () => {
      await assert.rejects(copyOutRows(pool, copyOf(sql`select 1 / 0`)), /division by zero/);
      await assert.rejects(copyOutRows(pool, copyOf(sql`select ${1}`)), /COPY takes no parameters/);
      const rows = await copyOutRows(pool, copyOf(sql`select cast('ok' as text)`));
      assert.deepEqual(rows, [[Buffer.from('ok')]]);
    });
  });
});
