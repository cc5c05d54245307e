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

/** Who a patient is, as a desk operator recognises them: name and hospital number. */
export interface PatientLabel {
  readonly id: number;
  readonly firstName: string;
  readonly lastName: string;
  /** The first live identifier of a `LOCAL` type (the hospital number), else null. */
  readonly hospitalNumber: string | null;
  readonly dob: string | null;
  readonly gender: string | null;
}

/** The labels of patients `ids` (deleted ones too: a record may point at a patient merged away). */
export async function describePatients(
  db: Kysely<DB>,
  ids: readonly number[],
): Promise<Map<number, PatientLabel>> {
  const unique = [...new Set(ids)];
  if (unique.length === 0) return new Map();
  const [patients, numbers] = await Promise.all([
    db
      .selectFrom('patient as p')
      .innerJoin('contact as c', 'c.id', 'p.contact_id')
      .select(['p.id', 'c.first_name', 'c.last_name', 'p.dob', 'p.gender'])
      .where('p.id', 'in', unique)
      .execute(),
    db
      .selectFrom('patient_identifier as pi')
      .innerJoin('patient_identifier_type as t', 't.id', 'pi.patient_identifier_type_id')
      .select(['pi.patient_id', 'pi.value'])
      .where('pi.patient_id', 'in', unique)
      .where('pi.deleted', '=', 0)
      .where('t.usage_type', '=', 'LOCAL')
      .orderBy('pi.id')
      .execute(),
  ]);
  const hospitalNumbers = new Map<number, string>();
  for (const row of numbers)
    if (!hospitalNumbers.has(row.patient_id)) hospitalNumbers.set(row.patient_id, row.value);
  return new Map(
    patients.map((p) => [
      p.id,
      {
        id: p.id,
        firstName: p.first_name,
        lastName: p.last_name,
        hospitalNumber: hospitalNumbers.get(p.id) ?? null,
        dob: p.dob,
        gender: p.gender,
      },
    ]),
  );
}
