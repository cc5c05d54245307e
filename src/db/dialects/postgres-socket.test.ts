import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import type { TestDatabase } from '../../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../../test/harness.ts';
import { copyOutRows } from './postgres-copy.ts';
import { MessageFramer, createPostgresSocket } from './postgres-socket.ts';

/** A backend message: type byte, then a length that counts itself, then the body. */
function message(type: string, body: Buffer): Buffer {
  const header = Buffer.alloc(5);
  header.write(type, 0, 'latin1');
  header.writeUInt32BE(body.length + 4, 1);
  return Buffer.concat([header, body]);
}

/** Splits runs of whole messages into the messages; fails on a run that ends inside one. */
function messagesOf(run: Buffer): Buffer[] {
  const messages: Buffer[] = [];
  for (let at = 0; at < run.length;) {
    assert.ok(at + 5 <= run.length, 'a run ends inside a header');
    const end = at + 1 + run.readUInt32BE(at + 1);
    assert.ok(end <= run.length, 'a run ends inside a message');
    messages.push(Buffer.from(run.subarray(at, end)));
    at = end;
  }
  return messages;
}

/**
 * Pushes `stream` in the pieces cut at `cuts`, each from one reused Buffer that is overwritten after
 * its push, and answers the messages emitted, each copied when emitted.
 */
function frame(stream: Buffer, cuts: readonly number[]): Buffer[] {
  const emitted: Buffer[] = [];
  const framer = new MessageFramer((run) => emitted.push(...messagesOf(run)));
  const reused = Buffer.alloc(stream.length);
  let from = 0;
  for (const to of [...cuts, stream.length]) {
    stream.copy(reused, 0, from, to);
    assert.equal(framer.push(reused.subarray(0, to - from)), true);
    reused.fill(0xee);
    from = to;
  }
  return emitted;
}

describe('MessageFramer', () => {
  const messages = [
    message('Z', Buffer.from('I')),
    message('C', Buffer.alloc(0)),
    message('d', randomBytes(70 * 1024)),
    message('D', randomBytes(13)),
    message('d', randomBytes(300 * 1024)),
    message('d', randomBytes(64 * 1024 - 5)),
    message('Z', Buffer.from('T')),
  ];
  const stream = Buffer.concat(messages);

  it('hands on whole messages only, byte for byte, however the stream is cut', () => {
    assert.deepEqual(frame(stream, []), messages);
    const single = Buffer.concat(messages.slice(0, 2));
    assert.deepEqual(
      frame(
        single,
        Array.from({ length: single.length - 1 }, (_, i) => i + 1),
      ),
      messages.slice(0, 2),
    );
    for (const step of [1000, 4099, 65536, 65537, 131072]) {
      const cuts: number[] = [];
      for (let at = step; at < stream.length; at += step) cuts.push(at);
      assert.deepEqual(frame(stream, cuts), messages, `cut every ${step} bytes`);
    }
    for (let first = 1; first < 12; first++)
      assert.deepEqual(frame(stream, [first, first + 3, 70 * 1024, 70 * 1024 + 2]), messages);
  });

  it('refuses a length that no message can have', () => {
    const framer = new MessageFramer(() => {});
    assert.equal(framer.push(Buffer.from([0x5a, 0, 0, 0, 3, 0x49])), false);
    const split = new MessageFramer(() => {});
    assert.equal(split.push(Buffer.from([0x5a, 0, 0])), true);
    assert.equal(split.push(Buffer.from([0, 2])), false);
  });
});

// The socket itself needs a server: PostgreSQL only.
forEachDialect((dialect) => {
  if (dialect !== 'postgres') return;
  describe('createPostgresSocket (postgres)', () => {
    let testDb: TestDatabase;
    let pool: pg.Pool;
    before(async () => {
      testDb = await createTestDatabase(dialect);
      pool = new pg.Pool({ connectionString: testDb.url, max: 2, stream: createPostgresSocket });
    });
    after(async () => {
      await pool.end();
      await testDb.drop();
    });

    it('brings large and many results intact through queries and COPY', async () => {
      const value = randomBytes(3 * 1024 * 1024 + 7);
      const hex = value.toString('hex');
      const [inlined, rows, copied] = await Promise.all([
        pool.query<{ bytes: Buffer }>(`select decode($1, 'hex') as bytes`, [hex]),
        pool.query<{ n: number; text: string }>(
          `select n, repeat('é', n) as text from generate_series(1, 5000) as n`,
        ),
        copyOutRows(
          pool,
          sql`copy (select decode(${sql.lit(hex)}, 'hex')) to stdout (format binary)`.compile(testDb.db),
        ),
      ]);
      assert.ok(inlined.rows[0]!.bytes.equals(value));
      assert.equal(rows.rows.length, 5000);
      assert.ok(rows.rows.every((row, i) => row.n === i + 1 && row.text === 'é'.repeat(i + 1)));
      assert.ok(copied[0]![0]!.equals(value));
      await assert.rejects(pool.query('select 1 / 0'), /division by zero/);
      assert.deepEqual((await pool.query('select 2 as two')).rows, [{ two: 2 }]);
    });

    it('reports a connection the server ends, and the pool connects again', async () => {
      const client = await pool.connect();
      const ended = new Promise<void>((resolve) => client.once('end', () => resolve()));
      client.on('error', () => {});
      const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
      await testDb.db.executeQuery(sql`select pg_terminate_backend(${rows[0]!.pid})`.compile(testDb.db));
      await ended;
      await assert.rejects(client.query('select 1'));
      client.release(true);
      assert.deepEqual((await pool.query('select 3 as three')).rows, [{ three: 3 }]);
    });
  });
});
