/**
 * Device profiles: how a DICOM object from a given device is filed. A profile matches on Manufacturer
 * (0008,0070), Modality (0008,0060), Manufacturer's Model Name (0008,1090), SOP Class UID, and optionally
 * Software Versions (0018,1020) and words of the Series Description (0008,103E); it gives the event
 * subtype (`event_subtype_item`), the attachment type of the filed attachments, what the device sends
 * (image or PDF), which measurement reader runs and which filer files the object.
 *
 * The built-in table follows the manufacturer and modality routines of OpenEyes's Java payload processor,
 * with their gaps closed: every device that sends something gets an event (Optos and FORUM files too,
 * every profile names a subtype that exists in `event_subtype`), and an unknown device falls back to a
 * generic profile by modality, then by content (`Fundus Images` for images, `OCT Images` for PDFs, no
 * subtype and attachment type `NONE` for anything else), so it is always filed and never retried.
 *
 * Matching: Manufacturer and model match when the file's value starts with the profile's
 * (case-insensitive; `Kowa` matches `Kowa Company, Ltd.`), Modality and SOP class exactly (Modality
 * case-insensitive), software version exactly, series description when it contains the word. Of the
 * profiles whose every criterion matches, the most specific wins: a model or SOP class weighs more than
 * manufacturer and modality together (an IOLMaster 700 sending modality OPT is biometry, not OCT), which
 * weigh more than a software version or series description. Between equals, a site's profile wins over
 * a built-in one, then the earlier in its table. A site profile with the name of a built-in one
 * replaces it.
 */

// The profile's shape is the site file's too (`DEVICE_PROFILES_FILE`), read by the configuration.
import type {
  DeviceExtraction,
  DeviceFiler,
  DeviceProfile,
  DeviceProfileMatch,
  DeviceReader,
  EyeLetter,
} from '../../site-files/device-profiles.ts';

export type { DeviceExtraction, DeviceFiler, DeviceProfile, DeviceProfileMatch, DeviceReader, EyeLetter };

/** What a profile is chosen from: the file's header values and its content. */
export interface DeviceFacts {
  readonly manufacturer: string | null;
  readonly modality: string | null;
  readonly model: string | null;
  readonly sopClassUid: string | null;
  readonly softwareVersion: string | null;
  readonly seriesDescription: string | null;
  /** What the file holds: an encapsulated PDF, an image, or neither. */
  readonly content: 'pdf' | 'image' | 'none';
}

const ZEISS = 'Carl Zeiss Meditec';
/** Ophthalmic Visual Field Static Perimetry Measurements. */
export const VISUAL_FIELD_MEASUREMENTS_SOP_CLASS = '1.2.840.10008.5.1.4.1.1.80.1';
const AXIAL_MEASUREMENTS = '1.2.840.10008.5.1.4.1.1.78.7';
const IOL_CALCULATION = '1.2.840.10008.5.1.4.1.1.78.8';

type Outputs = Omit<DeviceProfile, 'name' | 'match'>;
const images = (subtype: string, attachmentType = subtype): Outputs => ({
  subtype,
  attachmentType,
  extraction: 'image',
  reader: 'none',
  filer: 'generic',
});
const pdf = (subtype: string, attachmentType = subtype): Outputs => ({
  subtype,
  attachmentType,
  extraction: 'pdf',
  reader: 'none',
  filer: 'generic',
});
const visualField = (extraction: DeviceExtraction): Outputs => ({
  subtype: 'Visual Field Images',
  attachmentType: 'Visual Field Images',
  extraction,
  reader: 'hfa',
  filer: 'hfa',
});
const biometry = (extraction: DeviceExtraction): Outputs => ({
  subtype: null,
  attachmentType: 'Biometry Report',
  extraction,
  reader: 'biometry',
  filer: 'biometry',
});

