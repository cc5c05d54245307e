/**
 * `cra_biometry_lens_review` on an OpenEyes database: the own schema's `biometry_lens_review` (migration
 * 0018), the lens types a device file made, held for review. OpenEyes's lens table is OpenEyes's and keeps
 * no index on `name`: filing looks every lens of a file up in one statement (a file carries a capped
 * handful), so the lookup costs one read of OpenEyes's lens list per file, not one per lens.
 */
import { sql } from 'kysely';
import type { AnyDb } from '../../migrations/helpers.ts';

export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('cra_biometry_lens_review')
    .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
    .addColumn('lenstype_lens_id', 'integer', (c) => c.notNull())
    .addColumn('request_id', 'integer', (c) => c.notNull())
    .addColumn('created_date', 'datetime', (c) => c.notNull())
    .addUniqueConstraint('cra_biometry_lens_review_lens_key', ['lenstype_lens_id'])
    .modifyEnd(sql`engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci`)
    .execute();
}
