/**
 * The Store Instances Response Module of STOW-RS (PS3.18 Annex I) in the DICOM JSON model (PS3.18 F.2)
 * and in the Native DICOM Model XML (PS3.19 A.1), and the HTTP status of the answer (PS3.18 10.5.3.1).
 * Written out here because the answer has four attributes and both encodings must be exact: dcmjs's JSON
 * writer gives US values as strings and empty values as `[""]`, which F.2 does not allow.
 */
import type { FailureReason } from './instance.ts';

/** An instance stored and queued. */
export interface StoredInstance {
  readonly sopClassUid: string;
  readonly sopInstanceUid: string;
  readonly requestId: number;
}

/** An instance not stored; UIDs are undefined when they could not be read. */
export interface FailedInstance {
  readonly sopClassUid: string | undefined;
  readonly sopInstanceUid: string | undefined;
  readonly reason: FailureReason;
  /** A lack of resources that passes (the database unavailable): sent again later, it may succeed. */
  readonly isTransient: boolean;
}

export interface StoreOutcome {
  readonly stored: readonly StoredInstance[];
  readonly failed: readonly FailedInstance[];
}

type Attribute = {
  readonly tag: string;
  readonly keyword: string;
} & (
  | { readonly vr: 'UI' | 'UR'; readonly value?: string }
  | { readonly vr: 'US'; readonly value: number }
  | { readonly vr: 'SQ'; readonly value: readonly Item[] }
);

type Item = readonly Attribute[];

const uid = (tag: string, keyword: string, value: string | undefined): Attribute =>
  value === undefined ? { tag, keyword, vr: 'UI' } : { tag, keyword, vr: 'UI', value };

/** The SOP Instance Reference Macro (PS3.3 10-11) of an instance. */
const reference = (instance: { sopClassUid: string | undefined; sopInstanceUid: string | undefined }) => [
  uid('00081150', 'ReferencedSOPClassUID', instance.sopClassUid),
  uid('00081155', 'ReferencedSOPInstanceUID', instance.sopInstanceUid),
];

/** The response data set, attributes in tag order. RetrieveURL is empty: the service offers no WADO-RS. */
function responseAttributes(outcome: StoreOutcome): Attribute[] {
  const attributes: Attribute[] = [{ tag: '00081190', keyword: 'RetrieveURL', vr: 'UR' }];
  const failed: Item[] = outcome.failed.map((f) => [
    ...reference(f),
    { tag: '00081197', keyword: 'FailureReason', vr: 'US', value: f.reason },
  ]);
  const stored: Item[] = outcome.stored.map((s) => [
    ...reference(s),
    { tag: '00081190', keyword: 'RetrieveURL', vr: 'UR' },
  ]);
  if (failed.length > 0)
    attributes.push({ tag: '00081198', keyword: 'FailedSOPSequence', vr: 'SQ', value: failed });
  if (stored.length > 0)
    attributes.push({ tag: '00081199', keyword: 'ReferencedSOPSequence', vr: 'SQ', value: stored });
  return attributes;
}

/**
 * 200 when every instance was stored; 202 when some were; 409 when none was (a conflict per instance,
 * reasons in the body); 503 when none was and every failure is a temporary lack of resources (the
 * database), so that the sender retries. An A700 that would fail again (an instance over a size or
 * element limit) is a 409 with its reason, so that senders stop retrying it.
 */
export function storeStatus(outcome: StoreOutcome): 200 | 202 | 409 | 503 {
  if (outcome.failed.length === 0) return 200;
  if (outcome.stored.length > 0) return 202;
  return outcome.failed.every((f) => f.isTransient) ? 503 : 409;
}

export function toDicomJson(outcome: StoreOutcome): string {
  return JSON.stringify(jsonOf(responseAttributes(outcome)));
}

function jsonOf(attributes: readonly Attribute[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const a of attributes) {
    if (a.vr === 'SQ') out[a.tag] = { vr: a.vr, Value: a.value.map(jsonOf) };
    else if (a.value === undefined) out[a.tag] = { vr: a.vr };
    else out[a.tag] = { vr: a.vr, Value: [a.value] };
  }
  return out;
}

export function toDicomXml(outcome: StoreOutcome): string {
  const lines = [
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<NativeDicomModel xmlns="http://dicom.nema.org/PS3.19/models/NativeDICOM">',
  ];
  xmlOf(responseAttributes(outcome), lines, '  ');
  lines.push('</NativeDicomModel>');
  return lines.join('\n');
}

function xmlOf(attributes: readonly Attribute[], lines: string[], indent: string): void {
  for (const a of attributes) {
    const open = `${indent}<DicomAttribute tag="${a.tag}" vr="${a.vr}" keyword="${a.keyword}"`;
    if (a.vr === 'SQ') {
      lines.push(`${open}>`);
      a.value.forEach((item, index) => {
        lines.push(`${indent}  <Item number="${index + 1}">`);
        xmlOf(item, lines, `${indent}    `);
        lines.push(`${indent}  </Item>`);
      });
      lines.push(`${indent}</DicomAttribute>`);
    } else if (a.value === undefined) {
      lines.push(`${open}/>`);
    } else {
      lines.push(`${open}><Value number="1">${escapeXml(String(a.value))}</Value></DicomAttribute>`);
    }
  }
}

function escapeXml(text: string): string {
  return text.replace(/[<>&"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
