/**
 * The V1 `PatientAppointment` body (`schemas/V1/PatientAppointment.json`, `PatientId.json`,
 * `Appointment.json`, `AppointmentMapping.json`) read into an {@link AppointmentRecord}: each element
 * absent (undefined) or present. Dates strict `YYYY-MM-DD`, times strict `HH:MM` 00:00-23:59 (OpenEyes
 * accepts `25:99` and fails later, P07); unknown, duplicated or misplaced elements and a repeated mapping
 * key (P18) are refused with 400, every problem listed.
 */
import type { AppointmentMapping, AppointmentPatientId, AppointmentRecord } from './patient-appointment.ts';
import { PasapiError, parseLooseDate } from './pasapi-values.ts';
import type { XmlElement } from './pasapi-xml.ts';
import { readRootFlags } from './patient-resource.ts';
import type { RootFlags } from './patient-resource.ts';

const PATIENT_ID_FIELDS = {
  Id: 'id',
  PasId: 'pasId',
  NHSNumber: 'nhsNumber',
  HospitalNumber: 'hospitalNumber',
} as const satisfies Record<string, keyof AppointmentPatientId>;

/** `HH:MM` of a real time of day, else undefined. */
export function parseTimeOfDay(text: string): string | undefined {
  const match = /^(\d\d):(\d\d)$/.exec(text);
  if (match === null) return undefined;
  return Number(match[1]) <= 23 && Number(match[2]) <= 59 ? text : undefined;
}

/** The children of `element` by name, each name once; duplicates and stray text are reported. */
function childrenByName(element: XmlElement, errors: string[], prefix: string): Map<string, XmlElement> {
  if (element.text.trim() !== '') errors.push(`${prefix}${element.name} must hold elements only`);
  const byName = new Map<string, XmlElement>();
  for (const child of element.children) {
    if (byName.has(child.name)) errors.push(`${prefix}Duplicate tag ${child.name}`);
    else byName.set(child.name, child);
  }
  return byName;
}

function textOf(element: XmlElement, errors: string[], prefix: string): string {
  if (element.children.length > 0) errors.push(`${prefix}${element.name} must hold text only`);
  return element.text;
}

/** The appointment record of a `<PatientAppointment>` root, or a 400 with every problem. */
export function readAppointmentResource(root: XmlElement): { record: AppointmentRecord; flags: RootFlags } {
  if (root.name !== 'PatientAppointment')
    throw new PasapiError(400, [`Mismatched root tag ${root.name} for resource type PatientAppointment`]);
  const errors: string[] = [];
  const flags = readRootFlags(root, errors);
  const record: {
    patientId?: AppointmentPatientId;
    appointmentDate?: string;
    appointmentTime?: string;
    mappings?: AppointmentMapping[];
  } = {};
  for (const [name, element] of childrenByName(root, errors, '')) {
    if (name === 'PatientId') {
      record.patientId = readPatientId(element, errors);
    } else if (name === 'Appointment') {
      readAppointment(element, errors, record);
    } else {
      errors.push(`Unrecognised tag ${name}`);
    }
  }
  if (errors.length > 0) throw new PasapiError(400, errors);
  return { record, flags };
}

function readPatientId(element: XmlElement, errors: string[]): AppointmentPatientId {
  const prefix = 'PatientId error: ';
  const patientId: Record<string, string> = {};
  for (const [name, child] of childrenByName(element, errors, prefix)) {
    if (!Object.hasOwn(PATIENT_ID_FIELDS, name)) errors.push(`${prefix}Unrecognised tag ${name}`);
    else
      patientId[PATIENT_ID_FIELDS[name as keyof typeof PATIENT_ID_FIELDS]] = textOf(
        child,
        errors,
        prefix,
      ).trim();
  }
  if (Object.keys(patientId).length === 0)
    errors.push(`${prefix}At least one of Id, PasId, NHSNumber, HospitalNumber is required`);
  return patientId;
}

function readAppointment(
  element: XmlElement,
  errors: string[],
  record: { appointmentDate?: string; appointmentTime?: string; mappings?: AppointmentMapping[] },
): void {
  const prefix = 'Appointment error: ';
  for (const [name, child] of childrenByName(element, errors, prefix)) {
    if (name === 'AppointmentDate') {
      const text = textOf(child, errors, prefix);
      // An empty date or time is an absent one, as OpenEyes reads it.
      if (text === '') continue;
      const date = parseLooseDate(text.slice(0, 10));
      if (date === undefined || (text.length > 10 && !/^[ T]/.test(text.slice(10))))
        errors.push(`${prefix}invalid date format for AppointmentDate`);
      else record.appointmentDate = date;
    } else if (name === 'AppointmentTime') {
      const text = textOf(child, errors, prefix);
      if (text === '') continue;
      const time = parseTimeOfDay(text);
      if (time === undefined) errors.push(`${prefix}invalid time format for AppointmentTime`);
      else record.appointmentTime = time;
    } else if (name === 'AppointmentMappingItems') {
      record.mappings = readMappings(child, errors, prefix);
    } else {
      errors.push(`${prefix}Unrecognised tag ${name}`);
    }
  }
}

function readMappings(list: XmlElement, errors: string[], outer: string): AppointmentMapping[] {
  if (list.text.trim() !== '')
    errors.push(`${outer}AppointmentMappingItems must hold AppointmentMapping elements only`);
  const mappings: AppointmentMapping[] = [];
  const keys = new Set<string>();
  list.children.forEach((item, index) => {
    const prefix = `${outer}AppointmentMappingItems:${index + 1} error: `;
    if (item.name !== 'AppointmentMapping') {
      errors.push(`${prefix}Unrecognised tag ${item.name}`);
      return;
    }
    const values: Record<string, string> = {};
    for (const [name, child] of childrenByName(item, errors, prefix)) {
      if (name !== 'Key' && name !== 'Value') errors.push(`${prefix}Unrecognised tag ${name}`);
      else values[name] = textOf(child, errors, prefix);
    }
    for (const tag of ['Key', 'Value']) if (!(tag in values)) errors.push(`${prefix}${tag} is required`);
    if (values.Key === undefined || values.Value === undefined) return;
    const key = values.Key.trim();
    if (key === '') errors.push(`${prefix}Key is required`);
    else if (keys.has(key)) errors.push(`${prefix}Duplicate key ${key} is not allowed.`);
    else {
      keys.add(key);
      mappings.push({ key, value: values.Value });
    }
  });
  return mappings;
}
