/**
 * The small reference data every search needs (identifier types with their compiled regexes, display-order
 * rules, institutions, sites and the search settings), loaded together and kept for a few seconds, as the
 * original cached its rules for 5 s. A search therefore runs no reference queries.
 */
import type { Kysely } from 'kysely';
import { LRUCache } from 'lru-cache';
import type { DB } from '../../db/schema.ts';
import { translatePcre } from './search-term.ts';

export const SEARCH_SETTING_KEYS = [
  'display_primary_number_usage_code',
  'global_institution_remote_id',
  'dob_mandatory_in_search',
] as const;
export type SearchSettingKey = (typeof SEARCH_SETTING_KEYS)[number];

export interface IdentifierType {
  readonly id: number;
  readonly usageType: string;
  readonly shortTitle: string;
  readonly longTitle: string | null;
  readonly institutionId: number;
  readonly siteId: number | null;
  /** The translated `validate_regex`; undefined when it cannot be used in JavaScript. */
  readonly regex: RegExp | undefined;
  readonly pad: string | null;
  readonly valueDisplayPrefix: string | null;
  readonly valueDisplaySuffix: string | null;
  readonly spacingRule: string | null;
}

export interface DisplayOrderRule {
  readonly institutionId: number;
  readonly siteId: number | null;
  readonly type: IdentifierType;
  readonly isSearchable: boolean;
  /** `search_protocol_prefix` split on `|`, lower-cased. */
  readonly protocols: readonly string[];
}

export interface Institution {
  readonly id: number;
  readonly remoteId: string;
  readonly isAnyNumberSearchAllowed: boolean;
}

export interface ReferenceData {
  readonly typesById: ReadonlyMap<number, IdentifierType>;
  readonly typesByRowString: ReadonlyMap<string, IdentifierType>;
  readonly institutionsById: ReadonlyMap<number, Institution>;
  /** Institutions by `remote_id`, lowest id first. */
  readonly institutionsByRemoteId: ReadonlyMap<string, readonly Institution[]>;
  /** Site id -> institution id. */
  readonly siteInstitution: ReadonlyMap<number, number>;
  /** Rules in `display_order`, then id, order. */
  rulesFor(usage: string, institutionId: number, siteId: number | null): readonly DisplayOrderRule[];
  /** Identifier types of (usage, institution, site), lowest id first. */
  typesFor(usage: string, institutionId: number, siteId: number | null): readonly IdentifierType[];
  /** A setting resolved at site, institution, installation level, then the metadata default. */
  setting(
    key: SearchSettingKey,
    institutionId: number | undefined,
    siteId: number | undefined,
  ): string | null;
}

const scopeKey = (usage: string, institutionId: number, siteId: number | null) =>
  `${usage}\u0000${institutionId}\u0000${siteId ?? ''}`;

