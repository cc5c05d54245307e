/**
 * An SIU message mapped, through the site's field map, to the change PASAPI's `PatientAppointment`
 * takes (pas-and-worklists.md 3.2): S12 (new booking), S13 (reschedule) and S14 (modify) to a full
 * appointment PUT of the same external id, S15 (cancel) and S17 (delete) to its DELETE. The booking's
 * identifier type is the local identifier whose authority PID-3 carries, as for ADT; the patient is the
 * one holding that number (resolved by the listener inside its transaction: PASAPI's `<PatientId><Id>`).
 *
 * The start is read as the site's wall clock (`TIME_ZONE`), as PASAPI reads `AppointmentDate` and
 * `AppointmentTime`: seconds and a trailing UTC offset are not used (UK PAS feeds send local time).
 */
import type { Hl7Message } from '@medplum/core';
import type { AppointmentMapping, AppointmentRecord } from '../pasapi/index.ts';
import { parseLooseDate } from '../pasapi/index.ts';
import { AdtMappingError, MessageReader, localNumber } from './adt-mapping.ts';
import type { Hl7FieldMap } from '../../site-files/hl7-field-map.ts';
import { ERROR_CODE } from './hl7-text.ts';

/** SIU events that book, move or change an appointment. */
export const BOOKING_EVENTS: ReadonlySet<string> = new Set(['S12', 'S13', 'S14']);
/** SIU events that cancel or delete one. */
export const CANCEL_EVENTS: ReadonlySet<string> = new Set(['S15', 'S17']);

/** The longest external id PASAPI keeps (`pasapi_assignment.resource_id`). */
const MAX_EXTERNAL_ID_CHARACTERS = 40;

export type SiuChange =
  | {
      readonly kind: 'appointment';
      readonly externalId: string;
      readonly identifierTypeKey: string;
      /** The patient's number of `identifierTypeKey` (PID-3). */
      readonly patientNumber: string;
      /** Without `patientId`: the listener names the patient once it has resolved the number. */
      readonly record: Omit<AppointmentRecord, 'patientId'>;
    }
  | { readonly kind: 'cancel'; readonly externalId: string; readonly patientNumber: string };

/** The first non-empty value of `refs` (its first subcomponent: a TS inside a TQ, an HD), and where. */
function firstValue(
  reader: MessageReader,
  refs: readonly string[],
): { value: string; ref: string } | undefined {
  for (const ref of refs) {
    const value = reader.firstSub(reader.rawComponent(ref));
    if (value !== '' && value !== '""') return { value, ref };
  }
  return undefined;
}

/** `YYYYMMDDHHMM[SS[.S]][+ZZZZ]` as the site's date and `HH:MM`. */
function readStart(text: string, ref: string): { date: string; time: string } {
  const match = /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(?:\d{2}(?:\.\d+)?)?(?:[+-]\d{4})?$/.exec(text);
  const date = match === null ? undefined : parseLooseDate(`${match[1]}-${match[2]}-${match[3]}`);
  if (match === null || date === undefined || Number(match[4]) > 23 || Number(match[5]) > 59)
    throw new AdtMappingError(
      `${ref} is not a date and time of day (YYYYMMDDHHMM): '${text.slice(0, 40)}'`,
      ERROR_CODE.dataType,
    );
  return { date, time: `${match[4]}:${match[5]}` };
}

function readExternalId(reader: MessageReader, map: Hl7FieldMap): string {
  const found = firstValue(reader, map.appointmentId);
  if (found === undefined)
    throw new AdtMappingError(
      `no appointment id in ${map.appointmentId.join(', ')}`,
      ERROR_CODE.requiredField,
    );
  // eslint-disable-next-line no-control-regex
  if ([...found.value].length > MAX_EXTERNAL_ID_CHARACTERS || /[\u0000-\u001f\u007f]/.test(found.value))
    throw new AdtMappingError(
      `${found.ref}: the appointment id must be 1 to ${MAX_EXTERNAL_ID_CHARACTERS} characters`,
      ERROR_CODE.dataType,
    );
  return found.value;
}

/** The change an SIU message of `event` asks for. */
export function mapSiuMessage(message: Hl7Message, event: string, map: Hl7FieldMap): SiuChange {
  const reader = new MessageReader(message);
  if (reader.segment('SCH') === undefined)
    throw new AdtMappingError('the message has no SCH segment', ERROR_CODE.segmentSequence);
  if (reader.segment('PID') === undefined)
    throw new AdtMappingError('the message has no PID segment', ERROR_CODE.segmentSequence);
  const { entry, number } = localNumber(reader, map);
  const externalId = readExternalId(reader, map);
  if (CANCEL_EVENTS.has(event)) return { kind: 'cancel', externalId, patientNumber: number };

  const start = firstValue(reader, map.appointmentStart);
  if (start === undefined)
    throw new AdtMappingError(
      `no appointment start in ${map.appointmentStart.join(', ')}`,
      ERROR_CODE.requiredField,
    );
  const { date, time } = readStart(start.value, start.ref);
  const mappings: AppointmentMapping[] = [];
  for (const mapping of map.appointmentMappings) {
    const value = firstValue(reader, mapping.fields)?.value ?? mapping.default ?? '';
    if (value !== '') mappings.push({ key: mapping.key, value });
  }
  return {
    kind: 'appointment',
    externalId,
    identifierTypeKey: entry.identifierType,
    patientNumber: number,
    record: { appointmentDate: date, appointmentTime: time, mappings },
  };
}