/** The profiles the service ships (see the module comment for how one is chosen). */
export const BUILT_IN_PROFILES: readonly DeviceProfile[] = [
  // Carl Zeiss Meditec: Humphrey fields, Cirrus OCT, IOLMaster biometry, photographs, documents.
  { name: 'zeiss-humphrey', match: { manufacturer: ZEISS, modality: 'OPV' }, ...visualField('pdf') },
  { name: 'zeiss-cirrus', match: { manufacturer: ZEISS, modality: 'OPT' }, ...pdf('OCT', 'NONE') },
  { name: 'zeiss-photograph', match: { manufacturer: ZEISS, modality: 'OP' }, ...images('Fundus Images') },
  {
    name: 'zeiss-angiography',
    match: { manufacturer: ZEISS, modality: 'AG' },
    ...images('OCTAngiography Report'),
  },
  { name: 'zeiss-document', match: { manufacturer: ZEISS, modality: 'DOC' }, ...pdf('OCT', 'NONE') },
  { name: 'zeiss-iolmaster-700', match: { model: 'IOLMaster 700' }, ...biometry('pdf') },
  { name: 'zeiss-iolmaster-500', match: { model: 'IOLMaster 500' }, ...biometry('image') },
  {
    // The v7.5 report of the IOLMaster 500 shows both eyes.
    name: 'zeiss-iolmaster-500-v7.5',
    match: { model: 'IOLMaster 500', softwareVersion: '7.5.2.0076' },
    ...biometry('image'),
    laterality: 'B',
  },
  { name: 'ophthalmic-axial-measurements', match: { sopClassUid: AXIAL_MEASUREMENTS }, ...biometry('pdf') },
  { name: 'iol-calculation', match: { sopClassUid: IOL_CALCULATION }, ...biometry('pdf') },
  {
    name: 'zeiss-forum-glaucoma',
    match: { manufacturer: 'FORUM Glaucoma Workplace', modality: 'OPV' },
    ...visualField('pdf'),
  },
  { name: 'zeiss-cirrus-hd-oct', match: { manufacturer: 'CIRRUS HD-OCT' }, ...pdf('OCT', 'NONE') },
  // Heidelberg Engineering (Spectralis, Anterion).
  {
    name: 'heidelberg-photograph',
    match: { manufacturer: 'Heidelberg Engineering', modality: 'OP' },
    ...pdf('OCT Images'),
  },
  {
    name: 'heidelberg-oct',
    match: { manufacturer: 'Heidelberg Engineering', modality: 'OPT' },
    ...pdf('OCT Images'),
  },
  // Topcon and its Triton OCT.
  { name: 'triton-oct', match: { manufacturer: 'Triton', modality: 'OPT' }, ...pdf('OCT', 'NONE') },
  { name: 'triton-capture', match: { manufacturer: 'Triton', modality: 'SC' }, ...images('Fundus Images') },
  { name: 'topcon-oct', match: { manufacturer: 'Topcon', modality: 'OPT' }, ...pdf('OCT', 'NONE') },
  {
    name: 'topcon-colour-photograph',
    match: { manufacturer: 'Topcon', modality: 'SC', seriesDescriptionContains: 'COLOR' },
    ...images('Clinical Photograph Colour'),
  },
  { name: 'topcon-capture', match: { manufacturer: 'Topcon', modality: 'SC' }, ...images('Fundus Images') },
  { name: 'topcon', match: { manufacturer: 'Topcon' }, ...images('Fundus Images') },
  // Other manufacturers of the Java processor.
  { name: 'kowa', match: { manufacturer: 'Kowa' }, ...images('Clinical Photograph Colour') },
  { name: 'optos', match: { manufacturer: 'OPTOS' }, ...images('Fundus Images') },
  {
    name: 'oculus-pentacam',
    match: { manufacturer: 'OCULUS Optikgeraete' },
    ...pdf('Topography Images'),
  },
  { name: 'orion', match: { manufacturer: 'Orion Imaging' }, ...images('Fundus Images') },
  { name: 'quantel-bscan', match: { manufacturer: 'Quantel Medical' }, ...images('B SCAN Images') },
  // Any manufacturer, by SOP class or modality.
  {
    name: 'visual-field-measurements',
    match: { sopClassUid: VISUAL_FIELD_MEASUREMENTS_SOP_CLASS },
    ...visualField('pdf'),
  },
  { name: 'generic-opv', match: { modality: 'OPV' }, ...visualField('pdf') },
  { name: 'generic-opt', match: { modality: 'OPT' }, ...pdf('OCT Images') },
  { name: 'generic-oam', match: { modality: 'OAM' }, ...pdf('OCT Images') },
  { name: 'generic-op', match: { modality: 'OP' }, ...images('Fundus Images') },
  { name: 'generic-xc', match: { modality: 'XC' }, ...images('Fundus Images') },
  { name: 'generic-ag', match: { modality: 'AG' }, ...images('OCTAngiography Report') },
  { name: 'generic-us', match: { modality: 'US' }, ...images('B SCAN Images') },
  { name: 'generic-raw', match: { modality: 'RAW' }, ...pdf('Topography Images') },
];

