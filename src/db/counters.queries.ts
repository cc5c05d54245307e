/**
 * Every statement on `rate_limit_counter` (migration 0010), the table of counters that server processes
 * share through the database. Its rows are of three kinds, told apart by `limiter`:
 * - rate-limit windows: hits of one hashed key in one window (`window_start` aligned to the window's
 *   length), added to by every process and deleted a minute after the window ends;
 * - `credential_change`: one permanent row (window 0 to the largest safe integer) counting changes that
 *   revoke credentials (a user disabled, a password changed, a role revoked), which every process polls
 *   to forget the credentials it has cached;
 * - `readiness_probe`: one row rewritten by each readiness check (its `window_end` is the time of the
 *   last check, so the window cleanup removes it once checks stop).
 * Not in `DB` and not in the dataset format: transient state, typed here. This file owns the table: the
 * modules and `src/http` reach it only through these functions.
 */
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { Database } from './database.ts';
import type { DB } from './schema.ts';

export interface RateLimitCounterTable {
  limiter: string;
  /** `hashKey(limiter, key)` (src/http/rate-limit.ts): never the raw address or username. */
  key_hash: string;
  /** Epoch milliseconds, a multiple of the window length. */
  window_start: number;
  window_end: number;
  count: number;
}

type CounterTables = { rate_limit_counter: RateLimitCounterTable };

/** Hits to add for one hashed key (`delta` > 0). */
export interface CounterDelta {
  readonly keyHash: string;
  readonly delta: number;
}

/** Rows per statement: 5 parameters a row stays far below both dialects' parameter limits. */
const CHUNK = 500;
const CREDENTIAL_CHANGE = { limiter: 'credential_change', key_hash: 'all' } as const;
const READINESS_PROBE = { limiter: 'readiness_probe', key_hash: 'probe' } as const;
const KEY_COLUMNS = ['limiter', 'key_hash', 'window_start'] as const;

function counters<T extends DB>(db: Kysely<T>): Kysely<DB & CounterTables> {
  return (db as unknown as Kysely<DB>).withTables<CounterTables>();
}

/**
 * Adds `rows` to the limiter's window (one upsert a chunk, `count = count + inserted count`), in one
 * transaction. Through `writeTransaction`: with a single writer (SQLite) it joins the request writes'
 * batched commit instead of slipping into someone else's transaction.
 */
export async function addWindowHits(
  database: Database,
  limiter: string,
  window: { readonly start: number; readonly end: number },
  rows: readonly CounterDelta[],
): Promise<void> {
  if (rows.length === 0) return;
  const { dialect } = database;
  await database.writeTransaction(async (trx) => {
    for (let i = 0; i < rows.length; i += CHUNK) {
      const values = rows.slice(i, i + CHUNK).map((row) => ({
        limiter,
        key_hash: row.keyHash,
        window_start: window.start,
        window_end: window.end,
        count: row.delta,
      }));
      const insert = counters(trx).insertInto('rate_limit_counter').values(values);
      await dialect
        .upsert(insert, KEY_COLUMNS, {
          count: sql<number>`${dialect.existingValue('rate_limit_counter', 'count')} + ${dialect.insertedValue('count')}`,
        })
        .execute();
    }
  });
}

/** The combined totals of `keyHashes` in the limiter's window starting at `windowStart`. */
export async function readWindowTotals(
  db: Kysely<DB>,
  limiter: string,
  windowStart: number,
  keyHashes: readonly string[],
): Promise<Map<string, number>> {
  const totals = new Map<string, number>();
  for (let i = 0; i < keyHashes.length; i += CHUNK) {
    const rows = await counters(db)
      .selectFrom('rate_limit_counter')
      .select(['key_hash', 'count'])
      .where('limiter', '=', limiter)
      .where('window_start', '=', windowStart)
      .where('key_hash', 'in', keyHashes.slice(i, i + CHUNK))
      .execute();
    for (const row of rows) totals.set(row.key_hash, Number(row.count));
  }
  return totals;
}

/** Deletes the windows that ended before `endedBefore` (epoch ms). */
export async function deleteEndedWindows(db: Kysely<DB>, endedBefore: number): Promise<void> {
  await counters(db).deleteFrom('rate_limit_counter').where('window_end', '<', endedBefore).execute();
}

/** The number of credential changes recorded so far (0 before the first). */
export async function readCredentialChanges(db: Kysely<DB>): Promise<number> {
  const row = await counters(db)
    .selectFrom('rate_limit_counter')
    .select('count')
    .where('limiter', '=', CREDENTIAL_CHANGE.limiter)
    .where('key_hash', '=', CREDENTIAL_CHANGE.key_hash)
    .where('window_start', '=', 0)
    .executeTakeFirst();
  return row === undefined ? 0 : Number(row.count);
}

/**
 * Records a change that revokes credentials, in the caller's transaction (so that it commits with the
 * change). Every server process polling the count then forgets its cached credentials.
 */
export async function recordCredentialChange<T extends DB>(db: Kysely<T>): Promise<void> {
  // Wraps well before the column's 32 bits: only a change of the value matters to the readers.
  const updated = await counters(db)
    .updateTable('rate_limit_counter')
    .set((eb) => ({ count: eb(eb('count', '%', 1_000_000_000), '+', 1) }))
    .where('limiter', '=', CREDENTIAL_CHANGE.limiter)
    .where('key_hash', '=', CREDENTIAL_CHANGE.key_hash)
    .where('window_start', '=', 0)
    .executeTakeFirst();
  if (Number(updated.numUpdatedRows) > 0) return;
  await counters(db)
    .insertInto('rate_limit_counter')
    .values({ ...CREDENTIAL_CHANGE, window_start: 0, window_end: Number.MAX_SAFE_INTEGER, count: 1 })
    .execute();
}

/** One durable write (rejects when the database cannot write: disk full, read-only). */
export async function probeWrite(database: Database, at: number): Promise<void> {
  const { dialect } = database;
  await database.writeTransaction(async (trx) => {
    const insert = counters(trx)
      .insertInto('rate_limit_counter')
      .values({ ...READINESS_PROBE, window_start: 0, window_end: at, count: 1 });
    await dialect.upsert(insert, KEY_COLUMNS, { window_end: dialect.insertedValue('window_end') }).execute();
  });
}