async function loadReferenceData(db: Kysely<DB>): Promise<ReferenceData> {
  const keys = [...SEARCH_SETTING_KEYS];
  const [typeRows, ruleRows, institutionRows, siteRows, metadata, installation, institution, site] =
    await Promise.all([
      db.selectFrom('patient_identifier_type').selectAll().orderBy('id').execute(),
      db
        .selectFrom('patient_identifier_type_display_order')
        .select([
          'institution_id',
          'site_id',
          'patient_identifier_type_id',
          'searchable',
          'search_protocol_prefix',
        ])
        .orderBy('display_order')
        .orderBy('id')
        .execute(),
      db
        .selectFrom('institution')
        .select(['id', 'remote_id', 'any_number_search_allowed'])
        .orderBy('id')
        .execute(),
      db.selectFrom('site').select(['id', 'institution_id']).execute(),
      db.selectFrom('setting_metadata').select(['key', 'default_value']).where('key', 'in', keys).execute(),
      db.selectFrom('setting_installation').select(['key', 'value']).where('key', 'in', keys).execute(),
      db
        .selectFrom('setting_institution')
        .select(['institution_id', 'key', 'value'])
        .where('key', 'in', keys)
        .execute(),
      db.selectFrom('setting_site').select(['site_id', 'key', 'value']).where('key', 'in', keys).execute(),
    ]);

  const typesById = new Map<number, IdentifierType>();
  const typesByRowString = new Map<string, IdentifierType>();
  const typesByScope = new Map<string, IdentifierType[]>();
  for (const row of typeRows) {
    const type: IdentifierType = {
      id: row.id,
      usageType: row.usage_type,
      shortTitle: row.short_title,
      longTitle: row.long_title,
      institutionId: row.institution_id,
      siteId: row.site_id,
      regex: translatePcre(row.validate_regex),
      pad: row.pad,
      valueDisplayPrefix: row.value_display_prefix,
      valueDisplaySuffix: row.value_display_suffix,
      spacingRule: row.spacing_rule,
    };
    typesById.set(type.id, type);
    if (row.unique_row_string !== null) typesByRowString.set(row.unique_row_string, type);
    const key = scopeKey(type.usageType, type.institutionId, type.siteId);
    typesByScope.set(key, [...(typesByScope.get(key) ?? []), type]);
  }

  const rulesByScope = new Map<string, DisplayOrderRule[]>();
  for (const row of ruleRows) {
    const type = typesById.get(row.patient_identifier_type_id);
    if (type === undefined) continue;
    const rule: DisplayOrderRule = {
      institutionId: row.institution_id,
      siteId: row.site_id,
      type,
      isSearchable: row.searchable === 1,
      protocols: (row.search_protocol_prefix ?? '')
        .split('|')
        .map((p) => p.trim().toLowerCase())
        .filter((p) => p !== ''),
    };
    const key = scopeKey(type.usageType, rule.institutionId, rule.siteId);
    const list = rulesByScope.get(key) ?? [];
    list.push(rule);
    rulesByScope.set(key, list);
  }

  const institutionsById = new Map<number, Institution>();
  const institutionsByRemoteId = new Map<string, Institution[]>();
  for (const row of institutionRows) {
    const item: Institution = {
      id: row.id,
      remoteId: row.remote_id,
      isAnyNumberSearchAllowed: row.any_number_search_allowed === 1,
    };
    institutionsById.set(item.id, item);
    institutionsByRemoteId.set(item.remoteId, [...(institutionsByRemoteId.get(item.remoteId) ?? []), item]);
  }

  const defaults = new Map(metadata.map((r) => [r.key, r.default_value]));
  const installed = new Map(installation.map((r) => [r.key, r.value]));
  const byInstitution = new Map(institution.map((r) => [`${r.institution_id}\u0000${r.key}`, r.value]));
  const bySite = new Map(site.map((r) => [`${r.site_id}\u0000${r.key}`, r.value]));

  return {
    typesById,
    typesByRowString,
    institutionsById,
    institutionsByRemoteId,
    siteInstitution: new Map(siteRows.map((r) => [r.id, r.institution_id])),
    rulesFor: (usage, institutionId, siteId) =>
      rulesByScope.get(scopeKey(usage, institutionId, siteId)) ?? [],
    typesFor: (usage, institutionId, siteId) =>
      typesByScope.get(scopeKey(usage, institutionId, siteId)) ?? [],
    setting(key, institutionId, siteId) {
      const siteValue = siteId === undefined ? undefined : bySite.get(`${siteId}\u0000${key}`);
      if (siteValue !== undefined) return siteValue;
      const institutionValue =
        institutionId === undefined ? undefined : byInstitution.get(`${institutionId}\u0000${key}`);
      if (institutionValue !== undefined) return institutionValue;
      return installed.get(key) ?? defaults.get(key) ?? null;
    },
  };
}

export interface ReferenceDataCache {
  get(): Promise<ReferenceData>;
}

/**
 * Reference data reloaded at most every `ttlMs` (0: on every call); concurrent callers share one load
 * (lru-cache's `fetch`), and a failed load is not kept.
 */
export function createReferenceDataCache(db: Kysely<DB>, ttlMs: number): ReferenceDataCache {
  const cache = new LRUCache<'reference', ReferenceData>({
    max: 1,
    // lru-cache reads a ttl of 0 as "never stale": with 0 every call refreshes instead (see below).
    ttl: ttlMs,
    fetchMethod: () => loadReferenceData(db),
  });
  const isAlwaysFresh = ttlMs === 0;
  return {
    get: () => cache.forceFetch('reference', { forceRefresh: isAlwaysFresh }),
  };
}
