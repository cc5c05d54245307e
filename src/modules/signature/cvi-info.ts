/**
 * The CVI status text of an event after a patient signature (a simplification of OpenEyes's
 * `OphCoCvi_Manager::updateEventInfo`): the CVI elements are not modelled here, so the stored
 * `Incomplete/Missing:` list loses `Consent signature`, and becomes `Complete` when nothing else is missing.
 * The optional ` - <blindness category>` suffix is kept. Any other text (`Issued`, `Complete`, custom) is
 * left alone.
 */

const LABELS = ['Clinical', 'Clerical', 'Demographics', 'Consent signature', 'Consultant signature'];
const CONSENT = 'Consent signature';
const MISSING_LIST = /^Incomplete\/Missing: (.*?)( - .+)?$/s;
const NONE_SET = /^Incomplete( - .+)?$/s;

/** The new `event.info` after a patient signature, or undefined when it does not change. */
export function cviInfoAfterPatientSignature(info: string | null): string | undefined {
  if (info === null) return undefined;
  let missing: string[];
  let suffix: string;
  const list = MISSING_LIST.exec(info);
  const none = list === null ? NONE_SET.exec(info) : null;
  if (list !== null) {
    missing = list[1]!.split(', ');
    suffix = list[2] ?? '';
  } else if (none !== null) {
    // `Incomplete` means no flag was set: everything is missing.
    missing = [...LABELS];
    suffix = none[1] ?? '';
  } else {
    return undefined;
  }
  if (!missing.includes(CONSENT)) return undefined;
  const remaining = missing.filter((label) => label !== CONSENT);
  const text = remaining.length === 0 ? 'Complete' : `Incomplete/Missing: ${remaining.join(', ')}`;
  return `${text}${suffix}`;
}
