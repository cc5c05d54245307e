/**
 * An ADT message mapped, through the site's field map, to the change PASAPI takes: A01, A04, A05, A08,
 * A28, A31 to a full `Patient` record (as the Mirth channels send it: `X-OE-Partial-Record: 0`), A40 and
 * A34 (its v2.3 form, patient identifier only) to a `PatientMerge` (primary = PID, secondary = MRG-1
 * under the same local authority). The values follow
 * the field map's transforms and pas-and-worklists.md P32: county and postcode by position only,
 * address types H → HOME, M/C → CORR, others none; sex F, M, O kept, anything else U.
 *
 * A message that cannot be mapped (no local number, an impossible date) throws {@link AdtMappingError}:
 * the listener answers AE with its text.
 */
import type { Hl7Message, Hl7Segment } from '@medplum/core';
import type { AddressRecord, PatientChange, PatientMergeChange, PatientRecord } from '../pasapi/index.ts';
import { parseLooseDate } from '../pasapi/index.ts';
import type { FieldRef, Hl7FieldMap, LocalIdentifierMap } from '../../site-files/hl7-field-map.ts';
import { parseFieldRef } from '../../site-files/hl7-field-map.ts';
import { ERROR_CODE, unescapeText } from './hl7-text.ts';

/** The ADT events that change a patient. */
export const PATIENT_EVENTS: ReadonlySet<string> = new Set(['A01', 'A04', 'A05', 'A08', 'A28', 'A31']);
/** The ADT events that merge two patients. */
export const MERGE_EVENTS: ReadonlySet<string> = new Set(['A34', 'A40']);

export class AdtMappingError extends Error {
  readonly errorCode: string;
  constructor(message: string, errorCode: string = ERROR_CODE.requiredField) {
    super(message);
    this.name = 'AdtMappingError';
    this.errorCode = errorCode;
  }
}

export type AdtChange =
  | { readonly kind: 'patient'; readonly change: PatientChange }
  | { readonly kind: 'merge'; readonly change: PatientMergeChange };

/** Reads one mapped message. */
export class MessageReader {
  readonly #message: Hl7Message;
  constructor(message: Hl7Message) {
    this.#message = message;
  }

  segment(name: string): Hl7Segment | undefined {
    return this.#message.getSegment(name);
  }

  /** The unescaped, trimmed text of a component of the first repetition. */
  value(ref: FieldRef | string, repetition = 0): string {
    const parsed = typeof ref === 'string' ? parseFieldRef(ref) : ref;
    if (parsed === undefined) return '';
    const segment = this.segment(parsed.segment);
    const field = segment?.getField(parsed.field);
    if (field === undefined || repetition >= field.components.length) return '';
    return this.text(field.getComponent(parsed.component, undefined, repetition));
  }

  /** The escaped text of a component of the first repetition ('' when absent). */
  rawComponent(ref: string): string {
    const parsed = parseFieldRef(ref);
    if (parsed === undefined) return '';
    const field = this.segment(parsed.segment)?.getField(parsed.field);
    if (field === undefined || field.components.length === 0) return '';
    return field.getComponent(parsed.component, undefined, 0);
  }

  /** The repetitions of a field, each as its components' text. */
  repetitions(segmentName: string, fieldIndex: number): string[][] {
    const field = this.segment(segmentName)?.getField(fieldIndex);
    if (field === undefined) return [];
    return field.components.map((components) => components.map((c) => c));
  }