/** The fallback of a file no profile matches: by what the file holds. */
export function fallbackProfile(content: DeviceFacts['content']): DeviceProfile {
  if (content === 'pdf') return { name: 'generic-pdf', match: {}, ...pdf('OCT Images') };
  if (content === 'image') return { name: 'generic-image', match: {}, ...images('Fundus Images') };
  return {
    name: 'generic',
    match: {},
    subtype: null,
    attachmentType: 'NONE',
    extraction: 'pdf',
    reader: 'none',
    filer: 'generic',
  };
}

const fold = (text: string) => text.trim().toLowerCase();

function matches(match: DeviceProfileMatch, facts: DeviceFacts): boolean {
  const startsWith = (value: string | null, prefix: string | undefined) =>
    prefix === undefined || (value !== null && fold(value).startsWith(fold(prefix)));
  const equals = (value: string | null, expected: string | undefined, foldCase: boolean) =>
    expected === undefined ||
    (value !== null && (foldCase ? fold(value) === fold(expected) : value.trim() === expected.trim()));
  const words = match.seriesDescriptionContains;
  return (
    startsWith(facts.manufacturer, match.manufacturer) &&
    startsWith(facts.model, match.model) &&
    equals(facts.modality, match.modality, true) &&
    equals(facts.sopClassUid, match.sopClassUid, false) &&
    equals(facts.softwareVersion, match.softwareVersion, false) &&
    (words === undefined ||
      (facts.seriesDescription !== null && fold(facts.seriesDescription).includes(fold(words))))
  );
}

/** How much each criterion makes a profile specific (see the module comment). */
const WEIGHTS: Record<keyof DeviceProfileMatch, number> = {
  model: 8,
  sopClassUid: 8,
  manufacturer: 2,
  modality: 2,
  softwareVersion: 1,
  seriesDescriptionContains: 1,
};

const specificity = (match: DeviceProfileMatch) =>
  (Object.keys(WEIGHTS) as (keyof DeviceProfileMatch)[]).reduce(
    (sum, key) => sum + (match[key] === undefined ? 0 : WEIGHTS[key]),
    0,
  );

/** The built-in table with the site's profiles: a site profile replaces the built-in of its name. */
export function mergeProfiles(siteProfiles: readonly DeviceProfile[]): {
  readonly site: readonly DeviceProfile[];
  readonly builtIn: readonly DeviceProfile[];
} {
  const replaced = new Set(siteProfiles.map((p) => p.name));
  return { site: siteProfiles, builtIn: BUILT_IN_PROFILES.filter((p) => !replaced.has(p.name)) };
}

/** The profile of a file (see the module comment); the fallback when none matches. */
export function chooseProfile(facts: DeviceFacts, siteProfiles: readonly DeviceProfile[]): DeviceProfile {
  const { site, builtIn } = mergeProfiles(siteProfiles);
  let best: DeviceProfile | undefined;
  let bestScore = -1;
  // Site profiles come first, so that between equals the site's wins (a later one needs more criteria).
  for (const profile of [...site, ...builtIn]) {
    if (!matches(profile.match, facts)) continue;
    const score = specificity(profile.match);
    if (score > bestScore) {
      best = profile;
      bestScore = score;
    }
  }
  return best ?? fallbackProfile(facts.content);
}
