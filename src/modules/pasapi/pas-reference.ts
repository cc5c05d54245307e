/**
 * Reference data that every PAS change reads and that only OpenEyes's admins edit: identifier types (the
 * URL's and the GLOBAL one), installation settings, countries, ethnic groups, institutions and the remap
 * rules. Kept per process for at most `REFERENCE_CACHE_TTL_MS` (default 5 s; 0 reads them on every call),
 * so an admin's edit reaches the PASAPI and HL7 feeds within that bound, as it reaches patient search.
 * A code the database lacks is kept as such for the same bound (its warning or 404 for that long).
 *
 * GP and practice rows are not kept here: the feed itself creates them (PUTs of other patients, other
 * server processes), so `patient-change.ts` reads them in the change's transaction.
 *
 * Each load runs on the caller's connection or transaction (a SQLite write transaction may use only its
 * own) and is not shared with concurrent callers, so that one caller's failed transaction fails no other.
 * The entries are bounded in number: codes come from the PAS's messages. The loaders themselves
 * (`findIdentifierType`, `readInstallationSetting`, `findGlobalType`) read the database every time.
 */
import type { Kysely } from 'kysely';
import { LRUCache } from 'lru-cache';
import type { DB } from '../../db/schema.ts';
import { translatePcre } from '../patient/index.ts';
import type { RemapRule } from './pasapi-remap.ts';
import { loadRemapRules } from './pasapi-remap.ts';

/** The identifier type of a `unique_row_string`, with its compiled pattern. */
export interface PasIdentifierType {
  readonly id: number;
  readonly usageType: string;
  readonly institutionId: number;
  readonly siteId: number | null;
  readonly validateRegex: string;
  readonly regex: RegExp | undefined;
  readonly pad: string | null;
}

export async function findIdentifierType(
  db: Kysely<DB>,
  key: string,
): Promise<PasIdentifierType | undefined> {
  const row = await db
    .selectFrom('patient_identifier_type')
    .select(['id', 'usage_type', 'institution_id', 'site_id', 'validate_regex', 'pad'])
    .where('unique_row_string', '=', key)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return {
    id: row.id,
    usageType: row.usage_type,
    institutionId: row.institution_id,
    siteId: row.site_id,
    validateRegex: row.validate_regex,
    regex: translatePcre(row.validate_regex),
    pad: row.pad,
  };
}

/** A setting at installation level, else its metadata default. */
export async function readInstallationSetting(db: Kysely<DB>, key: string): Promise<string | undefined> {
  const row = await db
    .selectNoFrom((eb) => [
      eb.selectFrom('setting_installation').select('value').where('key', '=', key).limit(1).as('installed'),
      eb
        .selectFrom('setting_metadata')
        .select('default_value')
        .where('key', '=', key)
        .limit(1)
        .as('fallback'),
    ])
    .executeTakeFirstOrThrow();
  return row.installed ?? row.fallback ?? undefined;
}

/** The current GLOBAL identifier type (the institution of `global_institution_remote_id`, default NHS). */
export async function findGlobalType(db: Kysely<DB>): Promise<PasIdentifierType | undefined> {
  const remoteId = (await readInstallationSetting(db, 'global_institution_remote_id')) ?? 'NHS';
  const row = await db
    .selectFrom('patient_identifier_type as t')
    .innerJoin('institution as i', 'i.id', 't.institution_id')
    .select('t.unique_row_string')
    .where('t.usage_type', '=', 'GLOBAL')
    .where('i.remote_id', '=', remoteId)
    .orderBy('t.id')
    .executeTakeFirst();
  return row?.unique_row_string == null ? undefined : findIdentifierType(db, row.unique_row_string);
}

export interface PasReferenceCache {
  /** The identifier type of a `unique_row_string`. */
  identifierType(db: Kysely<DB>, key: string): Promise<PasIdentifierType | undefined>;
  /** The current GLOBAL identifier type (`findGlobalType`). */
  globalType(db: Kysely<DB>): Promise<PasIdentifierType | undefined>;
  /** An installation setting, else its metadata default. */
  setting(db: Kysely<DB>, key: string): Promise<string | undefined>;
  /** `country.id` of a code. */
  countryId(db: Kysely<DB>, code: string): Promise<number | undefined>;
  /** `ethnic_group.id` of a live code. */
  ethnicGroupId(db: Kysely<DB>, code: string): Promise<number | undefined>;
  /** The lowest `institution.id` of a `remote_id`. */
  institutionId(db: Kysely<DB>, remoteId: string): Promise<number | undefined>;
  /** The remap rules of documents with root `root` (`loadRemapRules`). */
  remapRules(db: Kysely<DB>, root: string, institutionId: number | undefined): Promise<RemapRule[]>;
}

/** Distinct keys kept at once; the least recently used goes first. */
const MAX_ENTRIES = 2_000;

/** A cache whose entries live `ttlMs` (0: nothing is kept). */
export function createPasReferenceCache(ttlMs: number): PasReferenceCache {
  const entries =
    ttlMs === 0 ? undefined : new LRUCache<string, { value: unknown }>({ max: MAX_ENTRIES, ttl: ttlMs });
  async function kept<T>(key: string, load: () => Promise<T>): Promise<T> {
    if (entries === undefined) return load();
    const hit = entries.get(key);
    if (hit !== undefined) return hit.value as T;
    const value = await load();
    entries.set(key, { value });
    return value;
  }
  // Keys: kind, then the arguments, separated by a character no code holds.
  const key = (...parts: (string | number | undefined)[]) => parts.map((p) => p ?? '').join('\u0000');
  return {
    identifierType: (db, type) => kept(key('type', type), () => findIdentifierType(db, type)),
    globalType: (db) => kept(key('global'), () => findGlobalType(db)),
    setting: (db, name) => kept(key('setting', name), () => readInstallationSetting(db, name)),
    countryId: (db, code) =>
      kept(
        key('country', code),
        async () =>
          (await db.selectFrom('country').select('id').where('code', '=', code).executeTakeFirst())?.id,
      ),
    ethnicGroupId: (db, code) =>
      kept(
        key('ethnic', code),
        async () =>
          (
            await db
              .selectFrom('ethnic_group')
              .select('id')
              .where('code', '=', code)
              .where('deleted', '=', 0)
              .executeTakeFirst()
          )?.id,
      ),
    institutionId: (db, remoteId) =>
      kept(
        key('institution', remoteId),
        async () =>
          (
            await db
              .selectFrom('institution')
              .select('id')
              .where('remote_id', '=', remoteId)
              .orderBy('id')
              .executeTakeFirst()
          )?.id,
      ),
    remapRules: (db, root, institutionId) =>
      kept(key('remap', root, institutionId), () => loadRemapRules(db, root, institutionId)),
  };
}
