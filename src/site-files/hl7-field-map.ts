/**
 * The HL7 field map: where a site's ADT messages carry what PASAPI's `Patient` takes, and where its SIU
 * messages carry what `PatientAppointment` takes (pas-and-worklists.md 3.2: SCH, AIL, AIP, with PV1 as
 * the fallback some PAS products fill instead). One map per site,
 * read from `HL7_FIELD_MAP_FILE` (a JSON object whose keys replace those of the default), so that a
 * site's Mirth transformer becomes settings, not code. The default is the estate's common core
 * (pas-and-worklists.md 3.3): the local number is the PID-3 repetition whose assigning authority is `PAS`
 * (in component 5, or 4 at some sites), the NHS number the one whose authority is `NHS`, the local
 * identifier type `LOCAL-1-0` (the type the Mirth channels bake into the PASAPI URL).
 *
 * A field reference is `SEG-field.component` (`PID-5.1`), or `SEG-field` for the whole first component.
 */
import { readFileSync } from 'node:fs';

/** One local identifier: PID-3 repetitions under `authority` are numbers of `identifierType`. */
export interface LocalIdentifierMap {
  readonly authority: string;
  /** `patient_identifier_type.unique_row_string`, as in a PASAPI URL. */
  readonly identifierType: string;
}

/**
 * One `AppointmentMapping` an SIU booking sends: `key` (a worklist definition's mapping key, the site's
 * own) with the first non-empty of `fields`, else `default`; left out when both are empty.
 */
export interface AppointmentMappingMap {
  readonly key: string;
  readonly fields: readonly string[];
  readonly default?: string;
}

export interface Hl7FieldMap {
  /** Components of a PID-3 (and MRG-1) repetition compared with the authorities, in order. */
  readonly authorityComponents: readonly number[];
  /** Local numbers, first match wins. */
  readonly localIdentifiers: readonly LocalIdentifierMap[];
  /** Authorities of the NHS number (the GLOBAL type). */
  readonly nhsAuthorities: readonly string[];
  readonly surname: string;
  /** Joined with a space, empty parts left out. */
  readonly firstName: readonly string[];
  readonly title: string;
  readonly dateOfBirth: string;
  readonly gender: string;
  /** PID-11 components, per repetition. */
  readonly address: {
    readonly field: string;
    readonly line1: number;
    readonly line2: number;
    readonly city: number;
    readonly county: number;
    readonly postcode: number;
    readonly country: number;
    readonly type: number;
  };
  /** `country.code` of an address that names none. */
  readonly defaultCountry: string;
  readonly telephone: string;
  readonly mobile: string;
  readonly dateOfDeath: string;
  readonly deceasedFlag: string;
  readonly practiceCode: string;
  readonly gpCode: string;
  /** SIU: the appointment's external id (PASAPI's visit id), the first non-empty field. */
  readonly appointmentId: readonly string[];
  /** SIU: the appointment's start, an HL7 date-time to the minute at least; the first non-empty field. */
  readonly appointmentStart: readonly string[];
  /** SIU: the `AppointmentMapping` pairs a booking sends. */
  readonly appointmentMappings: readonly AppointmentMappingMap[];
}

export const DEFAULT_FIELD_MAP: Hl7FieldMap = {
  authorityComponents: [5, 4],
  localIdentifiers: [{ authority: 'PAS', identifierType: 'LOCAL-1-0' }],
  nhsAuthorities: ['NHS'],
  surname: 'PID-5.1',
  firstName: ['PID-5.2', 'PID-5.3'],
  title: 'PID-5.5',
  dateOfBirth: 'PID-7.1',
  gender: 'PID-8.1',
  address: {
    field: 'PID-11',
    line1: 1,
    line2: 2,
    city: 3,
    county: 4,
    postcode: 5,
    country: 6,
    type: 7,
  },
  defaultCountry: 'GB',
  telephone: 'PID-13.1',
  mobile: 'PID-14.1',
  dateOfDeath: 'PID-29.1',
  deceasedFlag: 'PID-30.1',
  practiceCode: 'PD1-3.3',
  gpCode: 'PD1-4.1',
  // The PAS is the filler of its appointments (SCH-2); SCH-1 and PV1-19 for feeds that fill those.
  appointmentId: ['SCH-2.1', 'SCH-1.1', 'PV1-19.1'],
  // SCH-11.4 (timing quantity start) up to v2.4, TQ1-7 from v2.5, else the resources' own starts.
  appointmentStart: ['SCH-11.4', 'TQ1-7.1', 'AIS-4.1', 'AIL-6.1', 'AIP-6.1'],
  // The keys the Mirth channels send (pas-and-worklists.md 2.3, 3.3), from SIU's resource segments.
  appointmentMappings: [
    { key: 'Clinic', fields: ['AIL-3.1', 'PV1-3.1'] },
    { key: 'Session', fields: ['AIL-3.2', 'PV1-3.2', 'AIL-3.1', 'PV1-3.1'] },
    { key: 'Doctor', fields: ['AIP-3.2', 'AIP-3.1', 'PV1-9.2', 'PV1-9.1'], default: 'Unknown' },
    { key: 'Status', fields: [], default: 'Scheduled' },
  ],
};

