/**
 * Patient search: resolve the current institution and site, parse the term, choose the
 * identifier types, run one statement that returns the page of patients joined with their live
 * identifiers, and build the result objects of spec 2.1 with the JSON types the original's clients read.
 */
import type { CompiledQuery } from 'kysely';
import type { AppDeps } from '../../deps.ts';
import type {
  IdentifierPair,
  IdentifierRow,
  PageQuery,
  PatientQueries,
  PatientSearchRow,
  PatientWithIdentifierRow,
  SortColumn,
} from './patient.queries.ts';
import { createPatientQueries } from './patient.queries.ts';
import type { MissingPatientSource } from './missing-patient.ts';
import type { IdentifierType, Institution, ReferenceData } from './reference-data.ts';
import { createReferenceDataCache } from './reference-data.ts';
import { computeAge, formatDisplayValue, todayIn } from './patient-display.ts';
import { matchIdentifier, parseSearchTerm } from './search-term.ts';

export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;
/** Rows a caller may page past; deeper pages answer `[]` (bounds the cost of OFFSET). */
export const MAX_OFFSET = 10_000;

export interface PatientIdentifierResult {
  readonly title: string;
  readonly value: string;
}

export interface PatientSearchResult {
  readonly id: number;
  readonly first_name: string;
  readonly last_name: string;
  readonly age: string;
  readonly genderletter: string | null;
  readonly dob: string | null;
  readonly is_deceased: boolean;
  readonly patient_identifiers: PatientIdentifierResult[];
  readonly primary_patient_identifiers: PatientIdentifierResult | null;
}

/** The request, already reduced to plain values by the route (anything malformed is undefined). */
export interface PatientSearchInput {
  readonly term: string | undefined;
  /** Raw `patient_identifier_type`: an id or a `unique_row_string`; undefined when omitted or falsy. */
  readonly identifierType: string | undefined;
  readonly pageSize: number;
  /** 1-based. */
  readonly page: number;
  readonly sortColumn: SortColumn;
  readonly isDescending: boolean;
  /** Raw `institution_id` and `site_id` cookies, which choose the search's institution and site. */
  readonly institutionCookie: string | undefined;
  readonly siteCookie: string | undefined;
}

type SearchPlan = {
  readonly ref: ReferenceData;
  readonly scope: Scope;
  readonly isTypeGiven: boolean;
  readonly query: CompiledQuery<PatientWithIdentifierRow>;
  /** The identifier of a first page by identifier: what the PAS is asked for when nothing is found. */
  readonly missingIdentifier?: string;
};

export interface PatientSearchOptions {
  /**
   * Asked for the identifier of a search by identifier that finds no local patient (the PAS, as
   * OpenEyes's `DefaultPas` on a search); the search then answers the patient it stored, or, when the
   * source is down, slow or knows none, the empty result. Without it, the database alone.
   */
  readonly missingPatients?: MissingPatientSource;
}

type OwnIdentifier = Pick<
  IdentifierRow,
  'patient_identifier_type_id' | 'value' | 'long_title' | 'short_title'
> & { readonly id: number };

interface Scope {
  readonly institution: Institution | undefined;
  readonly siteId: number | undefined;
}

const NONE: PatientIdentifierResult = { title: 'N/A', value: 'None' };

