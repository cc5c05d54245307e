/**
 * Patients by one of their identifiers, for operators who have a hospital or NHS number in hand (the
 * console's attachment and audit screens). An exact, case-insensitive match on the stored value of any
 * identifier type, live identifiers only; no padding or display rules (that is patient search's job).
 */
import type { Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';

/** At most this many patients are returned for one value (a value shared by that many is a data error). */
const MAX_PATIENTS = 50;

/** Ids of the patients holding identifier `value` (any type), in id order. */
export async function findPatientIdsByIdentifier(db: Kysely<DB>, value: string): Promise<number[]> {
  const text = value.trim();
  if (text === '' || text.length > 64) return [];
  // `type in (all types) and lower(value) = ?` lets the (type, lower(value)) index serve every type.
  const rows = await db
    .selectFrom('patient_identifier as pi')
    .innerJoin('patient as p', 'p.id', 'pi.patient_id')
    .select('pi.patient_id')
    .distinct()
    .where('pi.patient_identifier_type_id', 'in', (eb) =>
      eb.selectFrom('patient_identifier_type').select('id'),
    )
    .where((eb) => eb(eb.fn('lower', ['pi.value']), '=', text.toLowerCase()))
    .where('pi.deleted', '=', 0)
    .where('p.deleted', '=', 0)
    .orderBy('pi.patient_id')
    .limit(MAX_PATIENTS)
    .execute();
  return rows.map((row) => row.patient_id);
}
