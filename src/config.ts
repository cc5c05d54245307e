/**
 * The only module that reads `process.env`. Every value is parsed and checked here, and every problem is
 * reported at once so that an operator can fix a bad deployment in one pass.
 *
 * The settings are declared in sections, one per concern (server, site and database, queue, ...): each
 * setting names its variable, its parser with its default and bounds, the default as the README shows
 * it, and its README line. `loadConfig` parses them into the {@link Config} the app reads, and
 * `npm run docs:config` writes the README's configuration table from them (`config-table.ts`).
 */
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import type { DeviceProfile } from './site-files/device-profiles.ts';
import { readDeviceProfilesFile } from './site-files/device-profiles.ts';
import type { WorklistStation } from './site-files/worklist-stations.ts';
import { WORKLIST_CHARACTER_SETS, readWorklistStationsFile } from './site-files/worklist-stations.ts';
import type { Hl7FieldMap } from './site-files/hl7-field-map.ts';
import { DEFAULT_FIELD_MAP, readFieldMapFile } from './site-files/hl7-field-map.ts';

export type DatabaseTarget =
  | { readonly kind: 'sqlite'; readonly file: string }
  | { readonly kind: 'postgres'; readonly url: string }
  /** MariaDB 10.6+ or MySQL 8.0+ (`mysql://` or `mariadb://`). */
  | {
      readonly kind: 'mysql';
      readonly url: string;
      /**
       * `own`: the service's own schema, created by its migrations. `openeyes`: an existing OpenEyes
       * database, whose tables are checked and never changed (`DATABASE_SCHEMA`).
       */
      readonly schema: DatabaseSchema;
      /** IANA zone of the stored date-times: UTC in the own schema, `TIME_ZONE` on OpenEyes's. */
      readonly storedTimeZone: string;
    };

export type DatabaseSchema = 'own' | 'openeyes';

/** One step of the retry back-off table. */
export interface BackoffStep {
  /** The step applies while the try count (after the failed attempt) is below this. */
  readonly belowTry: number;
  readonly delayMs: number;
  /** Multiply the delay by the try count (`2m*n`). */
  readonly isPerTry: boolean;
}

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

/** A PAS allowed to send HL7: its sending application (MSH-3) and facility (MSH-4), and where from. */
export interface Hl7Sender {
  /** MSH-3.1, or `*` for any. */
  readonly application: string;
  /** MSH-4.1, or `*` for any. */
  readonly facility: string;
  /** An IP address, a subnet in CIDR notation, or `*` for any address. */
  readonly address: string;
}

/** A calling AE title allowed to open associations from an address, a subnet, or anywhere. */
export interface DicomCaller {
  readonly aeTitle: string;
  /** An IP address, a subnet in CIDR notation (`10.1.2.0/24`), or `*` for any address. */
  readonly address: string;
}

/** A device the service opens associations to (a storage commitment report after its request's closed). */
export interface DicomRemoteNode {
  readonly aeTitle: string;
  /** An IP address or a host name. */
  readonly host: string;
  readonly port: number;
}

