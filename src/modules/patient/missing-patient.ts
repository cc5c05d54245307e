/**
 * The contract of a source outside the database that can supply a patient no local patient is found
 * for (the PAS, asked over HL7 by the hl7 module's `pas-query.ts`). Patient search and `PATIENT_MATCH`
 * are handed one by their composition root; without one they answer from the database alone.
 */

/** What asking for an identifier came to. */
export type MissingPatientAnswer =
  /** The source knew the identifier: the patient is now stored (created or updated), `patientId`. */
  | { readonly kind: 'found'; readonly patientId: number }
  /** The source answered that it knows no such patient. */
  | { readonly kind: 'not-found' }
  /** No usable answer (down, slow, refused, malformed): nothing was stored. Words without patient data. */
  | { readonly kind: 'unavailable'; readonly reason: string };

export interface MissingPatientSource {
  /**
   * Asks for the patient holding `identifier` (as a device or a search gives it), stores it when the
   * source knows it, and says what happened. Bounded by the source's timeout; never rejects.
   */
  findMissingPatient(identifier: string): Promise<MissingPatientAnswer>;
}
