/**
 * The `REQUEST_DATA` names the service writes itself and later trusts: a client's query string (queue
 * add, STOW-RS) becomes `REQUEST_DATA`, so a client naming one of these would set what the routines and
 * the console take as their own findings (a device profile and event date that file an event, a matched
 * patient, the console's edit history). Such a submission is refused before its body is read.
 *
 * The list is what the routines merge into `REQUEST_DATA` (`mergeRequestData`): `DICOM_SEED`'s and
 * `EXTRACT_IMAGE`'s `dicom_*` tags, the device profile's and the device filing's `device_*` keys,
 * `PATIENT_MATCH`'s `matched_patient_id`, the filers' `event_id`; and what the console's "Fix the data"
 * writes beside the criteria (`console_*`: the edit history, the study date the desk gives).
 */

/** Names a client may not give, exactly. */
export const RESERVED_REQUEST_KEYS: readonly string[] = ['matched_patient_id', 'event_id'];

/** Prefixes a client's names may not start with. */
export const RESERVED_REQUEST_KEY_PREFIXES: readonly string[] = ['dicom_', 'device_', 'console_'];

/** Whether `name` is a `REQUEST_DATA` name only the service writes (compared without regard to case). */
export function isReservedRequestKey(name: string): boolean {
  const folded = name.toLowerCase();
  return (
    RESERVED_REQUEST_KEYS.includes(folded) ||
    RESERVED_REQUEST_KEY_PREFIXES.some((prefix) => folded.startsWith(prefix))
  );
}

/** The reserved names among `query`'s, in their order (empty when none is). */
export function findReservedRequestKeys(query: Readonly<Record<string, unknown>>): string[] {
  return Object.keys(query).filter(isReservedRequestKey);
}

/** The refusal of a submission naming the reserved keys `names` (at most 20 of them, each cut to 64). */
export function reservedKeysMessage(names: readonly string[]): string {
  const shown = names.slice(0, 20).map((name) => name.slice(0, 64));
  return (
    `Reserved parameter name(s): ${shown.join(', ')}${names.length > shown.length ? ', ...' : ''}. ` +
    `The service writes these itself: ${RESERVED_REQUEST_KEYS.join(', ')} and every name starting with ` +
    `${RESERVED_REQUEST_KEY_PREFIXES.join(', ')}.`
  );
}