/** A parsed field reference. */
export interface FieldRef {
  readonly segment: string;
  readonly field: number;
  readonly component: number;
}

const REF = /^([A-Z][A-Z0-9]{2})-(\d{1,3})(?:\.(\d{1,2}))?$/;

/** `PID-5.1` as a {@link FieldRef}; undefined when it is not one. */
export function parseFieldRef(text: string): FieldRef | undefined {
  const match = REF.exec(text.trim());
  if (match === null) return undefined;
  const field = Number(match[2]);
  const component = match[3] === undefined ? 1 : Number(match[3]);
  if (field < 1 || component < 1) return undefined;
  return { segment: match[1]!, field, component };
}

const REF_KEYS = [
  'surname',
  'title',
  'dateOfBirth',
  'gender',
  'telephone',
  'mobile',
  'dateOfDeath',
  'deceasedFlag',
  'practiceCode',
  'gpCode',
] as const;

/** Checks a map (the default with a file's keys over it); every problem listed. */
export function checkFieldMap(map: Hl7FieldMap, problems: string[], source: string): void {
  const bad = (what: string) => problems.push(`${source}: ${what}`);
  for (const key of REF_KEYS)
    if (typeof map[key] !== 'string' || parseFieldRef(map[key]) === undefined)
      bad(`"${key}" must be a field reference such as PID-5.1`);
  if (!Array.isArray(map.firstName) || map.firstName.some((r) => parseFieldRef(String(r)) === undefined))
    bad('"firstName" must be a list of field references');
  if (
    !Array.isArray(map.authorityComponents) ||
    map.authorityComponents.length === 0 ||
    map.authorityComponents.some((c) => !Number.isInteger(c) || c < 1 || c > 10)
  )
    bad('"authorityComponents" must be a list of component numbers (1 to 10)');
  const isText = (value: unknown) => typeof value === 'string' && value.trim() !== '';
  const locals: unknown = map.localIdentifiers;
  if (
    !Array.isArray(locals) ||
    locals.length === 0 ||
    locals.some((entry: unknown) => {
      const l = entry as Partial<Record<keyof LocalIdentifierMap, unknown>> | null;
      return typeof l !== 'object' || l === null || !isText(l.authority) || !isText(l.identifierType);
    })
  )
    bad('"localIdentifiers" must be a list of { "authority", "identifierType" }');
  if (!Array.isArray(map.nhsAuthorities) || map.nhsAuthorities.some((a) => typeof a !== 'string'))
    bad('"nhsAuthorities" must be a list of authority codes');
  const address = map.address as Partial<Hl7FieldMap['address']> | undefined;
  if (typeof address !== 'object' || address === null || parseFieldRef(String(address.field)) === undefined)
    bad('"address.field" must be a field reference such as PID-11');
  else
    for (const key of ['line1', 'line2', 'city', 'county', 'postcode', 'country', 'type'] as const)
      if (!Number.isInteger(address[key]) || (address[key] ?? 0) < 0 || (address[key] ?? 0) > 20)
        bad(`"address.${key}" must be a component number (0 = none)`);
  if (typeof map.defaultCountry !== 'string') bad('"defaultCountry" must be a country code');
  const isRefList = (value: unknown) =>
    Array.isArray(value) && value.every((r) => typeof r === 'string' && parseFieldRef(r) !== undefined);
  for (const key of ['appointmentId', 'appointmentStart'] as const)
    if (!isRefList(map[key]) || map[key].length === 0)
      bad(`"${key}" must be a list of field references such as SCH-2.1`);
  const mappings: unknown = map.appointmentMappings;
  const keys = new Set<string>();
  if (
    !Array.isArray(mappings) ||
    mappings.some((entry: unknown) => {
      const m = entry as Partial<Record<keyof AppointmentMappingMap, unknown>> | null;
      if (typeof m !== 'object' || m === null || !isText(m.key) || !isRefList(m.fields)) return true;
      if (m.default !== undefined && typeof m.default !== 'string') return true;
      if (keys.has(String(m.key))) return true;
      keys.add(String(m.key));
      return false;
    })
  )
    bad('"appointmentMappings" must be a list of { "key", "fields", "default"? }, each key once');
}

/** The map of a site's JSON file: the default with the file's keys over it, and its problems. */
export function readFieldMapFile(file: string): { map: Hl7FieldMap; problems: string[] } {
  const source = `HL7_FIELD_MAP_FILE (${file})`;
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    return {
      map: DEFAULT_FIELD_MAP,
      problems: [`${source}: cannot be read as JSON (${(error as Error).message})`],
    };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    return { map: DEFAULT_FIELD_MAP, problems: [`${source}: must hold a JSON object`] };
  const problems: string[] = [];
  for (const key of Object.keys(parsed))
    if (!Object.hasOwn(DEFAULT_FIELD_MAP, key)) problems.push(`${source}: unknown key "${key}"`);
  const given = parsed as Partial<Hl7FieldMap>;
  const map: Hl7FieldMap = {
    ...DEFAULT_FIELD_MAP,
    ...given,
    address: { ...DEFAULT_FIELD_MAP.address, ...(given.address ?? {}) },
  };
  checkFieldMap(map, problems, source);
  return { map, problems };
}
