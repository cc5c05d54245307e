/**
 * Biometry filing's lookups and its review list: indexes on the names filing looks lenses, formulas and
 * surgeons up by (one statement per file names every lens of it, so the lookup is an index range, not a
 * scan of a lens list that grows with every new lens), and `biometry_lens_review`, the lens types a
 * device file made, held for review (created inactive, listed for no institution) until someone reviews
 * them. `cra_biometry_lens_review` on an OpenEyes database (its migration 0005).
 */
import type { AnyDb, DialectAdapter } from './helpers.ts';
import { idColumn } from './helpers.ts';

export async function up(db: AnyDb, dialect: DialectAdapter): Promise<void> {
  const t = dialect.columnTypes;
  await db.schema
    .createIndex('ophinbiometry_lenstype_lens_name')
    .on('ophinbiometry_lenstype_lens')
    .column('name')
    .execute();
  await db.schema
    .createIndex('ophinbiometry_calculation_formula_name')
    .on('ophinbiometry_calculation_formula')
    .column('name')
    .execute();
  await db.schema
    .createIndex('ophinbiometry_surgeon_name')
    .on('ophinbiometry_surgeon')
    .column('name')
    .execute();
  await idColumn(db.schema.createTable('biometry_lens_review'), t)
    .addColumn('lenstype_lens_id', 'integer', (c) => c.notNull().references('ophinbiometry_lenstype_lens.id'))
    .addColumn('request_id', 'integer', (c) => c.notNull())
    .addColumn('created_date', t.dateTime, (c) => c.notNull())
    .addUniqueConstraint('biometry_lens_review_lens_key', ['lenstype_lens_id'])
    .execute();
}
