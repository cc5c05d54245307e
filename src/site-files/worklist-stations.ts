/**
 * The worklist stations (`DICOM_WORKLIST_STATIONS_FILE`): a JSON file `{"stations": [ ... ]}` naming, per
 * calling AE title, what that device is (modality, station name) and which worklists it sees (worklist
 * definitions, a site). Read and checked once at start by the configuration, so that a bad file stops the
 * service with every problem listed. A caller without a station sees every worklist.
 */
import { readFileSync } from 'node:fs';
import type { Static } from '@sinclair/typebox';
import { Type } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';

/** The character sets the worklist answers in (PS3.3 C.12.1.1.2). */
export const WORKLIST_CHARACTER_SETS = ['ISO_IR 100', 'ISO_IR 192'] as const;
export type WorklistCharacterSet = (typeof WORKLIST_CHARACTER_SETS)[number];

/** A device that asks for the worklist, by its calling AE title. */
export interface WorklistStation {
  readonly aeTitle: string;
  /** The Modality (0008,0060) of its entries, e.g. `OAM`, `OPT`, `OPV`. */
  readonly modality: string;
  readonly stationName?: string;
  /** The worklist definitions whose bookings it sees; absent = every definition. */
  readonly worklistDefinitionIds?: readonly number[];
  /** Only definitions without a display context or with one of this site (or of no site). */
  readonly siteId?: number;
  /** Its answers' character set when its query names none. */
  readonly characterSet?: WorklistCharacterSet;
}

const StationSchema = Type.Object(
  {
    aeTitle: Type.String({ pattern: '^[ -\\[\\]-~]{1,16}$' }),
    modality: Type.String({ pattern: '^[A-Z0-9_ ]{1,16}$' }),
    stationName: Type.Optional(Type.String({ minLength: 1, maxLength: 16 })),
    worklistDefinitionIds: Type.Optional(
      Type.Array(Type.Integer({ minimum: 1, maximum: 2_147_483_647 }), { minItems: 1 }),
    ),
    siteId: Type.Optional(Type.Integer({ minimum: 1, maximum: 2_147_483_647 })),
    characterSet: Type.Optional(Type.Union(WORKLIST_CHARACTER_SETS.map((set) => Type.Literal(set)))),
  },
  { additionalProperties: false },
);

const FileSchema = Type.Object({ stations: Type.Array(StationSchema) }, { additionalProperties: false });

export interface StationFileOutcome {
  readonly stations: readonly WorklistStation[];
  readonly problems: readonly string[];
}

/** Checks the parsed JSON of a stations file; `label` names the file in the problems. */
export function parseWorklistStations(json: unknown, label: string): StationFileOutcome {
  const problems: string[] = [];
  if (!Value.Check(FileSchema, json)) {
    for (const error of Value.Errors(FileSchema, json)) {
      problems.push(`${label}: ${error.path === '' ? '/' : error.path} ${error.message}`);
      if (problems.length >= 20) break;
    }
    return { stations: [], problems };
  }
  const file: Static<typeof FileSchema> = json;
  const seen = new Set<string>();
  file.stations.forEach((station, index) => {
    const title = station.aeTitle.trim();
    if (title === '') problems.push(`${label}: /stations/${index}/aeTitle is blank`);
    if (seen.has(title)) problems.push(`${label}: /stations/${index}/aeTitle "${title}" is listed twice`);
    seen.add(title);
  });
  const stations = file.stations.map((station) => ({ ...station, aeTitle: station.aeTitle.trim() }));
  return { stations: problems.length === 0 ? stations : [], problems };
}

/** Reads and checks a stations file. */
export function readWorklistStationsFile(file: string): StationFileOutcome {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    return {
      stations: [],
      problems: [
        `DICOM_WORKLIST_STATIONS_FILE ${file}: ${(error as NodeJS.ErrnoException).code ?? 'unreadable'}`,
      ],
    };
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { stations: [], problems: [`DICOM_WORKLIST_STATIONS_FILE ${file}: not JSON`] };
  }
  return parseWorklistStations(json, `DICOM_WORKLIST_STATIONS_FILE ${file}`);
}
