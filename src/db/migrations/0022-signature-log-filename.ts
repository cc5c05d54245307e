/**
 * The index of `signature_import_log.filename`: a manual crop's import reuses the failed row's original
 * (`original_log_id`), so the rows that share one original file are the crop and the imports made from
 * it; the console links them by this column (signature/import-log.ts `findCropLinks`).
 */
import type { AnyDb } from './helpers.ts';

export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createIndex('signature_import_log_filename')
    .on('signature_import_log')
    .columns(['filename', 'id'])
    .execute();
}
