/**
 * A synthetic patient population for demos and benchmarks. Every value of patient `k` (0-based demo
 * index) is a pure function of `k` ({@link demoPatientAt}), so a benchmark can pick known search terms
 * without reading the database. Names are invented from syllables; numbers come from bijections, so they
 * are unique without any lookup: hospital numbers are 7 digits, national numbers 10 digits starting
 * with 9 (no valid NHS check digit is implied), both unique for up to 5,000,000 patients.
 *
 * Loading is batched (see bulk-insert.ts), one transaction per chunk of patients, with ids assigned here
 * and sequences moved after.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { nowDateTime } from '../../db/database.ts';
import type { DB } from '../../db/schema.ts';
import { createBulkInserter } from './bulk-insert.ts';

/** Changing it changes every generated value; benchmarks rely on it staying fixed. */
export const DEMO_SEED = 0x0e7e5eed;
/** The generator guarantees unique numbers up to this many patients. */
export const DEMO_MAX_PATIENTS = 5_000_000;

export type Gender = 'M' | 'F' | 'U';

export interface DemoPatient {
  /** Demo index, from 0. */
  readonly index: number;
  readonly firstName: string;
  readonly lastName: string;
  /** `YYYY-MM-DD`, 1920-01-01 to 2020-12-31. */
  readonly dob: string;
  readonly gender: Gender;
  readonly isDeceased: boolean;
  readonly dateOfDeath: string | null;
  /** Soft-deleted patient row (`patient.deleted = 1`). */
  readonly isDeleted: boolean;
  /** 7 digits, zero-padded: the LOCAL (`Hos Num`) identifier. */
  readonly hospitalNumber: string;
  /** 10 digits: the GLOBAL (`NHS`) identifier. */
  readonly nhsNumber: string;
  /** A former number kept as a deleted identifier (about 5% of patients). */
  readonly deletedIdentifier: { readonly usage: 'LOCAL' | 'GLOBAL'; readonly value: string } | null;
}

const FIRST_STARTS = [
  'Al',
  'Be',
  'Ca',
  'Da',
  'El',
  'Fe',
  'Ga',
  'Ha',
  'Is',
  'Jo',
  'Ka',
  'Li',
  'Ma',
  'Ne',
  'Or',
  'Pa',
  'Qui',
  'Ro',
  'Sa',
  'Te',
  'Ul',
  'Va',
  'Wi',
  'Xa',
  'Yo',
  'Ze',
  'Bri',
  'Cla',
  'Dra',
  'Fio',
];
const FIRST_ENDS = [
  'ra',
  'na',
  'lin',
  'ton',
  'ric',
  'bel',
  'dan',
  'mir',
  'sha',
  'vin',
  'lo',
  'ria',
  'rek',
  'ith',
  'dor',
  'lia',
];
const SURNAME_HEADS = [
  'B',
  'C',
  'D',
  'F',
  'G',
  'H',
  'J',
  'K',
  'L',
  'M',
  'N',
  'P',
  'R',
  'S',
  'T',
  'V',
  'W',
  'Y',
  'Z',
];
const SURNAME_VOWELS = ['a', 'e', 'i', 'o', 'u'];
const SURNAME_MIDDLES = ['b', 'd', 'f', 'g', 'k', 'l', 'm', 'n', 'p', 'r', 's', 't', 'v', 'x', 'z'];
const SURNAME_ENDS = [
  'ley',
  'ton',
  'wick',
  'ford',
  'by',
  'son',
  'ham',
  'worth',
  'field',
  'more',
  'dale',
  'er',
  'ett',
  'ing',
  'ock',
  'ard',
  'ell',
  'ins',
  'ow',
  'ridge',
  'stone',
  'well',
  'wood',
  'cott',
];

const DAY_MS = 86_400_000;
const DOB_FIRST_DAY = Date.UTC(1920, 0, 1) / DAY_MS;
const DOB_DAYS = Date.UTC(2021, 0, 1) / DAY_MS - DOB_FIRST_DAY;
const DEATH_LAST_DAY = Date.UTC(2025, 0, 1) / DAY_MS;