export class ConfigError extends Error {
  readonly problems: readonly string[];
  constructor(problems: readonly string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

type Env = Readonly<Record<string, string | undefined>>;

/** What a setting's parser reads from: the environment, and the list of problems found so far. */
interface Reader {
  /** The variable's value, trimmed; undefined when unset or blank. */
  readonly read: (name: string) => string | undefined;
  readonly problems: string[];
}

/**
 * One environment variable: its name, its parser (which holds its default and checks its value), the
 * default as the README shows it, and the README's line about it. `C` is what the parser reads of the
 * other settings of its section (their values, parsed first when it asks for them).
 *
 * The setting's key in its section is the name of its value in {@link Config}. Three marks change where
 * the value goes: `isInput` (read by the section's other settings or its `derive`, not kept), `group`
 * (kept inside that object of the section) and `isOmittedWhenUnset` (an optional property, absent when
 * the value is undefined).
 */
export interface Setting<T, C = void> {
  readonly variable: string;
  /** The default, as the README's configuration table shows it. */
  readonly shown: string;
  /** What the variable does, for the README's configuration table. */
  readonly doc: string;
  parse(reader: Reader, section: C): T;
  readonly isInput?: true;
  readonly group?: string;
  readonly isOmittedWhenUnset?: true;
}

/** The settings of one concern, in the README's order, and where their values sit in {@link Config}. */
export interface ConfigSection {
  readonly title: string;
  /** The property of {@link Config} that holds the section's values; without it they sit at its top. */
  readonly key?: string;
  readonly settings: Readonly<Record<string, Setting<unknown, never>>>;
  /**
   * Values computed from the section's settings (and the environment) rather than read from one
   * variable; an object among them is merged into the section's group of the same name.
   */
  readonly derive?: (values: never, reader: Reader) => object;
}

// The type of the configuration, derived from the sections: each setting's key and its parser's type.
type ValueOf<S> = S extends Setting<infer T, never> ? T : never;
type Kept<S> = {
  readonly [
    K in keyof S as S[K] extends { isInput: true } | { group: string } | { isOmittedWhenUnset: true }
      ? never
      : K
  ]: ValueOf<S[K]>;
};
type Omitted<S> = {
  readonly [K in keyof S as S[K] extends { isOmittedWhenUnset: true } ? K : never]?: Exclude<
    ValueOf<S[K]>,
    undefined
  >;
};
type GroupNames<S> = { [K in keyof S]: S[K] extends { group: infer G extends string } ? G : never }[keyof S];
type Grouped<S> = {
  readonly [G in GroupNames<S>]: {
    readonly [K in keyof S as S[K] extends { group: G } ? K : never]: ValueOf<S[K]>;
  };
};
type Derived<X> = X extends { derive: (...args: never[]) => infer D } ? D : unknown;
/** The values one section gives: its kept settings, its groups and what it derives. */
type SectionValues<X extends ConfigSection> = Kept<X['settings']> &
  Omitted<X['settings']> &
  Grouped<X['settings']> &
  Derived<X>;
type SectionConfig<X> = X extends ConfigSection
  ? X extends { key: infer K extends string }
    ? { readonly [P in K]: Flat<SectionValues<X>> }
    : SectionValues<X>
  : never;
type AllSections<T> = T extends readonly [infer H, ...infer R] ? SectionConfig<H> & AllSections<R> : unknown;
type Flat<T> = { [K in keyof T]: T[K] } & {};

/**
 * What the app reads of its configuration: each section's settings under their keys (at the top, or
 * under the section's `key`), typed by their parsers; `loadConfig` builds it from {@link CONFIG_SECTIONS}.
 */
export type Config = Flat<AllSections<typeof CONFIG_SECTIONS>>;

const MiB = 1024 * 1024;

/** IOL calculations per eye the biometry reader collects at most: the largest `BIOMETRY_MAX_*_PER_EYE` allowed. */
export const BIOMETRY_CALCULATION_CEILING = 1000;

const code = (value: string | number) => `\`${value}\``;

function integer(
  variable: string,
  fallback: number,
  range: { readonly min: number; readonly max: number },
  doc: string,
  shown = code(fallback),
): Setting<number> {
  return {
    variable,
    shown,
    doc,
    parse: ({ read, problems }) => {
      const raw = read(variable);
      if (raw === undefined) return fallback;
      if (!/^\d+$/.test(raw) || Number(raw) < range.min || Number(raw) > range.max) {
        problems.push(`${variable} must be a whole number from ${range.min} to ${range.max}, got "${raw}"`);
        return fallback;
      }
      return Number(raw);
    },
  };
}

function choice<const T extends string>(
  variable: string,
  fallback: T,
  choices: readonly T[],
  doc: string,
): Setting<T> {
  return {
    variable,
    shown: code(fallback),
    doc,
    parse: ({ read, problems }) => {
      const raw = read(variable);
      if (raw === undefined) return fallback;
      const lower = raw.toLowerCase() as T;
      if (!choices.includes(lower)) {
        problems.push(`${variable} must be one of ${choices.join(', ')}, got "${raw}"`);
        return fallback;
      }
      return lower;
    },
  };
}

function parseFlag(reader: Reader, variable: string, fallback: boolean): boolean {
  const raw = reader.read(variable);
  if (raw === undefined) return fallback;
  const lower = raw.toLowerCase();
  if (['1', 'true', 'on', 'yes'].includes(lower)) return true;
  if (['0', 'false', 'off', 'no'].includes(lower)) return false;
  reader.problems.push(`${variable} must be on or off, got "${raw}"`);
  return fallback;
}

function onOff(variable: string, fallback: boolean, doc: string): Setting<boolean> {
  return {
    variable,
    shown: code(fallback ? 'on' : 'off'),
    doc,
    parse: (reader) => parseFlag(reader, variable, fallback),
  };
}

function text(variable: string, fallback: string, doc: string): Setting<string> {
  return { variable, shown: code(fallback), doc, parse: ({ read }) => read(variable) ?? fallback };
}

/** A variable without a default (undefined when unset), checked by its own parser. */
function optional<T, C = void>(
  variable: string,
  shown: string,
  doc: string,
  parse: (raw: string | undefined, reader: Reader, context: C) => T,
): Setting<T, C> {
  return { variable, shown, doc, parse: (reader, context) => parse(reader.read(variable), reader, context) };
}

function commaList(variable: string, shown: string, doc: string): Setting<readonly string[]> {
  return optional(variable, shown, doc, (raw): readonly string[] => list(raw));
}

/** A setting read by the others of its section (or its `derive`) and not kept in the configuration. */
function input<T, C>(setting: Setting<T, C>): Setting<T, C> & { readonly isInput: true } {
  return { ...setting, isInput: true };
}

/** A setting kept inside the object `group` of its section's values. */
function inGroup<const G extends string, T, C>(
  group: G,
  setting: Setting<T, C>,
): Setting<T, C> & { readonly group: G } {
  return { ...setting, group };
}

/** A setting whose property is optional: absent from the configuration when the value is undefined. */
function omittedWhenUnset<T, C>(
  setting: Setting<T | undefined, C>,
): Setting<T | undefined, C> & { readonly isOmittedWhenUnset: true } {
  return { ...setting, isOmittedWhenUnset: true };
}

const SERVER = {
  title: 'Server',
  settings: {
    port: integer('PORT', 8080, { min: 0, max: 65535 }, 'TCP port of the HTTP server'),
    host: text(
      'HOST',
      '0.0.0.0',
      "address the server (and the DICOM SCP) listens on; unset while demo data is loaded at start: `127.0.0.1` (the demo accounts' passwords are public)",
    ),
    serverProcesses: optional(
      'SERVER_PROCESSES',
      code(1),
      'server processes (`node:cluster`); `auto` = one per core',
      (raw, reader) =>
        raw?.toLowerCase() === 'auto'
          ? availableParallelism()
          : integer('SERVER_PROCESSES', 1, { min: 1, max: 256 }, '').parse(reader),
    ),
    worker: choice(
      'WORKER',
      'in-process',
      ['in-process', 'off'],
      'run the queue worker inside the server, or `off` (use `npm run worker`)',
    ),
    logLevel: choice<LogLevel>(
      'LOG_LEVEL',
      'info',
      ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
      '`fatal` … `trace`, `silent`',
    ),
    tlsCert: input(
      optional<string | undefined>(
        'TLS_CERT',
        'none',
        'PEM certificate chain file: serve HTTPS directly (with `TLS_KEY`)',
        (raw) => raw,
      ),
    ),
    tlsKey: input(
      optional<string | undefined>('TLS_KEY', 'none', 'PEM private key file of `TLS_CERT`', (raw) => raw),
    ),
    requireTls: optional(
      'REQUIRE_TLS',
      'on when `NODE_ENV=production`',
      'refuse Basic credentials over plain HTTP (unless a trusted proxy says HTTPS)',
      (_raw, reader) => parseFlag(reader, 'REQUIRE_TLS', reader.read('NODE_ENV') === 'production'),
    ),
    trustedProxies: commaList(
      'TRUSTED_PROXIES',
      'none',
      'addresses/CIDRs whose `X-Forwarded-For` / `X-Forwarded-Proto` are believed',
    ),
  },
  derive: (
    { tlsCert, tlsKey }: { tlsCert: string | undefined; tlsKey: string | undefined },
    reader: Reader,
  ): {
    /** `HOST` was given: with demo data the server listens on 127.0.0.1 only while it is not. */
    isHostSet?: boolean;
    /** HTTPS served by the server itself: the PEM chain and key of `TLS_CERT` and `TLS_KEY`, read at start. */
    tls?: { readonly cert: Buffer; readonly key: Buffer };
  } => ({
    isHostSet: reader.read('HOST') !== undefined,
    ...tlsFiles(tlsCert, tlsKey, reader.problems),
  }),
} satisfies ConfigSection;

const SITE = {
  title: 'Site and database',
  settings: {
    database: optional(
      'DATABASE_URL',
      code('sqlite:./data/records.db'),
      '`sqlite:<path>`, `postgres://user:pass@host:5432/db` or `mysql://user:pass@host:3306/db` (also `mariadb://`)',
      (raw, reader, site: { databaseSchema: DatabaseSchema; timeZone: string }) =>
        parseDatabaseUrl(
          raw ?? 'sqlite:./data/records.db',
          { schema: site.databaseSchema, timeZone: site.timeZone },
          reader.problems,
        ),
    ),
    databaseSchema: input(
      choice<DatabaseSchema>(
        'DATABASE_SCHEMA',
        'own',
        ['own', 'openeyes'],
        '`own`: the service creates and migrates its own tables; `openeyes`: serve an existing OpenEyes MariaDB/MySQL database in place (below)',
      ),
    ),
    dbPoolSize: integer(
      'DB_POOL_SIZE',
      20,
      { min: 1, max: 500 },
      'PostgreSQL or MariaDB/MySQL connections per process',
    ),
    filesDir: optional('FILES_DIR', code('./data/files'), 'protected file store (signatures)', (raw) =>
      path.resolve(raw ?? './data/files'),
    ),
    demoData: choice(
      'DEMO_DATA',
      'auto',
      ['auto', 'on', 'off'],
      '`auto`: demo data for a new SQLite database only; `on`: also PostgreSQL; `off`: never',
    ),
    institutionCode: optional(
      'INSTITUTION_CODE',
      code('NEW'),
      'current institution (`institution.remote_id`) for patient search',
      (raw, reader) => {
        const institutionCode = raw ?? 'NEW';
        if (institutionCode.length > 10)
          reader.problems.push('INSTITUTION_CODE must be at most 10 characters');
        return institutionCode;
      },
    ),
    timeZone: optional(
      'TIME_ZONE',
      "the machine's",
      'IANA zone for "today" in ages; with `DATABASE_SCHEMA=openeyes` also the zone of the date-times stored (OpenEyes\'s server\'s local time)',
      (raw, reader) => {
        const timeZone = raw ?? Intl.DateTimeFormat().resolvedOptions().timeZone;
        try {
          new Intl.DateTimeFormat('en-GB', { timeZone });
        } catch {
          reader.problems.push(`TIME_ZONE must be an IANA time zone, got "${timeZone}"`);
        }
        return timeZone;
      },
    ),
    referenceCacheTtlMs: integer(
      'REFERENCE_CACHE_TTL_MS',
      5_000,
      { min: 0, max: 3_600_000 },
      'cache of identifier types, display rules, settings, request types, PAS reference data',
    ),
    orphanSweepIntervalMs: optional(
      'ORPHAN_SWEEP_INTERVAL_MS',
      '10 min (off on an OpenEyes database)',
      'how often files left without a row by a crash are removed (0 = never)',
      // Off by default on an OpenEyes database: its files directory is OpenEyes's too.
      (_raw, reader, { database }: { database: DatabaseTarget }) =>
        integer(
          'ORPHAN_SWEEP_INTERVAL_MS',
          database.kind === 'mysql' && database.schema === 'openeyes' ? 0 : 600_000,
          { min: 0, max: 86_400_000 },
          '',
        ).parse(reader),
    ),
    orphanSweepGraceMs: integer(
      'ORPHAN_SWEEP_GRACE_MS',
      900_000,
      { min: 0, max: 86_400_000 },
      'files younger than this are never swept (their transaction may still be running)',
      '15 min',
    ),
  },
} satisfies ConfigSection;

const QUEUE = {
  title: 'Request queue',
  settings: {
    workerConcurrency: integer(
      'WORKER_CONCURRENCY',
      0,
      { min: 0, max: 1000 },
      "requests run in parallel per queue; 0 = the queue's `maximum_active_threads`",
    ),
    workerQueues: commaList('WORKER_QUEUES', 'all', 'comma-separated queues this worker serves'),
    queueIntakePaceMs: integer(
      'QUEUE_INTAKE_PACE_MS',
      1000,
      { min: 0, max: 60_000 },
      'with `WORKER=in-process`: while the worker is more than this behind the requests accepted, queue add, STOW-RS and C-STORE answers wait up to as long for it (the request is already stored); 0 = never',
    ),
    queueRetryBackoff: optional(
      'QUEUE_RETRY_BACKOFF',
      code('2m*n@5,30m@13,6h@20'),
      'retry back-off table: 2n min below try 5, 30 min below 13, 6 h below 20, then FAILED',
      (raw, reader) => parseBackoff(raw ?? '2m*n@5,30m@13,6h@20', reader.problems),
    ),
    queueDropBlobRequestTypes: commaList(
      'QUEUE_DROP_BLOB_REQUEST_TYPES',
      'none',
      'request types whose payload blob the clean-up routine drops after attaching it',
    ),
    defaultRequestType: text(
      'DEFAULT_REQUEST_TYPE',
      'dicom_request',
      "queue add's `request_type` when the caller gives none",
    ),
  },
} satisfies ConfigSection;

const DICOM = {
  title: 'DICOM reading',
  key: 'dicom' as const,
  settings: {
    maxElements: integer(
      'DICOM_MAX_ELEMENTS',
      200_000,
      { min: 100, max: 100_000_000 },
      'elements, items and fragments allowed in one DICOM file',
    ),
    maxDepth: integer(
      'DICOM_MAX_DEPTH',
      32,
      { min: 1, max: 1000 },
      'sequences nested inside each other in one DICOM file',
    ),
    maxFrames: integer(
      'DICOM_MAX_FRAMES',
      16,
      { min: 1, max: 100_000 },
      'frames extracted from one DICOM file, evenly spaced when it has more ([docs/DICOM.md](docs/DICOM.md))',
    ),
    maxPixels: integer(
      'DICOM_MAX_PIXELS',
      32 * MiB,
      { min: 1, max: 2 ** 31 },
      'pixels (x samples) extracted from one DICOM file; a single frame over it is refused',
      '32 Mi',
    ),
    decodeTimeoutMs: integer(
      'DICOM_DECODE_TIMEOUT_MS',
      20_000,
      { min: 100, max: 50_000 },
      'time limit of one DICOM read or decode on its thread',
    ),
    decodeMemoryMb: integer(
      'DICOM_DECODE_MEMORY_MB',
      512,
      { min: 64, max: 16_384 },
      'heap cap of each decoding thread, in MiB; also the largest file read, and it bounds rendering a PDF page',
    ),
    workerThreads: integer(
      'DICOM_WORKER_THREADS',
      0,
      { min: 0, max: 256 },
      'DICOM decoding threads; 0 = one per core',
    ),
    maxTextBytes: integer(
      'DICOM_MAX_TEXT_BYTES',
      16 * 1024,
      { min: 1024, max: 64 * MiB },
      'longest long-text value (ST, LT, UT, UC, UR) of a standard DICOM element, and longest element read as text; other string values are limited by their VR ([limits](docs/DICOM.md#value-lengths))',
    ),
    receiptThreads: integer(
      'DICOM_RECEIPT_THREADS',
      0,
      { min: 0, max: 256 },
      "DICOM decoding threads that check received instances (STOW-RS, C-STORE), apart from those of the queue's routines; 0 = one per core",
    ),
  },
} satisfies ConfigSection;

const DEVICES = {
  title: 'Device filing',
  settings: {
    deviceProfiles: optional(
      'DEVICE_PROFILES_FILE',
      'none',
      "a JSON file of the site's device profiles, added to or replacing the built-in ones; checked at start ([docs/DICOM.md](docs/DICOM.md#device-filing))",
      (raw, reader) => deviceProfilesOf(raw, reader.problems),
    ),
    deviceFirmId: optional(
      'DEVICE_FIRM_ID',
      'none',
      "the firm (`firm.id`) of device events' episodes: the patient's open episode in that firm's subspecialty is chosen first (on OpenEyes; the same firm in the own schema), then any open episode, else a new one for this firm; without it, new episodes have no firm",
      (raw, reader) =>
        raw === undefined
          ? undefined
          : integer('DEVICE_FIRM_ID', 0, { min: 1, max: 2_147_483_647 }, '').parse(reader) || undefined,
    ),
    biometryMaxLensesPerEye: integer(
      'BIOMETRY_MAX_LENSES_PER_EYE',
      20,
      { min: 1, max: BIOMETRY_CALCULATION_CEILING },
      'distinct lenses one biometry file may carry per eye (an IOLMaster sends a handful); a file beyond it is refused whole, with the reason in the queue',
    ),
    biometryMaxFormulasPerEye: integer(
      'BIOMETRY_MAX_FORMULAS_PER_EYE',
      10,
      { min: 1, max: BIOMETRY_CALCULATION_CEILING },
      'distinct formulas one biometry file may carry per eye; a file beyond it is refused whole',
    ),
    biometryMaxCalculationsPerEye: integer(
      'BIOMETRY_MAX_CALCULATIONS_PER_EYE',
      100,
      { min: 1, max: BIOMETRY_CALCULATION_CEILING },
      `IOL calculations (lens and formula pairs) one biometry file may carry per eye (at most ${BIOMETRY_CALCULATION_CEILING}); a file beyond it is refused whole`,
    ),
    biometryOffersNewLenses: onOff(
      'BIOMETRY_OFFER_NEW_LENSES',
      false,
      "`on`: a lens type a biometry file names that the lens list lacks is listed for the institution and offered to clinicians at once; `off`: it is created inactive and held for review (the console's *Biometry lenses* page)",
    ),
  },
} satisfies ConfigSection;

const AUTH = {
  title: 'Authentication',
  settings: {
    authCacheTtlMs: integer(
      'AUTH_CACHE_TTL_MS',
      60_000,
      { min: 0, max: 3_600_000 },
      'how long a verified Basic credential is remembered (0 = never); disabling a user, a password change or a role revoked reach every process within 2 s regardless',
    ),
    authFailureLimitPerMinute: integer(
      'AUTH_FAILURE_LIMIT_PER_MINUTE',
      10,
      { min: 0, max: 1_000_000 },
      'failed logins per client address (any usernames) per minute before 429',
    ),
    authFailureFreeAttempts: integer(
      'AUTH_FAILURE_FREE_ATTEMPTS',
      5,
      { min: 0, max: 1_000_000 },
      'failed logins per username and address in an hour before an exponential back-off (1 s, 2 s, 4 s, …; 0 = none)',
    ),
    authFailureMaxBackoffSeconds: integer(
      'AUTH_FAILURE_MAX_BACKOFF_SECONDS',
      900,
      { min: 1, max: 86_400 },
      'the longest back-off',
    ),
    authFailureLimitPerUsername: integer(
      'AUTH_FAILURE_LIMIT_PER_USERNAME',
      100,
      { min: 0, max: 1_000_000 },
      'failed logins per username (all addresses) per hour before 429, except from addresses it logged in from',
    ),
    authConcurrentVerifications: integer(
      'AUTH_CONCURRENT_VERIFICATIONS',
      4,
      { min: 0, max: 10_000 },
      'password checks (bcrypt) at once per process; more wait up to 1 s, then 429',
    ),
    authConcurrentVerificationsPerClient: integer(
      'AUTH_CONCURRENT_VERIFICATIONS_PER_CLIENT',
      2,
      { min: 0, max: 10_000 },
      'password checks at once per address and per username; more: 429',
    ),
    requireOprnLogin: onOff(
      'REQUIRE_OPRNLOGIN',
      false,
      'also require the `OprnLogin` operation (the original did)',
    ),
    // NIST SP 800-63B: 8 characters at the very least, and a maximum never below 64.
    minLength: inGroup(
      'passwordPolicy',
      integer('PASSWORD_MIN_LENGTH', 12, { min: 8, max: 64 }, 'shortest password the CLI sets'),
    ),
    maxLength: inGroup(
      'passwordPolicy',
      integer('PASSWORD_MAX_LENGTH', 128, { min: 64, max: 4096 }, 'longest password the CLI sets'),
    ),
    refusesCommon: inGroup(
      'passwordPolicy',
      onOff('PASSWORD_REFUSE_COMMON', true, 'refuse common passwords in the CLI'),
    ),
  },
} satisfies ConfigSection;

const ATTACHMENTS = {
  title: 'Attachments and signatures',
  settings: {
    attachmentRequireOprnApi: onOff(
      'ATTACHMENT_REQUIRE_OPRNAPI',
      false,
      'require `OprnApi` for attachment view',
    ),
    attachmentBase64Compat: onOff(
      'ATTACHMENT_BASE64_COMPAT',
      false,
      'decode stored base64 on view like the original',
    ),
    attachmentImmutableGraceSeconds: integer(
      'ATTACHMENT_IMMUTABLE_GRACE_SECONDS',
      600,
      { min: 0, max: 31_536_000 },
      'attachments younger than this are sent `no-cache`, not `immutable`',
    ),
    thumbnailMaxDecodeMb: integer(
      'THUMBNAIL_MAX_DECODE_MB',
      256,
      { min: 1, max: 16_384 },
      'MiB that decoding one image for its thumbnails may hold where it is not streamed (interlaced PNG, progressive JPEG, GIF: width x height x channels x sample bytes; a tiled TIFF: two rows of tiles); beyond, the image is filed without thumbnails and the reason logged. Images are decoded one at a time per process',
    ),
    signRateLimitPerMinute: integer(
      'SIGN_RATE_LIMIT_PER_MINUTE',
      30,
      { min: 0, max: 1_000_000 },
      'sign/add requests per IP per minute (429)',
    ),
  },
} satisfies ConfigSection;

const LIMITS = {
  title: 'Limits and overload',
  settings: {
    signatureBodyBytes: inGroup(
      'limits',
      integer(
        'SIGN_BODY_LIMIT_BYTES',
        2 * MiB,
        { min: 1024, max: 1024 * MiB },
        'sign/add body limit (413): the JSON with the base64 signature and original capture',
        '2 MiB',
      ),
    ),
    jsonBodyBytes: inGroup(
      'limits',
      integer(
        'JSON_BODY_LIMIT_BYTES',
        1 * MiB,
        { min: 1024, max: 1024 * MiB },
        'JSON and form bodies (413)',
        '1 MiB',
      ),
    ),
    rawBodyBytes: inGroup(
      'limits',
      integer(
        'RAW_BODY_LIMIT_BYTES',
        100 * MiB,
        { min: 1024, max: 4096 * MiB },
        "raw and multipart uploads (413); unset, lowered to what MariaDB/MySQL's `max_allowed_packet` holds (below)",
        '100 MiB',
      ),
    ),
    uploadMemoryBytes: inGroup(
      'limits',
      integer(
        'UPLOAD_MEMORY_BYTES',
        256 * MiB,
        { min: 16 * MiB, max: 65536 * MiB },
        "spooled upload bytes loaded into memory at once (counted twice: the bytes and the driver's copy)",
        '256 MiB',
      ),
    ),
    rateLimitSharing: choice(
      'RATE_LIMIT_SHARING',
      'auto',
      ['auto', 'on', 'off'],
      'share rate-limit counters between processes through the database (`auto`: on with several processes or on a server database)',
    ),
    rateLimitSyncIntervalMs: integer(
      'RATE_LIMIT_SYNC_INTERVAL_MS',
      500,
      { min: 50, max: 60_000 },
      'how often shared counters are synchronised (the request path never queries)',
    ),
    maxConcurrentHeavyRequests: integer(
      'MAX_CONCURRENT_HEAVY_REQUESTS',
      64,
      { min: 0, max: 100_000 },
      'uploads/downloads served at once; beyond, a short wait then 503',
    ),
    heavyQueueTimeoutMs: integer('HEAVY_QUEUE_TIMEOUT_MS', 1000, { min: 0, max: 60_000 }, 'that wait'),
    maxRequestsPerClient: integer(
      'MAX_REQUESTS_PER_CLIENT',
      32,
      { min: 0, max: 1_000_000 },
      'requests in flight per client address (the forwarded one behind `TRUSTED_PROXIES`); more: 429 (0 = no cap)',
    ),
    headersTimeoutMs: integer(
      'HEADERS_TIMEOUT_MS',
      15_000,
      { min: 100, max: 600_000 },
      "time to receive a request's headers (408)",
    ),
    requestTimeoutMs: integer(
      'REQUEST_TIMEOUT_MS',
      600_000,
      { min: 0, max: 86_400_000 },
      'time to receive a whole request, body included (408; 0 = none)',
    ),
    bodyTimeoutMs: integer(
      'BODY_TIMEOUT_MS',
      10_000,
      { min: 100, max: 600_000 },
      'how far a body may fall behind `BODY_MIN_BYTES_PER_SECOND` (a pause) before it is cut',
    ),
    bodyMinBytesPerSecond: integer(
      'BODY_MIN_BYTES_PER_SECOND',
      16_384,
      { min: 1, max: 1024 * MiB },
      'minimum average rate of a request body; slower bodies are cut with 408',
    ),
  },
  derive: (
    _limits: unknown,
    reader: Reader,
  ): {
    limits: {
      /**
       * True when `RAW_BODY_LIMIT_BYTES` was set: a database whose statements cannot hold that much
       * refuses the start. Left at its default, the start lowers `rawBodyBytes` to what the database
       * takes instead (`db/upload-limit.ts`), and names the reason here, for 413 answers.
       */
      readonly isRawBodyBytesSet?: boolean;
      readonly rawBodyLimitReason?: string;
    };
  } => ({ limits: { isRawBodyBytesSet: reader.read('RAW_BODY_LIMIT_BYTES') !== undefined } }),
} satisfies ConfigSection;

const OBSERVABILITY = {
  title: 'Metrics and audit',
  settings: {
    metrics: choice(
      'METRICS',
      'off',
      ['off', 'on', 'basic'],
      '`/metrics`: `off`, `on`, or `basic` (Basic auth with `OprnApi`)',
    ),
    metricsToken: omittedWhenUnset(
      optional('METRICS_TOKEN', 'none', 'bearer token for `/metrics` (16+ characters)', (raw, reader) =>
        metricsToken(raw, reader.problems),
      ),
    ),
    auditReads: choice(
      'AUDIT_READS',
      'async',
      ['async', 'durable'],
      'audit rows of reads (search, attachment view, queue status): `async` commits them within `AUDIT_FLUSH_MS` after the answer; `durable` before it, as for writes',
    ),
    auditFlushMs: integer(
      'AUDIT_FLUSH_MS',
      50,
      { min: 1, max: 10_000 },
      'async read audit: a row is committed at most this long after its answer (what a crash can lose)',
    ),
    auditMaxBacklog: integer(
      'AUDIT_MAX_BACKLOG',
      10_000,
      { min: 1, max: 1_000_000 },
      'async read audit: reads answer 503 (and `/readyz` 503) while this many rows wait',
    ),
    auditMaxLagMs: integer(
      'AUDIT_MAX_LAG_MS',
      5_000,
      { min: 100, max: 3_600_000 },
      'async read audit: reads answer 503 (and `/readyz` 503) while the oldest row waits this long',
    ),
  },
} satisfies ConfigSection;

const DICOM_NETWORK = {
  title: 'DICOM receiving',
  key: 'dicomNetwork' as const,
  settings: {
    port: optional(
      'DICOM_PORT',
      'off',
      'TCP port of the DICOM C-STORE SCP (with C-ECHO); unset = no SCP (STOW-RS is always on)',
      (raw, reader) =>
        raw === undefined ? undefined : integer('DICOM_PORT', 0, { min: 0, max: 65535 }, '').parse(reader),
    ),
    aeTitle: optional(
      'DICOM_AE_TITLE',
      code('CRA'),
      "the service's AE title: the called AE title senders must use",
      (raw, reader) => aeTitle('DICOM_AE_TITLE', raw ?? 'CRA', reader.problems),
    ),
    allowedCallers: optional(
      'DICOM_ALLOWED_CALLERS',
      'none (required with `DICOM_PORT`)',
      'comma-separated calling AE titles, each `TITLE@ip-address`, `TITLE@subnet/bits` or `TITLE@*` (any address, written out); a bare `TITLE` is refused',
      (raw, reader) => dicomCallers(raw, reader.read('DICOM_PORT') !== undefined, reader.problems),
    ),
    duplicates: choice(
      'DICOM_DUPLICATES',
      'new-request',
      ['new-request', 'refuse'],
      'an instance whose SOP Instance UID arrived before: `new-request`, or `refuse` (failure 0111)',
    ),
    maxAssociations: integer(
      'DICOM_MAX_ASSOCIATIONS',
      16,
      { min: 1, max: 1000 },
      'C-STORE associations served at once per process; more are refused (transient)',
    ),
    maxAssociationsPerAe: integer(
      'DICOM_MAX_ASSOCIATIONS_PER_AE',
      8,
      { min: 1, max: 1000 },
      'associations of one calling AE title at once; more are refused (transient)',
    ),
    maxAssociationsPerAddress: integer(
      'DICOM_MAX_ASSOCIATIONS_PER_ADDRESS',
      8,
      { min: 1, max: 1000 },
      'associations from one address at once; more are refused (transient)',
    ),
    maxConnections: integer(
      'DICOM_MAX_CONNECTIONS',
      64,
      { min: 1, max: 10_000 },
      'TCP connections open on the DICOM port per process; more are closed at once',
    ),
    maxConnectionsPerAddress: integer(
      'DICOM_MAX_CONNECTIONS_PER_ADDRESS',
      16,
      { min: 1, max: 10_000 },
      'TCP connections from one address; more are closed at once',
    ),
    maxUnassociatedConnections: integer(
      'DICOM_MAX_UNASSOCIATED_CONNECTIONS',
      32,
      { min: 1, max: 10_000 },
      'connections not yet associated; a new one beyond closes the oldest',
    ),
    associationTimeoutMs: integer(
      'DICOM_ASSOCIATION_TIMEOUT_MS',
      5_000,
      { min: 100, max: 60_000 },
      'a connection sends its whole A-ASSOCIATE-RQ within this, or is closed ([limits](docs/OPERATIONS.md#dicom-port-limits))',
    ),
    remoteNodes: optional(
      'DICOM_REMOTE_NODES',
      'none',
      "comma-separated `TITLE@host:port` (`TITLE@[ipv6]:port`): where the service opens an association to a device, for a storage commitment report once the device's request association has closed ([docs/DICOM.md](docs/DICOM.md#storage-commitment))",
      (raw, reader) => dicomRemoteNodes(raw, reader.problems),
    ),
    commitmentMaxInstances: integer(
      'DICOM_COMMITMENT_MAX_INSTANCES',
      10_000,
      { min: 1, max: 100_000 },
      'instances one storage commitment request may name; more are refused with status 0213 (resource limitation)',
    ),
    qrCallers: optional(
      'DICOM_QR_CALLERS',
      'none (no caller may query)',
      'comma-separated calling AE titles that may query what the service keeps (C-FIND, Patient Root and Study Root), each `TITLE@ip-address`, `TITLE@subnet/bits` or `TITLE@*`; each must be in `DICOM_ALLOWED_CALLERS` too; any other caller has its query contexts rejected ([docs/DICOM.md](docs/DICOM.md#query-retrieve-c-find))',
      (raw, reader) => {
        const callers = dicomCallers(raw, false, reader.problems, 'DICOM_QR_CALLERS');
        // A query caller must be able to associate at all: one missing from DICOM_ALLOWED_CALLERS is a
        // configuration mistake, listed rather than silently refused at every association.
        const allowed = new Set(
          dicomCallers(reader.read('DICOM_ALLOWED_CALLERS'), false, []).map((c) => c.aeTitle),
        );
        for (const caller of callers)
          if (!allowed.has(caller.aeTitle))
            reader.problems.push(`DICOM_QR_CALLERS: "${caller.aeTitle}" is not in DICOM_ALLOWED_CALLERS`);
        return callers;
      },
    ),
    qrMaxAnswers: integer(
      'DICOM_QR_MAX_ANSWERS',
      1000,
      { min: 1, max: 100_000 },
      'answers to one query/retrieve C-FIND; a query matching more gets these, then status A700 (out of resources)',
    ),
    qrMaxRetrieve: integer(
      'DICOM_QR_MAX_RETRIEVE',
      10_000,
      { min: 1, max: 1_000_000 },
      'instances one C-MOVE or C-GET may send; a retrieve matching more is refused with status A702 (out of resources, unable to perform sub-operations) and sends nothing ([docs/DICOM.md](docs/DICOM.md#query-retrieve-c-move-and-c-get))',
    ),
    moveDestinations: optional(
      'DICOM_MOVE_DESTINATIONS',
      'none (no C-MOVE destination)',
      'comma-separated AE titles of `DICOM_REMOTE_NODES` that a C-MOVE may name as its destination; any other destination is refused with status A801 (move destination unknown) ([docs/DICOM.md](docs/DICOM.md#query-retrieve-c-move-and-c-get))',
      (raw, reader) => {
        const titles = list(raw).map((item) => aeTitle('DICOM_MOVE_DESTINATIONS', item, reader.problems));
        // A destination is reached only at the address its remote node names, never at one a caller gives.
        const nodes = new Set(dicomRemoteNodes(reader.read('DICOM_REMOTE_NODES'), []).map((n) => n.aeTitle));
        for (const title of titles)
          if (!nodes.has(title))
            reader.problems.push(`DICOM_MOVE_DESTINATIONS: "${title}" is not in DICOM_REMOTE_NODES`);
        return titles;
      },
    ),
  },
} satisfies ConfigSection;

const HL7 = {
  title: 'HL7 PAS feed',
  key: 'hl7' as const,
  settings: {
    port: optional(
      'HL7_PORT',
      'off',
      'TCP port of the HL7 v2 MLLP listener (ADT from the PAS, [connect the PAS](#connect-the-pas-hl7)); unset = no listener',
      (raw, reader) =>
        raw === undefined ? undefined : integer('HL7_PORT', 0, { min: 0, max: 65535 }, '').parse(reader),
    ),
    host: optional('HL7_HOST', 'the value of `HOST`', 'address the HL7 listener listens on', (raw) => raw),
    allowedSenders: optional(
      'HL7_ALLOWED_SENDERS',
      'none (required with `HL7_PORT`)',
      'comma-separated `APPLICATION^FACILITY@address` (MSH-3, MSH-4; `*` for any application or facility; address an IP, `ip/bits` or `*`); messages from anyone else get AR',
      (raw, reader) => hl7Senders(raw, reader.read('HL7_PORT') !== undefined, reader.problems),
    ),
    fieldMap: optional(
      'HL7_FIELD_MAP_FILE',
      'the built-in map (`PAS` and `NHS` authorities in PID-3.5 or .4, `LOCAL-1-0`)',
      "a JSON file of the site's HL7 field map, its keys over the built-in ones; checked at start ([docs/OPERATIONS.md](docs/OPERATIONS.md#hl7-field-map))",
      (raw, reader): Hl7FieldMap => {
        if (raw === undefined) return DEFAULT_FIELD_MAP;
        const outcome = readFieldMapFile(path.resolve(raw));
        reader.problems.push(...outcome.problems);
        return outcome.map;
      },
    ),
    maxMessageBytes: integer(
      'HL7_MAX_MESSAGE_BYTES',
      256 * 1024,
      { min: 1024, max: 16 * MiB },
      'longest HL7 message accepted; a sender going beyond is disconnected',
    ),
    maxConnections: integer(
      'HL7_MAX_CONNECTIONS',
      32,
      { min: 1, max: 10_000 },
      'TCP connections open on the HL7 port per process; more are closed at once',
    ),
    idleTimeoutMs: integer(
      'HL7_IDLE_TIMEOUT_MS',
      600_000,
      { min: 1_000, max: 86_400_000 },
      'an HL7 connection that sends nothing for this long is closed',
    ),
    isTls: onOff(
      'HL7_TLS',
      false,
      "MLLP inside TLS on the HL7 port, with the server's `TLS_CERT` and `TLS_KEY` (required then)",
    ),
  },
} satisfies ConfigSection;

const PAS_QUERY = {
  title: 'PAS query (a patient the service lacks)',
  key: 'pasQuery' as const,
  settings: {
    host: optional(
      'PAS_QUERY_HOST',
      'off',
      'address of the PAS\'s MLLP endpoint answering QBP^Q22 with RSP^K21 (the sites\' "PAS OUT" channel); unset = the PAS is never asked ([docs/OPERATIONS.md](docs/OPERATIONS.md#pas-query))',
      (raw, reader) => {
        if (raw === undefined && reader.read('PAS_QUERY_PORT') !== undefined)
          reader.problems.push('PAS_QUERY_PORT needs PAS_QUERY_HOST');
        if (raw !== undefined && /[\s/]/.test(raw))
          reader.problems.push(`PAS_QUERY_HOST must be a host name or an IP address, got "${raw}"`);
        return raw;
      },
    ),
    port: optional(
      'PAS_QUERY_PORT',
      'none (required with `PAS_QUERY_HOST`)',
      "TCP port of the PAS's MLLP endpoint",
      (raw, reader) => {
        if (raw === undefined) {
          if (reader.read('PAS_QUERY_HOST') !== undefined)
            reader.problems.push('PAS_QUERY_HOST needs PAS_QUERY_PORT');
          return undefined;
        }
        return integer('PAS_QUERY_PORT', 0, { min: 1, max: 65535 }, '').parse(reader);
      },
    ),
    timeoutMs: integer(
      'PAS_QUERY_TIMEOUT_MS',
      2000,
      { min: 100, max: 30_000 },
      'the longest a query may take, connection and answer together; a PAS slower than this counts as unavailable (the request waits, the search answers what it found)',
    ),
    authorities: commaList(
      'PAS_QUERY_AUTHORITIES',
      'every local authority of the HL7 field map, in its order',
      "comma-separated assigning authorities (the field map's `localIdentifiers`) whose numbers the PAS is asked for, in order; an identifier is asked under each whose identifier type's pattern it matches",
    ),
    receiver: optional(
      'PAS_QUERY_RECEIVER',
      code('PAS^PAS'),
      "`APPLICATION^FACILITY` the query's MSH-5 and MSH-6 name",
      (raw, reader) => {
        const value = raw ?? 'PAS^PAS';
        const match = /^([^|^~\\&]*)\^([^|^~\\&]*)$/.exec(value);
        if (match === null) {
          reader.problems.push(`PAS_QUERY_RECEIVER must be APPLICATION^FACILITY, got "${value}"`);
          return { application: 'PAS', facility: 'PAS' };
        }
        return { application: match[1]!, facility: match[2]! };
      },
    ),
    notFoundCacheMs: integer(
      'PAS_QUERY_NOT_FOUND_CACHE_MS',
      60_000,
      { min: 0, max: 86_400_000 },
      'how long a "not found" answer is kept, so that a device sending the same unknown identifier again does not ask the PAS again; 0 = never kept',
    ),
  },
} satisfies ConfigSection;

const WORKLIST = {
  title: 'DICOM Modality Worklist',
  key: 'worklist' as const,
  settings: {
    stations: optional(
      'DICOM_WORKLIST_STATIONS_FILE',
      'none (every allowed caller sees every worklist)',
      'a JSON file of the worklist stations by calling AE title (modality, station name, worklist definitions, site, character set); checked at start ([docs/DICOM.md](docs/DICOM.md#modality-worklist))',
      (raw, reader): readonly WorklistStation[] => {
        if (raw === undefined) return [];
        const outcome = readWorklistStationsFile(path.resolve(raw));
        reader.problems.push(...outcome.problems);
        return outcome.stations;
      },
    ),
    maxAnswers: integer(
      'DICOM_WORKLIST_MAX_ANSWERS',
      1000,
      { min: 1, max: 100_000 },
      'answers to one worklist C-FIND; a query matching more gets these, then status A700 (out of resources)',
    ),
    characterSet: choice(
      'DICOM_WORKLIST_CHARACTER_SET',
      'ISO_IR 100',
      WORKLIST_CHARACTER_SETS,
      "the worklist answers' character set when neither the query nor the station names one (`ISO_IR 100` Latin-1, `ISO_IR 192` UTF-8)",
    ),
    physicianAttribute: optional(
      'DICOM_WORKLIST_PHYSICIAN_ATTRIBUTE',
      code('Doctor'),
      "the booking attribute (`worklist_attribute.name`, any case) whose value is the worklist entry's referring physician",
      (raw) => raw ?? 'Doctor',
    ),
  },
} satisfies ConfigSection;

const CONSOLE = {
  title: 'Operations console',
  settings: {
    console: onOff('CONSOLE', true, 'the operations console at `/console/`'),
    consoleIdleMinutes: integer(
      'CONSOLE_IDLE_MINUTES',
      30,
      { min: 1, max: 1440 },
      'console sessions end after this long idle',
    ),
    consoleSessionHours: integer(
      'CONSOLE_SESSION_HOURS',
      12,
      { min: 1, max: 168 },
      'console sessions end this long after sign-in',
    ),
    consoleSessionSecret: omittedWhenUnset(
      optional(
        'CONSOLE_SESSION_SECRET',
        'kept in the database',
        'key signing console cookies (32+ characters); set the same value on every machine',
        (raw, reader) => consoleSessionSecret(raw, reader.problems),
      ),
    ),
  },
} satisfies ConfigSection;

/** Every setting, by concern, in the README's order (`npm run docs:config` writes its table from them). */
export const CONFIG_SECTIONS = [
  SERVER,
  SITE,
  QUEUE,
  DICOM,
  DEVICES,
  AUTH,
  ATTACHMENTS,
  LIMITS,
  OBSERVABILITY,
  DICOM_NETWORK,
  WORKLIST,
  HL7,
  PAS_QUERY,
  CONSOLE,
] as const satisfies readonly ConfigSection[];

/** Parses the environment into a {@link Config}, throwing a {@link ConfigError} that lists every problem. */
export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const reader: Reader = {
    read: (name) => {
      const value = env[name];
      return value === undefined || value.trim() === '' ? undefined : value.trim();
    },
    problems,
  };
  const values: Record<string, unknown> = {};
  for (const section of CONFIG_SECTIONS as readonly ConfigSection[]) {
    const target: Record<string, unknown> = section.key === undefined ? values : (values[section.key] = {});
    placeSection(section, readSection(section, reader), reader, target);
  }
  const config = values as Config;
  if (config.auditMaxLagMs <= config.auditFlushMs)
    problems.push('AUDIT_MAX_LAG_MS must be larger than AUDIT_FLUSH_MS');
  if (config.requestTimeoutMs > 0 && config.requestTimeoutMs < config.headersTimeoutMs)
    problems.push('REQUEST_TIMEOUT_MS must be 0 or at least HEADERS_TIMEOUT_MS');
  if (config.hl7.isTls && config.tls === undefined) problems.push('HL7_TLS needs TLS_CERT and TLS_KEY');
  const localAuthorities = config.hl7.fieldMap.localIdentifiers.map((e) => e.authority.toUpperCase());
  for (const authority of config.pasQuery.authorities)
    if (!localAuthorities.includes(authority.toUpperCase()))
      problems.push(
        `PAS_QUERY_AUTHORITIES: "${authority}" is not a local authority of the HL7 field map (${localAuthorities.join(', ')})`,
      );
  if (config.dicomNetwork.maxConnections < config.dicomNetwork.maxAssociations)
    problems.push('DICOM_MAX_CONNECTIONS must be at least DICOM_MAX_ASSOCIATIONS');
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

/**
 * Every setting of `section` parsed, under its key, in the section's order; a setting that reads another
 * of its section (its parser's second argument) has that one parsed first.
 */
function readSection(section: ConfigSection, reader: Reader): Record<string, unknown> {
  const parsed = new Map<string, unknown>();
  const parsing = new Set<string>();
  const others: Record<string, unknown> = {};
  const valueOf = (key: string): unknown => {
    if (parsed.has(key)) return parsed.get(key);
    if (parsing.has(key)) throw new Error(`${section.title}: the setting ${key} reads itself`);
    parsing.add(key);
    const setting = section.settings[key] as Setting<unknown, Record<string, unknown>>;
    parsed.set(key, setting.parse(reader, others));
    return parsed.get(key);
  };
  for (const key of Object.keys(section.settings))
    Object.defineProperty(others, key, { enumerable: true, get: () => valueOf(key) });
  for (const key of Object.keys(section.settings)) valueOf(key);
  return Object.fromEntries(parsed);
}

/** Puts a section's parsed values, and what it derives from them, where {@link Config} has them. */
function placeSection(
  section: ConfigSection,
  parsed: Readonly<Record<string, unknown>>,
  reader: Reader,
  target: Record<string, unknown>,
): void {
  const place = (key: string, value: unknown): void => {
    const current = target[key];
    target[key] = isRecord(current) && isRecord(value) ? { ...current, ...value } : value;
  };
  for (const [key, setting] of Object.entries(section.settings)) {
    const value = parsed[key];
    if (setting.isInput === true || (setting.isOmittedWhenUnset === true && value === undefined)) continue;
    if (setting.group === undefined) place(key, value);
    else place(setting.group, { [key]: value });
  }
  const derived = section.derive?.(parsed as never, reader) ?? {};
  for (const [key, value] of Object.entries(derived)) if (value !== undefined) place(key, value);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !Buffer.isBuffer(value);
}

/** `METRICS_TOKEN`: long enough that guessing it is hopeless. */
function metricsToken(token: string | undefined, problems: string[]): string | undefined {
  if (token !== undefined && (token.length < 16 || /\s/.test(token)))
    problems.push('METRICS_TOKEN must be at least 16 characters, no spaces');
  return token;
}

/**
 * A DICOM AE title (PS3.5, VR AE): 1 to 16 characters of the default repertoire without backslash or
 * control characters; leading and trailing spaces are not significant.
 */
function aeTitle(name: string, raw: string, problems: string[]): string {
  const title = raw.trim();
  if (!/^[\x20-\x5b\x5d-\x7e]{1,16}$/.test(title))
    problems.push(`${name} must be 1 to 16 printable ASCII characters without a backslash, got "${raw}"`);
  return title;
}

/**
 * `DICOM_ALLOWED_CALLERS`: `TITLE@address`, `TITLE@subnet/bits` or `TITLE@*` items; at least one when the
 * SCP is on. An AE title is no secret (any sender can claim one), so each item says where it may come
 * from: a bare `TITLE` is refused rather than silently allowed from anywhere, and `*` is written out.
 */
function dicomCallers(
  raw: string | undefined,
  isScpOn: boolean,
  problems: string[],
  setting = 'DICOM_ALLOWED_CALLERS',
): DicomCaller[] {
  const callers: DicomCaller[] = [];
  for (const item of list(raw)) {
    const at = item.lastIndexOf('@');
    if (at === -1) {
      problems.push(
        `${setting}: "${item}" names no address: write ${item}@<ip-address>, ${item}@<subnet>/<bits>, or ${item}@* for any address`,
      );
      continue;
    }
    const title = aeTitle(setting, item.slice(0, at), problems);
    const address = item.slice(at + 1).trim();
    if (address !== '*' && !isAddressOrSubnet(address))
      problems.push(`${setting}: "${item}" must name an IP address, a subnet (ip/bits) or * after @`);
    callers.push({ aeTitle: title, address });
  }
  if (isScpOn && callers.length === 0)
    problems.push('DICOM_ALLOWED_CALLERS must name at least one calling AE title when DICOM_PORT is set');
  return callers;
}

/**
 * `HL7_ALLOWED_SENDERS`: `APPLICATION^FACILITY@address` items; an address is required, as for DICOM
 * callers, so that knowing a PAS's MSH-3 is never enough to feed patients.
 */
function hl7Senders(raw: string | undefined, isOn: boolean, problems: string[]): Hl7Sender[] {
  const senders: Hl7Sender[] = [];
  for (const item of list(raw)) {
    const at = item.lastIndexOf('@');
    const caret = item.indexOf('^');
    if (at === -1 || caret === -1 || caret > at) {
      problems.push(`HL7_ALLOWED_SENDERS: "${item}" must be APPLICATION^FACILITY@address`);
      continue;
    }
    const application = item.slice(0, caret).trim();
    const facility = item.slice(caret + 1, at).trim();
    const address = item.slice(at + 1).trim();
    if (application === '' || facility === '' || /[|^~\\&]/.test(application + facility))
      problems.push(
        `HL7_ALLOWED_SENDERS: "${item}" needs an application and a facility (or *) without HL7 separators`,
      );
    if (address !== '*' && !isAddressOrSubnet(address))
      problems.push(
        `HL7_ALLOWED_SENDERS: "${item}" must name an IP address, a subnet (ip/bits) or * after @`,
      );
    senders.push({ application, facility, address });
  }
  if (isOn && senders.length === 0)
    problems.push('HL7_ALLOWED_SENDERS must name at least one sender when HL7_PORT is set');
  return senders;
}

/**
 * `DICOM_REMOTE_NODES`: `TITLE@host:port` items (an IPv6 address in brackets), one per AE title. The
 * service connects only to the nodes listed here, never to an address a peer names.
 */
function dicomRemoteNodes(raw: string | undefined, problems: string[]): DicomRemoteNode[] {
  const nodes: DicomRemoteNode[] = [];
  for (const item of list(raw)) {
    const at = item.lastIndexOf('@');
    const colon = item.lastIndexOf(':');
    if (at === -1 || colon < at) {
      problems.push(`DICOM_REMOTE_NODES: "${item}" must be TITLE@host:port`);
      continue;
    }
    const title = aeTitle('DICOM_REMOTE_NODES', item.slice(0, at), problems);
    let host = item.slice(at + 1, colon).trim();
    if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
    const portText = item.slice(colon + 1).trim();
    const port = Number(portText);
    if (!(
      isIP(host) !== 0 ||
      /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$/.test(
        host,
      )
    ))
      problems.push(`DICOM_REMOTE_NODES: "${item}" must name an IP address or a host name before the port`);
    if (!/^[0-9]{1,5}$/.test(portText) || port < 1 || port > 65535)
      problems.push(`DICOM_REMOTE_NODES: "${item}" must end with a port from 1 to 65535`);
    if (nodes.some((n) => n.aeTitle === title))
      problems.push(`DICOM_REMOTE_NODES: "${title}" is listed twice`);
    nodes.push({ aeTitle: title, host, port });
  }
  return nodes;
}

/** An IP address, or a subnet `ip/bits` with bits within the address family's length. */
function isAddressOrSubnet(text: string): boolean {
  const slash = text.indexOf('/');
  if (slash === -1) return isIP(text) !== 0;
  const family = isIP(text.slice(0, slash));
  const bits = text.slice(slash + 1);
  return family !== 0 && /^[0-9]{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128);
}

/** `CONSOLE_SESSION_SECRET`: long enough to be a signing key. */
function consoleSessionSecret(secret: string | undefined, problems: string[]): string | undefined {
  if (secret !== undefined && secret.length < 32)
    problems.push('CONSOLE_SESSION_SECRET must be at least 32 characters');
  return secret;
}

/** Reads and checks the PEM files of `TLS_CERT` / `TLS_KEY` (both or neither). */
function tlsFiles(
  certPath: string | undefined,
  keyPath: string | undefined,
  problems: string[],
): { tls?: { readonly cert: Buffer; readonly key: Buffer } } {
  if (certPath === undefined && keyPath === undefined) return {};
  if (certPath === undefined || keyPath === undefined) {
    problems.push('TLS_CERT and TLS_KEY must be set together');
    return {};
  }
  const readPem = (name: string, file: string): Buffer | undefined => {
    try {
      return readFileSync(file);
    } catch (error) {
      problems.push(`${name} cannot be read: ${(error as NodeJS.ErrnoException).code ?? 'error'} ${file}`);
      return undefined;
    }
  };
  const cert = readPem('TLS_CERT', certPath);
  const key = readPem('TLS_KEY', keyPath);
  if (cert === undefined || key === undefined) return {};
  let certificate: X509Certificate | undefined;
  try {
    certificate = new X509Certificate(cert);
  } catch {
    problems.push(`TLS_CERT is not a PEM certificate: ${certPath}`);
  }
  try {
    const privateKey = createPrivateKey(key);
    if (certificate !== undefined && !certificate.checkPrivateKey(privateKey)) {
      problems.push('TLS_KEY does not match the certificate of TLS_CERT');
    }
  } catch {
    problems.push(`TLS_KEY is not a PEM private key (or it is encrypted): ${keyPath}`);
  }
  return { tls: { cert, key } };
}

function list(raw: string | undefined): string[] {
  return (raw ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** The site's device profiles of `file` (none without a file); its problems are added to `problems`. */
function deviceProfilesOf(file: string | undefined, problems: string[]): readonly DeviceProfile[] {
  if (file === undefined) return [];
  const outcome = readDeviceProfilesFile(path.resolve(file));
  problems.push(...outcome.problems);
  return outcome.profiles;
}

const BACKOFF_UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Parses `2m*n@5,30m@13,6h@20` into steps; a malformed table is reported, and no step kept. */
export function parseBackoff(raw: string, problems: string[]): BackoffStep[] {
  const steps: BackoffStep[] = [];
  for (const part of raw.split(',')) {
    const match = /^(\d+)(ms|s|m|h)(\*n)?@(\d+)$/.exec(part.trim());
    if (match === null) {
      problems.push(`QUEUE_RETRY_BACKOFF must be steps like 2m*n@5,30m@13,6h@20, got "${raw}"`);
      return [];
    }
    steps.push({
      delayMs: Number(match[1]) * BACKOFF_UNIT_MS[match[2]!]!,
      isPerTry: match[3] !== undefined,
      belowTry: Number(match[4]),
    });
  }
  return steps;
}

function parseDatabaseUrl(
  url: string,
  mode: { schema: DatabaseSchema; timeZone: string },
  problems: string[],
): DatabaseTarget {
  if (mode.schema === 'openeyes' && !url.startsWith('mysql://') && !url.startsWith('mariadb://'))
    problems.push(
      'DATABASE_SCHEMA=openeyes needs a mysql:// or mariadb:// DATABASE_URL (OpenEyes runs on MariaDB/MySQL)',
    );
  if (url.startsWith('sqlite:')) {
    const file = url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
    if (file === '') {
      problems.push('DATABASE_URL sqlite: needs a file path, for example sqlite:./data/records.db');
      return { kind: 'sqlite', file: ':memory:' };
    }
    return { kind: 'sqlite', file: file === ':memory:' ? file : path.resolve(file) };
  }
  if (url.startsWith('mysql://') || url.startsWith('mariadb://')) {
    try {
      const parsed = new URL(url);
      if (parsed.hostname === '' || parsed.pathname.replace(/^\//, '') === '')
        problems.push(
          'DATABASE_URL mysql:// needs a host and a database, for example mysql://user:pass@host:3306/db',
        );
    } catch {
      problems.push('DATABASE_URL is not a valid mysql:// URL');
    }
    return {
      kind: 'mysql',
      url,
      schema: mode.schema,
      storedTimeZone: mode.schema === 'openeyes' ? mode.timeZone : 'UTC',
    };
  }
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) {
    try {
      new URL(url);
    } catch {
      problems.push('DATABASE_URL is not a valid postgres:// URL');
    }
    return { kind: 'postgres', url };
  }
  problems.push('DATABASE_URL must start with sqlite:, postgres:// or mysql:// (mariadb://)');
  return { kind: 'sqlite', file: ':memory:' };
}
