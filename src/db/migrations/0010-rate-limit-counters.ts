/**
 * Shared rate-limit counters: `rate_limit_counter`, one row per limiter, hashed key and
 * fixed window, holding the hits every server process has flushed for that window. Each process counts
 * in memory and merges its increments here in the background (src/http/shared-counters.ts), so that
 * several processes or machines enforce one combined limit.
 *
 * Keys are stored hashed (never the raw client address or username) and rows live only a few minutes:
 * every sync deletes the windows that are over. Windows are epoch milliseconds (bigint), aligned to the
 * window length, so that every process names the same window the same way.
 *
 * Not in `DB` and not in the dataset format: it is transient state, typed by shared-counters.ts itself.
 */
import type { AnyDb } from './helpers.ts';

export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('rate_limit_counter')
    .addColumn('limiter', 'varchar(32)', (c) => c.notNull())
    .addColumn('key_hash', 'varchar(32)', (c) => c.notNull())
    .addColumn('window_start', 'bigint', (c) => c.notNull())
    .addColumn('window_end', 'bigint', (c) => c.notNull())
    .addColumn('count', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('rate_limit_counter_pk', ['limiter', 'key_hash', 'window_start'])
    .execute();
  await db.schema
    .createIndex('rate_limit_counter_window_end')
    .on('rate_limit_counter')
    .column('window_end')
    .execute();
}
