/**
 * A site's device profiles (`DEVICE_PROFILES_FILE`): a JSON file `{"profiles": [ ... ]}` whose entries have
 * the shape of device filing's built-in ones (`src/modules/device-filing/profiles.ts`). The shape is
 * declared here, below the modules, because the configuration reads the file. Read and checked once at start by the configuration, so
 * that a bad file stops the service with every problem listed, never a request in the queue.
 */
import { readFileSync } from 'node:fs';
import type { Static } from '@sinclair/typebox';
import { Type } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';

export type DeviceExtraction = 'image' | 'pdf';
export type DeviceReader = 'none' | 'hfa' | 'biometry';
export type DeviceFiler = 'generic' | 'hfa' | 'biometry';
export type EyeLetter = 'L' | 'R' | 'B';

export interface DeviceProfileMatch {
  readonly manufacturer?: string;
  readonly modality?: string;
  readonly model?: string;
  readonly sopClassUid?: string;
  readonly softwareVersion?: string;
  readonly seriesDescriptionContains?: string;
}

export interface DeviceProfile {
  readonly name: string;
  readonly match: DeviceProfileMatch;
  /** The `event_subtype` of the event; null (or a subtype the database lacks) gives the fallback subtype. */
  readonly subtype: string | null;
  /** The `attachment_type` of the filed attachments. */
  readonly attachmentType: string;
  /** What the device sends; the file's content decides what is extracted. */
  readonly extraction: DeviceExtraction;
  readonly reader: DeviceReader;
  readonly filer: DeviceFiler;
  /** The eye when the file names none (Image Laterality, Laterality). */
  readonly laterality?: EyeLetter;
}

const Text = (maxLength: number) => Type.String({ minLength: 1, maxLength });

const MatchSchema = Type.Object(
  {
    manufacturer: Type.Optional(Text(64)),
    modality: Type.Optional(Text(16)),
    model: Type.Optional(Text(64)),
    sopClassUid: Type.Optional(Type.String({ pattern: '^[0-9]+(\\.[0-9]+)*$', maxLength: 64 })),
    softwareVersion: Type.Optional(Text(64)),
    seriesDescriptionContains: Type.Optional(Text(64)),
  },
  { additionalProperties: false },
);

const ProfileSchema = Type.Object(
  {
    name: Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$', maxLength: 64 }),
    match: MatchSchema,
    subtype: Type.Union([Text(100), Type.Null()]),
    attachmentType: Text(45),
    extraction: Type.Union([Type.Literal('image'), Type.Literal('pdf')]),
    reader: Type.Union([Type.Literal('none'), Type.Literal('hfa'), Type.Literal('biometry')]),
    filer: Type.Union([Type.Literal('generic'), Type.Literal('hfa'), Type.Literal('biometry')]),
    laterality: Type.Optional(Type.Union([Type.Literal('L'), Type.Literal('R'), Type.Literal('B')])),
  },
  { additionalProperties: false },
);

const FileSchema = Type.Object({ profiles: Type.Array(ProfileSchema) }, { additionalProperties: false });

/** The profiles of a site's file, with the problems found (none when the file is good). */
export interface ProfileFileOutcome {
  readonly profiles: readonly DeviceProfile[];
  readonly problems: readonly string[];
}

/** Checks the parsed JSON of a profiles file; `label` names the file in the problems. */
export function parseDeviceProfiles(json: unknown, label: string): ProfileFileOutcome {
  const problems: string[] = [];
  if (!Value.Check(FileSchema, json)) {
    for (const error of Value.Errors(FileSchema, json)) {
      problems.push(`${label}: ${error.path === '' ? '/' : error.path} ${error.message}`);
      if (problems.length >= 20) break;
    }
    return { profiles: [], problems };
  }
  const file: Static<typeof FileSchema> = json;
  const names = new Set<string>();
  file.profiles.forEach((profile, index) => {
    const at = `${label}: /profiles/${index}`;
    if (names.has(profile.name)) problems.push(`${at} repeats the name "${profile.name}"`);
    names.add(profile.name);
    if (Object.keys(profile.match).length === 0) {
      problems.push(`${at} matches every file: give at least one criterion in "match"`);
    }
    if ((profile.filer === 'hfa') !== (profile.reader === 'hfa')) {
      problems.push(`${at}: the hfa filer and the hfa reader go together`);
    }
    if ((profile.filer === 'biometry') !== (profile.reader === 'biometry')) {
      problems.push(`${at}: the biometry filer and the biometry reader go together`);
    }
  });
  return { profiles: problems.length === 0 ? file.profiles : [], problems };
}

/** Reads and checks the profiles file at `path`. */
export function readDeviceProfilesFile(path: string): ProfileFileOutcome {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'error';
    return { profiles: [], problems: [`DEVICE_PROFILES_FILE cannot be read: ${code} ${path}`] };
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    return {
      profiles: [],
      problems: [`DEVICE_PROFILES_FILE is not JSON (${path}): ${(error as Error).message}`],
    };
  }
  return parseDeviceProfiles(json, `DEVICE_PROFILES_FILE ${path}`);
}
