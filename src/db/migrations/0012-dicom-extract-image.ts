/**
 * The `EXTRACT_IMAGE` routine of the DICOM chain (`DICOM_SEED` -> `EXTRACT_IMAGE` -> `PATIENT_MATCH`):
 * its `routine_library` row, which `request_routine.routine_name` refers to.
 */
import type { AnyDb } from './helpers.ts';

export async function up(db: AnyDb): Promise<void> {
  const existing = await db
    .selectFrom('routine_library')
    .select('routine_name')
    .where('routine_name', '=', 'EXTRACT_IMAGE')
    .executeTakeFirst();
  if (existing === undefined) {
    await db
      .insertInto('routine_library')
      .values({ routine_name: 'EXTRACT_IMAGE', hash_code: null })
      .execute();
  }
}
