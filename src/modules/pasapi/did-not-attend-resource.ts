/**
 * The V1 `DidNotAttend` body (`schemas/V1/DidNotAttend.json`) read into a {@link DidNotAttendRecord}:
 * `HospitalNumber`, `IdentifierType`, `Date` (strict `YYYY-MM-DD`) and `Comments`; unknown, duplicated
 * or nested elements are refused with 400, every problem listed.
 */
import type { DidNotAttendRecord } from './did-not-attend.ts';
import { PasapiError, parseLooseDate } from './pasapi-values.ts';
import type { XmlElement } from './pasapi-xml.ts';

const FIELDS = {
  HospitalNumber: 'hospitalNumber',
  IdentifierType: 'identifierType',
  Date: 'date',
  Comments: 'comments',
} as const satisfies Record<string, keyof DidNotAttendRecord>;

/** The `IdentifierType` text of a `<DidNotAttend>` tree (for its remaps), if any. */
export function identifierTypeOf(root: XmlElement): string | undefined {
  return root.children.find((c) => c.name === 'IdentifierType')?.text.trim();
}

/** The record of a `<DidNotAttend>` root, or a 400 with every problem. */
export function readDidNotAttendResource(root: XmlElement): DidNotAttendRecord {
  if (root.name !== 'DidNotAttend')
    throw new PasapiError(400, [`Mismatched root tag ${root.name} for resource type DidNotAttend`]);
  const errors: string[] = [];
  const record: Record<string, string> = {};
  for (const element of root.children) {
    if (!Object.hasOwn(FIELDS, element.name)) {
      errors.push(`Unrecognised tag ${element.name}`);
      continue;
    }
    const key = FIELDS[element.name as keyof typeof FIELDS];
    if (key in record) errors.push(`Duplicate tag ${element.name}`);
    else if (element.children.length > 0) errors.push(`${element.name} must hold text only`);
    else if (key === 'date') {
      // An empty date is an absent one, as OpenEyes reads it.
      if (element.text === '') continue;
      const date = parseLooseDate(element.text.trim());
      if (date === undefined) errors.push('invalid date format for Date');
      else record.date = date;
    } else record[key] = element.text;
  }
  if (errors.length > 0) throw new PasapiError(400, errors);
  return record;
}