/** mulberry32: small, fast, good enough for synthetic data. */
function randomFor(index: number): () => number {
  let state = (DEMO_SEED ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

function pick<T>(list: readonly T[], random: () => number): T {
  return list[Math.floor(random() * list.length)]!;
}

function dateOfDay(day: number): string {
  return new Date(day * DAY_MS).toISOString().slice(0, 10);
}

/** A bijection of [0, modulus): multiplier coprime to the modulus. */
function permute(value: number, multiplier: bigint, offset: bigint, modulus: bigint): bigint {
  return (BigInt(value) * multiplier + offset) % modulus;
}

/** Reverses the decimal digits of `value` written with `width` digits: a bijection that hides the stride. */
function reverseDigits(value: bigint, width: number): bigint {
  return BigInt(value.toString().padStart(width, '0').split('').reverse().join(''));
}

/** Hospital number of demo patient `k`. */
export function demoHospitalNumber(k: number): string {
  const mixed = reverseDigits(permute(k, 7_654_321n, 1_234_567n, 10_000_000n), 7);
  return ((mixed * 3_141_593n + 2_718_281n) % 10_000_000n).toString().padStart(7, '0');
}

/** National (NHS) number of demo patient `k`. */
export function demoNhsNumber(k: number): string {
  const mixed = reverseDigits(permute(k, 123_456_791n, 987_654_321n, 1_000_000_000n), 9);
  return `9${((mixed * 314_159_267n + 271_828_183n) % 1_000_000_000n).toString().padStart(9, '0')}`;
}

/** Every generated value of demo patient `k`. */
export function demoPatientAt(k: number): DemoPatient {
  if (!Number.isSafeInteger(k) || k < 0 || k >= DEMO_MAX_PATIENTS)
    throw new RangeError('demo index out of range');
  const random = randomFor(k);
  const firstName = pick(FIRST_STARTS, random) + pick(FIRST_ENDS, random);
  const lastName =
    pick(SURNAME_HEADS, random) +
    pick(SURNAME_VOWELS, random) +
    pick(SURNAME_MIDDLES, random) +
    pick(SURNAME_ENDS, random);
  const dobDay = DOB_FIRST_DAY + Math.floor(random() * DOB_DAYS);
  const g = random();
  const gender: Gender = g < 0.48 ? 'F' : g < 0.96 ? 'M' : 'U';
  const isDeceased = random() < 0.02;
  const deathDay = dobDay + 1 + Math.floor(random() * (DEATH_LAST_DAY - dobDay - 1));
  const isDeleted = random() < 0.005;
  const extra = random();
  // Former numbers come from the far end of each bijection, so they never meet a current number.
  const deletedIdentifier =
    extra < 0.025
      ? { usage: 'LOCAL' as const, value: demoHospitalNumber(10_000_000 - 1 - k) }
      : extra < 0.05
        ? { usage: 'GLOBAL' as const, value: demoNhsNumber(1_000_000_000 - 1 - k) }
        : null;
  return {
    index: k,
    firstName,
    lastName,
    dob: dateOfDay(dobDay),
    gender,
    isDeceased,
    dateOfDeath: isDeceased ? dateOfDay(deathDay) : null,
    isDeleted,
    hospitalNumber: demoHospitalNumber(k),
    nhsNumber: demoNhsNumber(k),
    deletedIdentifier,
  };
}

export interface DemoReference {
  readonly localInstitutionId: number;
  readonly nhsInstitutionId: number;
  readonly localTypeId: number;
  readonly globalTypeId: number;
}

/**
 * The institutions, identifier types and display orders the demo patients need; found by their natural
 * keys (institution `remote_id`, type `unique_row_string`) and created when missing.
 */
export async function ensureDemoReference(db: Kysely<DB>, institutionCode: string): Promise<DemoReference> {
  const now = nowDateTime();
  const institution = async (remoteId: string, name: string, shortName: string): Promise<number> => {
    const found = await db
      .selectFrom('institution')
      .select('id')
      .where('remote_id', '=', remoteId)
      .orderBy('id')
      .executeTakeFirst();
    if (found !== undefined) return found.id;
    const row = await db
      .insertInto('institution')
      .values({
        name,
        remote_id: remoteId,
        short_name: shortName,
        created_date: now,
        last_modified_date: now,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    return row.id;
  };
  const localInstitutionId = await institution(institutionCode, 'Demo Eye Hospital', 'Demo');
  const nhsInstitutionId =
    institutionCode === 'NHS'
      ? localInstitutionId
      : await institution('NHS', 'National Health Service', 'NHS');

  const type = async (values: {
    usage_type: string;
    short_title: string;
    long_title: string;
    institution_id: number;
    validate_regex: string;
    pad: string | null;
    spacing_rule: string | null;
    validation_example: string;
  }): Promise<number> => {
    const uniqueRowString = `${values.usage_type}-${values.institution_id}-0`;
    const found = await db
      .selectFrom('patient_identifier_type')
      .select('id')
      .where('unique_row_string', '=', uniqueRowString)
      .executeTakeFirst();
    if (found !== undefined) return found.id;
    const row = await db
      .insertInto('patient_identifier_type')
      .values({ ...values, unique_row_string: uniqueRowString, created_date: now, last_modified_date: now })
      .returning('id')
      .executeTakeFirstOrThrow();
    return row.id;
  };
  const localTypeId = await type({
    usage_type: 'LOCAL',
    short_title: 'Hos Num',
    long_title: 'Hospital Number',
    institution_id: localInstitutionId,
    validate_regex: '/^([0-9]{1,9})$/',
    pad: '%07s',
    spacing_rule: null,
    validation_example: '0012345',
  });
  const globalTypeId = await type({
    usage_type: 'GLOBAL',
    short_title: 'NHS',
    long_title: 'NHS Number',
    institution_id: nhsInstitutionId,
    validate_regex: '/^([0-9]{3}[- ]?[0-9]{3}[- ]?[0-9]{4})$/i',
    pad: null,
    spacing_rule: '### ### ####',
    validation_example: '999 123 4567',
  });

  const displayOrder = async (typeId: number, order: number, prefix: string | null): Promise<void> => {
    const found = await db
      .selectFrom('patient_identifier_type_display_order')
      .select('id')
      .where('institution_id', '=', localInstitutionId)
      .where('site_id', 'is', null)
      .where('patient_identifier_type_id', '=', typeId)
      .executeTakeFirst();
    if (found !== undefined) return;
    await db
      .insertInto('patient_identifier_type_display_order')
      .values({
        institution_id: localInstitutionId,
        site_id: null,
        patient_identifier_type_id: typeId,
        display_order: order,
        searchable: 1,
        search_protocol_prefix: prefix,
        unique_row_string: `${typeId}-${localInstitutionId}-0`,
        created_date: now,
        last_modified_date: now,
      })
      .execute();
  };
  await displayOrder(localTypeId, 1, null);
  await displayOrder(globalTypeId, 2, 'nhs');
  return { localInstitutionId, nhsInstitutionId, localTypeId, globalTypeId };
}

export interface GenerateOptions {
  readonly patients: number;
  readonly institutionCode: string;
  /** Patients per transaction. */
  readonly chunkSize?: number;
  onProgress?(done: number, total: number): void;
}

export interface GenerateResult {
  /** Demo index of the first patient added (patients already there keep theirs). */
  readonly firstIndex: number;
  readonly added: number;
  readonly firstPatientId: number;
  readonly reference: DemoReference;
  readonly elapsedMs: number;
}

/**
 * Adds `patients` demo patients after those already present, so running it twice grows the population.
 * The demo index continues from the number of active national (GLOBAL) numbers: the national type is
 * shared by every local institution, so a run under another INSTITUTION_CODE never repeats a number.
 */
export async function generateDemoPopulation(
  database: Database,
  options: GenerateOptions,
): Promise<GenerateResult> {
  const started = performance.now();
  const { db } = database;
  const reference = await ensureDemoReference(db, options.institutionCode);
  const existing = await db
    .selectFrom('patient_identifier')
    .select((eb) => eb.fn.count<number>('id').as('n'))
    .where('patient_identifier_type_id', '=', reference.globalTypeId)
    .where('deleted', '=', 0)
    .executeTakeFirstOrThrow();
  const firstIndex = Number(existing.n);
  if (firstIndex + options.patients > DEMO_MAX_PATIENTS) {
    throw new RangeError(`The demo generator makes at most ${DEMO_MAX_PATIENTS} patients`);
  }
  const maxId = async (table: 'contact' | 'patient' | 'patient_identifier'): Promise<number> => {
    const row = await db
      .selectFrom(table)
      .select((eb) => eb.fn.max<number | null>('id').as('m'))
      .executeTakeFirstOrThrow();
    return Number(row.m ?? 0);
  };
  const ids = {
    contact: (await maxId('contact')) + 1,
    patient: (await maxId('patient')) + 1,
    identifier: (await maxId('patient_identifier')) + 1,
  };
  const firstPatientId = ids.patient;
  const chunkSize = options.chunkSize ?? 10_000;
  const now = nowDateTime();
  const inserter = createBulkInserter(database);

  for (let done = 0; done < options.patients; done += chunkSize) {
    const count = Math.min(chunkSize, options.patients - done);
    const contacts: unknown[][] = [];
    const patients: unknown[][] = [];
    const identifiers: unknown[][] = [];
    for (let i = 0; i < count; i += 1) {
      const p = demoPatientAt(firstIndex + done + i);
      const contactId = ids.contact++;
      const patientId = ids.patient++;
      contacts.push([contactId, p.firstName, p.lastName, now, now]);
      patients.push([
        patientId,
        contactId,
        p.dob,
        p.gender,
        p.isDeceased ? 1 : 0,
        p.dateOfDeath,
        p.isDeleted ? 1 : 0,
        p.hospitalNumber,
        p.nhsNumber,
        reference.localInstitutionId,
        now,
        now,
      ]);
      const active = (typeId: number, value: string) => [
        ids.identifier++,
        patientId,
        typeId,
        value,
        'ACTIVE',
        0,
        `${patientId}-${typeId}-ACTIVE`,
        now,
        now,
      ];
      identifiers.push(active(reference.localTypeId, p.hospitalNumber));
      identifiers.push(active(reference.globalTypeId, p.nhsNumber));
      if (p.deletedIdentifier !== null) {
        const typeId = p.deletedIdentifier.usage === 'LOCAL' ? reference.localTypeId : reference.globalTypeId;
        const source = `DEL BY PATIENT ID ${patientId}`;
        identifiers.push([
          ids.identifier++,
          patientId,
          typeId,
          p.deletedIdentifier.value,
          source,
          1,
          `${patientId}-${typeId}-${source}-${p.deletedIdentifier.value}`,
          now,
          now,
        ]);
      }
    }
    await db.transaction().execute(async (trx) => {
      // Synthetic data: a crash mid-load loses nothing that cannot be generated again.
      await database.dialect.relaxCommitDurability(trx);
      await inserter.insert(trx, 'contact', contacts);
      await inserter.insert(trx, 'patient', patients);
      await inserter.insert(trx, 'patient_identifier', identifiers);
    });
    options.onProgress?.(done + count, options.patients);
  }
  for (const table of ['contact', 'patient', 'patient_identifier'] as const) {
    await database.dialect.resetIdGenerator(db, table, 'id');
  }
  // Fresh statistics, so that the planner uses the search indexes on the new volume.
  await database.dialect.analyzeTables(['contact', 'patient', 'patient_identifier']);
  return {
    firstIndex,
    added: options.patients,
    firstPatientId,
    reference,
    elapsedMs: performance.now() - started,
  };
}