export function createPatientSearchService(
  deps: Pick<AppDeps, 'config' | 'database'>,
  options: PatientSearchOptions = {},
) {
  const { missingPatients } = options;
  const queries: PatientQueries = createPatientQueries(deps.database);
  const reference = createReferenceDataCache(deps.database.db, deps.config.referenceCacheTtlMs);
  const dialect = deps.database.dialect;

  /** Everything decided before the database is asked: the page query to run, or none (`[]`). */
  const planSearch = async (input: PatientSearchInput): Promise<SearchPlan | undefined> => {
    if (input.term === undefined) return undefined;
    const offset = (input.page - 1) * input.pageSize;
    if (offset >= MAX_OFFSET) return undefined;
    const ref = await reference.get();
    const scope = resolveScope(ref, deps.config.institutionCode, input);

    let restrictType: IdentifierType | undefined;
    if (input.identifierType !== undefined) {
      restrictType = findType(ref, input.identifierType);
      if (restrictType === undefined) return undefined;
    }
    const parsed = parseSearchTerm(input.term, {
      isDobMandatory: ref.setting('dob_mandatory_in_search', scope.institution?.id, scope.siteId) === 'on',
    });
    if (parsed.kind === 'invalid') return undefined;
    const isAny = parsed.protocol === 'any';
    if (isAny && scope.institution?.isAnyNumberSearchAllowed !== true) return undefined;

    const page: PageQuery = {
      sortColumn: input.sortColumn,
      isDescending: input.isDescending,
      limit: input.pageSize,
      offset,
      restrictTypeId: restrictType?.id,
    };
    const base = { ref, scope, isTypeGiven: restrictType !== undefined };
    if (parsed.kind === 'name') {
      const prefix = (text: string) => {
        if (text === '') return undefined;
        return dialect.namePrefixBounds(text);
      };
      const criteria = {
        lastName: prefix(parsed.lastName),
        firstName: prefix(parsed.firstName),
        dob: parsed.dob,
      };
      return { ...base, query: queries.patientsByName(criteria, page) };
    }
    const candidates =
      restrictType !== undefined
        ? [restrictType]
        : isAny
          ? [...ref.typesById.values()]
          : searchableTypes(ref, scope, parsed.protocol);
    const pairs = new Map<string, IdentifierPair>();
    for (const type of candidates) {
      const value = matchIdentifier(parsed.value, type);
      if (value === undefined) continue;
      const lowered = dialect.foldCase(value);
      pairs.set(`${type.id}\u0000${lowered}`, { typeId: type.id, value: lowered });
    }
    if (pairs.size === 0) return undefined;
    return {
      ...base,
      query: queries.patientsByIdentifier([...pairs.values()], page),
      ...(offset === 0 ? { missingIdentifier: parsed.value } : {}),
    };
  };

  /** The page's rows; for a first page by identifier that finds none, after asking `missingPatients`. */
  const runSearch = async (plan: SearchPlan): Promise<PatientWithIdentifierRow[]> => {
    const rows = await queries.run(plan.query);
    if (rows.length > 0 || missingPatients === undefined || plan.missingIdentifier === undefined) return rows;
    const answer = await missingPatients.findMissingPatient(plan.missingIdentifier);
    return answer.kind === 'found' ? queries.run(plan.query) : rows;
  };

  return {
    /** The SQL of the page query a search would run (for EXPLAIN in the benchmark), or undefined. */
    async compileSearch(input: PatientSearchInput): Promise<CompiledQuery<unknown> | undefined> {
      return (await planSearch(input))?.query;
    },

    async searchPatients(input: PatientSearchInput): Promise<PatientSearchResult[]> {
      const plan = await planSearch(input);
      if (plan === undefined) return [];
      const { ref, scope } = plan;
      // One row per (patient, live identifier), in page order: group them back into patients, each
      // patient's identifiers in id order.
      const rows: PatientSearchRow[] = [];
      const byPatient = new Map<number, OwnIdentifier[]>();
      for (const row of await runSearch(plan)) {
        let list = byPatient.get(row.id);
        if (list === undefined) {
          list = [];
          byPatient.set(row.id, list);
          rows.push(row);
        }
        if (row.identifier_id !== null && row.identifier_type_id !== null && row.identifier_value !== null) {
          list.push({
            id: row.identifier_id,
            patient_identifier_type_id: row.identifier_type_id,
            value: row.identifier_value,
            long_title: row.long_title,
            short_title: row.short_title ?? '',
          });
        }
      }
      if (rows.length === 0) return [];
      for (const list of byPatient.values()) if (list.length > 1) list.sort((a, b) => a.id - b.id);
      const today = todayIn(deps.config.timeZone);
      const usage =
        ref.setting('display_primary_number_usage_code', scope.institution?.id, scope.siteId) ?? 'LOCAL';
      return rows.map((row) => {
        const own = byPatient.get(row.id) ?? [];
        return {
          id: row.id,
          first_name: row.first_name,
          last_name: row.last_name,
          age: computeAge(
            { dob: row.dob, dateOfDeath: row.date_of_death, isDeceased: row.is_deceased !== 0 },
            today,
          ),
          genderletter: row.gender,
          dob: row.dob,
          is_deceased: row.is_deceased !== 0,
          patient_identifiers: own.map((i) => ({ title: i.long_title ?? i.short_title, value: i.value })),
          primary_patient_identifiers: plan.isTypeGiven ? null : primaryIdentifier(ref, scope, usage, own),
        };
      });
    },
  };
}

export type PatientSearchService = ReturnType<typeof createPatientSearchService>;

const asId = (raw: string | undefined): number | undefined =>
  raw !== undefined && /^[1-9]\d{0,14}$/.test(raw.trim()) ? Number(raw.trim()) : undefined;

/**
 * The institution of a valid `institution_id` cookie, else the configured one
 * (`remote_id` = INSTITUTION_CODE, lowest id when several); the site of a valid `site_id` cookie when it
 * belongs to that institution.
 */
