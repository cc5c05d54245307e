/**
 * The V1 `Patient` body (`components/schemas/V1/Patient.json`, `Address.json`) read into a
 * {@link PatientRecord}: each element absent (undefined) or present with its text (an empty element is
 * present, with ""), dates as `YYYY-MM-DD`. Unknown elements, malformed dates and flags, duplicated
 * elements and elements nested where text belongs are refused with 400, every problem listed.
 */
import type { AddressRecord, PatientRecord } from './patient-change.ts';
import { PasapiError, parseLooseBoolean, parseLooseDate } from './pasapi-values.ts';
import type { XmlElement } from './pasapi-xml.ts';

const TEXT_FIELDS = {
  NHSNumber: 'nhsNumber',
  NHSNumberStatus: 'nhsNumberStatus',
  HospitalNumber: 'hospitalNumber',
  Title: 'title',
  FirstName: 'firstName',
  Surname: 'surname',
  PrimaryInstitution: 'primaryInstitution',
  Gender: 'gender',
  TelephoneNumber: 'telephoneNumber',
  MobilePhoneNumber: 'mobilePhoneNumber',
  Email: 'email',
  EthnicGroup: 'ethnicGroup',
  PracticeCode: 'practiceCode',
  GpCode: 'gpCode',
  LanguageCode: 'languageCode',
  InterpreterRequired: 'interpreterRequired',
  Risks: 'risks',
} as const satisfies Record<string, keyof PatientRecord>;

const DATE_FIELDS = { DateOfBirth: 'dateOfBirth', DateOfDeath: 'dateOfDeath' } as const;

const ADDRESS_FIELDS = {
  Line1: 'line1',
  Line2: 'line2',
  City: 'city',
  County: 'county',
  Postcode: 'postcode',
  Country: 'country',
  Type: 'type',
} as const satisfies Record<string, keyof AddressRecord>;

/** The flags of the root element (deprecated `updateOnly`, undocumented `createOnly`). */
export interface RootFlags {
  readonly isUpdateOnly: boolean;
  readonly isCreateOnly: boolean;
}

/** Reads a root attribute flag: `1`/`true`/... on, `0`/`false`/... off (OpenEyes: any `updateOnly` is on, P06). */
export function readRootFlags(root: XmlElement, errors: string[]): RootFlags {
  const flag = (name: string): boolean => {
    const value = root.attributes[name];
    if (value === undefined) return false;
    const parsed = parseLooseBoolean(value);
    if (parsed === undefined) errors.push(`Invalid value '${value}' for attribute '${name}'`);
    return parsed === true;
  };
  return { isUpdateOnly: flag('updateOnly'), isCreateOnly: flag('createOnly') };
}

function textOf(element: XmlElement, errors: string[], prefix: string): string {
  if (element.children.length > 0) errors.push(`${prefix}${element.name} must hold text only`);
  return element.text;
}

/** The patient record of a `<Patient>` root, or a 400 with every problem. */
export function readPatientResource(root: XmlElement): { record: PatientRecord; flags: RootFlags } {
  const errors: string[] = [];
  if (root.name !== 'Patient')
    throw new PasapiError(400, [`Mismatched root tag ${root.name} for resource type Patient`]);
  const flags = readRootFlags(root, errors);
  const record: Record<string, unknown> = {};
  const seen = new Set<string>();
  for (const element of root.children) {
    if (seen.has(element.name)) {
      errors.push(`Duplicate tag ${element.name}`);
      continue;
    }
    seen.add(element.name);
    if (Object.hasOwn(TEXT_FIELDS, element.name)) {
      record[TEXT_FIELDS[element.name as keyof typeof TEXT_FIELDS]] = textOf(element, errors, '');
    } else if (Object.hasOwn(DATE_FIELDS, element.name)) {
      const text = textOf(element, errors, '');
      // An empty date is an absent one, as OpenEyes reads it.
      if (text === '') continue;
      const date = parseLooseDate(text);
      if (date === undefined) errors.push(`invalid date format for ${element.name}`);
      else record[DATE_FIELDS[element.name as keyof typeof DATE_FIELDS]] = date;
    } else if (element.name === 'IsDeceased') {
      const parsed = parseLooseBoolean(textOf(element, errors, ''));
      if (parsed === undefined) errors.push(`invalid boolean value for IsDeceased`);
      else record.isDeceased = parsed;
    } else if (element.name === 'AddressList') {
      record.addresses = readAddressList(element, errors);
    } else {
      errors.push(`Unrecognised tag ${element.name}`);
    }
  }
  if (errors.length > 0) throw new PasapiError(400, errors);
  return { record: record, flags };
}

function readAddressList(list: XmlElement, errors: string[]): AddressRecord[] {
  if (list.text.trim() !== '') errors.push('AddressList must hold Address elements only');
  return list.children.map((address, index) => {
    const prefix = `AddressList:${index + 1} error: `;
    if (address.name !== 'Address') {
      errors.push(`${prefix}Unrecognised tag ${address.name}`);
      return {};
    }
    const record: Record<string, string> = {};
    for (const element of address.children) {
      if (!Object.hasOwn(ADDRESS_FIELDS, element.name)) {
        errors.push(`${prefix}Unrecognised tag ${element.name}`);
      } else {
        const key = ADDRESS_FIELDS[element.name as keyof typeof ADDRESS_FIELDS];
        if (key in record) errors.push(`${prefix}Duplicate tag ${element.name}`);
        record[key] = textOf(element, errors, prefix);
      }
    }
    return record;
  });
}