  text(raw: string): string {
    return unescapeText(raw, this.#message.context).trim();
  }

  /** First subcomponent of a component (an HD's namespace id). */
  firstSub(raw: string): string {
    return this.text(raw.split(this.#message.context.subcomponentSeparator)[0] ?? '');
  }
}

/** The HL7 date (`YYYYMMDD[HHMM...]`) of `text` as `YYYY-MM-DD`; undefined for no date. */
export function readHl7Date(text: string, label: string): string | undefined {
  if (text === '' || text === '""') return undefined;
  const match = /^(\d{4})(\d{2})(\d{2})(?:\d{2,}(?:\.\d+)?)?(?:[+-]\d{4})?$/.exec(text);
  const date = match === null ? undefined : parseLooseDate(`${match[1]}-${match[2]}-${match[3]}`);
  if (date === undefined)
    throw new AdtMappingError(`${label} is not a date of the calendar: '${text}'`, ERROR_CODE.dataType);
  return date;
}

/** The numbers of PID-3 (or MRG-1) repetitions under `authorities`, in order. */
function numbersUnder(
  reader: MessageReader,
  map: Hl7FieldMap,
  segmentName: string,
  fieldIndex: number,
  authority: string,
): string[] {
  const wanted = authority.trim().toUpperCase();
  const found: string[] = [];
  for (const components of reader.repetitions(segmentName, fieldIndex)) {
    const matches = map.authorityComponents.some(
      (index) => reader.firstSub(components[index - 1] ?? '').toUpperCase() === wanted,
    );
    const number = reader.text(components[0] ?? '');
    if (matches && number !== '') found.push(number);
  }
  return found;
}

/** The first local identifier of the map that PID-3 carries, with its number. */
export function localNumber(
  reader: MessageReader,
  map: Hl7FieldMap,
): { entry: LocalIdentifierMap; number: string } {
  for (const entry of map.localIdentifiers) {
    const [number] = numbersUnder(reader, map, 'PID', 3, entry.authority);
    if (number !== undefined) return { entry, number };
  }
  throw new AdtMappingError(
    `PID-3 holds no number under the local authority (${map.localIdentifiers.map((e) => e.authority).join(', ')})`,
    ERROR_CODE.unknownKey,
  );
}

function titleCase(text: string): string {
  const compact = text.replace(/\s+/g, '');
  return compact === '' ? '' : compact[0]!.toUpperCase() + compact.slice(1).toLowerCase();
}

function genderOf(code: string): string {
  const upper = code.toUpperCase();
  return upper === 'F' || upper === 'M' || upper === 'O' ? upper : 'U';
}

function addressTypeOf(code: string): string {
  const upper = code.toUpperCase();
  if (upper === 'H') return 'HOME';
  if (upper === 'M' || upper === 'C') return 'CORR';
  return '';
}

function readAddresses(reader: MessageReader, map: Hl7FieldMap): AddressRecord[] {
  const ref = parseFieldRef(map.address.field);
  if (ref === undefined) return [];
  const addresses: AddressRecord[] = [];
  for (const components of reader.repetitions(ref.segment, ref.field)) {
    const part = (index: number) => (index === 0 ? '' : reader.text(components[index - 1] ?? ''));
    const record = {
      line1: part(map.address.line1),
      line2: part(map.address.line2),
      city: part(map.address.city),
      county: part(map.address.county),
      postcode: part(map.address.postcode),
    };
    if (Object.values(record).every((v) => v === '')) continue;
    addresses.push({
      ...record,
      country: part(map.address.country) || map.defaultCountry,
      type: addressTypeOf(part(map.address.type)),
    });
  }
  return addresses;
}

function readPatientRecord(reader: MessageReader, map: Hl7FieldMap, hospitalNumber: string): PatientRecord {
  const nhsNumber =
    map.nhsAuthorities.map((a) => numbersUnder(reader, map, 'PID', 3, a)[0]).find((n) => n !== undefined) ??
    '';
  const firstName = map.firstName
    .map((ref) => reader.value(ref))
    .filter((v) => v !== '')
    .join(' ');
  const dateOfDeath = readHl7Date(reader.value(map.dateOfDeath), map.dateOfDeath);
  const isDeceased = reader.value(map.deceasedFlag).toUpperCase() === 'Y' || dateOfDeath !== undefined;
  const dateOfBirth = readHl7Date(reader.value(map.dateOfBirth), map.dateOfBirth);
  const record: PatientRecord = {
    // The NHS number is always sent, empty when PID-3 has none (a full record blanks it).
    nhsNumber,
    hospitalNumber,
    title: titleCase(reader.value(map.title)),
    firstName,
    surname: reader.value(map.surname),
    gender: genderOf(reader.value(map.gender)),
    addresses: readAddresses(reader, map),
    telephoneNumber: reader.value(map.telephone),
    mobilePhoneNumber: reader.value(map.mobile),
    isDeceased,
    practiceCode: reader.value(map.practiceCode),
    gpCode: reader.value(map.gpCode).slice(0, 8),
    ...(dateOfBirth === undefined ? {} : { dateOfBirth }),
    ...(dateOfDeath === undefined ? {} : { dateOfDeath }),
  };
  return record;
}

/** The change an ADT message of `event` asks for. */
export function mapAdtMessage(message: Hl7Message, event: string, map: Hl7FieldMap): AdtChange {
  const reader = new MessageReader(message);
  if (reader.segment('PID') === undefined)
    throw new AdtMappingError('the message has no PID segment', ERROR_CODE.segmentSequence);
  const { entry, number } = localNumber(reader, map);
  if (MERGE_EVENTS.has(event)) {
    if (reader.segment('MRG') === undefined)
      throw new AdtMappingError(`an ${event} needs an MRG segment`, ERROR_CODE.segmentSequence);
    const [secondary] = numbersUnder(reader, map, 'MRG', 1, entry.authority);
    if (secondary === undefined)
      throw new AdtMappingError(
        `MRG-1 holds no number under the local authority ${entry.authority}`,
        ERROR_CODE.unknownKey,
      );
    return {
      kind: 'merge',
      change: { identifierTypeKey: entry.identifierType, primaryNumber: number, secondaryNumber: secondary },
    };
  }
  return {
    kind: 'patient',
    change: {
      externalId: number,
      identifierTypeKey: entry.identifierType,
      record: readPatientRecord(reader, map, number),
      isPartial: false,
      isUpdateOnly: false,
      isCreateOnly: false,
    },
  };
}