function resolveScope(ref: ReferenceData, institutionCode: string, input: PatientSearchInput): Scope {
  const fromCookie = asId(input.institutionCookie);
  const institution =
    (fromCookie === undefined ? undefined : ref.institutionsById.get(fromCookie)) ??
    ref.institutionsByRemoteId.get(institutionCode)?.[0];
  const siteId = asId(input.siteCookie);
  const isSiteOfInstitution =
    siteId !== undefined && institution !== undefined && ref.siteInstitution.get(siteId) === institution.id;
  return { institution, siteId: isSiteOfInstitution ? siteId : undefined };
}

/** An identifier type given by the caller: a numeric value is an id, anything else a `unique_row_string`. */
function findType(ref: ReferenceData, raw: string): IdentifierType | undefined {
  const id = asId(raw);
  return id !== undefined ? ref.typesById.get(id) : ref.typesByRowString.get(raw.trim());
}

/** The global institution: the only one whose remote_id is `global_institution_remote_id`. */
function globalInstitution(ref: ReferenceData, scope: Scope): Institution | undefined {
  const code = ref.setting('global_institution_remote_id', scope.institution?.id, scope.siteId) ?? 'NHS';
  const matches = ref.institutionsByRemoteId.get(code) ?? [];
  return matches.length === 1 ? matches[0] : undefined;
}

/**
 * The identifier types searched, GLOBAL then LOCAL: the display-order rules of (institution, site), else of
 * (institution, no site), with their searchable flag and protocols; without rules, the fallback types
 * (searchable, no protocols). A type is used when searchable and when the caller gave no protocol or one
 * of its protocols. The original's "global number on a LOCAL type" branch is dropped: it is useless without a PAS.
 */
function searchableTypes(ref: ReferenceData, scope: Scope, protocol: string | undefined): IdentifierType[] {
  const found: IdentifierType[] = [];
  const institution = scope.institution;
  for (const usage of ['GLOBAL', 'LOCAL']) {
    let rules = institution === undefined ? [] : ref.rulesFor(usage, institution.id, scope.siteId ?? null);
    if (rules.length === 0 && institution !== undefined) rules = ref.rulesFor(usage, institution.id, null);
    if (rules.length > 0) {
      for (const rule of rules) {
        if (rule.isSearchable && (protocol === undefined || rule.protocols.includes(protocol))) {
          found.push(rule.type);
        }
      }
      continue;
    }
    if (protocol !== undefined) continue;
    let fallback: IdentifierType | undefined;
    if (usage === 'GLOBAL') {
      const global = globalInstitution(ref, scope);
      fallback = global === undefined ? undefined : ref.typesFor('GLOBAL', global.id, null)[0];
    } else if (institution !== undefined) {
      fallback =
        (scope.siteId === undefined ? undefined : ref.typesFor('LOCAL', institution.id, scope.siteId)[0]) ??
        ref.typesFor('LOCAL', institution.id, null)[0];
    }
    if (fallback !== undefined) found.push(fallback);
  }
  return found;
}

/**
 * The primary identifier: the first display-order rule (site, then institution level) whose type the patient
 * holds; else the type of (usage, institution or, for GLOBAL, the global institution; site then none);
 * else `{"title":"N/A","value":"None"}`.
 */
function primaryIdentifier(
  ref: ReferenceData,
  scope: Scope,
  usage: string,
  identifiers: readonly { patient_identifier_type_id: number; value: string }[],
): PatientIdentifierResult {
  if (identifiers.length === 0) return NONE;
  const valueOf = (typeId: number) => identifiers.find((i) => i.patient_identifier_type_id === typeId)?.value;
  const sites = scope.siteId === undefined ? [null] : [scope.siteId, null];
  const institution = scope.institution;
  const result = (type: IdentifierType, value: string): PatientIdentifierResult => ({
    title: type.shortTitle,
    value: formatDisplayValue(value, type),
  });
  if (institution !== undefined) {
    for (const site of sites) {
      for (const rule of ref.rulesFor(usage, institution.id, site)) {
        const value = valueOf(rule.type.id);
        if (value !== undefined) return result(rule.type, value);
      }
    }
  }
  const owner = usage === 'GLOBAL' ? globalInstitution(ref, scope) : institution;
  if (owner !== undefined) {
    for (const site of sites) {
      for (const type of ref.typesFor(usage, owner.id, site)) {
        const value = valueOf(type.id);
        if (value !== undefined) return result(type, value);
      }
    }
  }
  return NONE;
}
