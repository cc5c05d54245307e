/**
 * `request_routine_attempt`: the attempts of routines that have started and not been recorded
 * (claim.queries.ts). A row left behind by a killed or crashed worker makes the next claim count that
 * attempt as a try, so a payload that kills its worker ends FAILED after its tries instead of killing every
 * restart. The service's own table: not in `DB` and not in the dataset format (transient state).
 */
import type { AnyDb, DialectAdapter } from './helpers.ts';

export async function up(db: AnyDb, dialect: DialectAdapter): Promise<void> {
  await db.schema
    .createTable('request_routine_attempt')
    .addColumn('request_routine_id', 'integer', (c) => c.primaryKey())
    .addColumn('try_number', 'integer', (c) => c.notNull())
    .addColumn('started_date', dialect.columnTypes.dateTime)
    .addColumn('unfinished_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('worker', 'varchar(100)', (c) => c.notNull())
    .execute();
}
