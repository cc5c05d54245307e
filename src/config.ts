/**
 * The only module that reads `process.env`. Every value is parsed and checked here, and every problem is
 * reported at once so that an operator can fix a bad deployment in one pass.
 */
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import type { DeviceProfile } from './modules/device-filing/profiles.ts';
import { readDeviceProfilesFile } from './modules/device-filing/profile-file.ts';

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

/** One step of the retry back-off table (reference 9.5). */
export interface BackoffStep {
  /** The step applies while the try count (after the failed attempt) is below this. */
  readonly belowTry: number;
  readonly delayMs: number;
  /** Multiply the delay by the try count (`2m*n`). */
  readonly isPerTry: boolean;
}

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

export interface Config {
  readonly port: number;
  readonly host: string;
  readonly database: DatabaseTarget;
  /** PostgreSQL connections per process. */
  readonly dbPoolSize: number;
  readonly filesDir: string;
  /** Load the demo dataset into a brand-new database. */
  readonly demoData: 'auto' | 'on' | 'off';
  readonly institutionCode: string;
  readonly worker: 'in-process' | 'off';
  readonly logLevel: LogLevel;
  /** How long a successful Basic verification is remembered. 0 disables the cache. */
  readonly authCacheTtlMs: number;
  /** Require `OprnLogin` in addition to `OprnApi` (the original did; reference 2.4 step 5). */
  readonly requireOprnLogin: boolean;
  /** Require `OprnApi` for attachment view (reference 7.3 step 2). */
  readonly attachmentRequireOprnApi: boolean;
  /** Attachment view decodes strict base64 like the original (reference 7.2 step 4.5); off by default. */
  readonly attachmentBase64Compat: boolean;
  /** Attachments written less than this long ago are sent `no-cache` instead of `immutable` (D40). */
  readonly attachmentImmutableGraceSeconds: number;
  /** Body limits, in bytes (reference section 15). */
  readonly limits: {
    readonly signatureBodyBytes: number;
    readonly jsonBodyBytes: number;
    readonly rawBodyBytes: number;
    /**
     * True when `RAW_BODY_LIMIT_BYTES` was set: a database whose statements cannot hold that much refuses
     * the start. Left at its default, the start lowers `rawBodyBytes` to what the database takes instead.
     */
    readonly isRawBodyBytesSet?: boolean;
    /** Why `rawBodyBytes` is below the configured limit (the database setting), named in 413 answers. */
    readonly rawBodyLimitReason?: string;
    /** Spooled upload bytes loaded into memory at once, counted twice (the bytes and the driver's copy). */
    readonly uploadMemoryBytes: number;
  };
  /** Per-IP rate limit on the open sign/add endpoint, per minute. 0 disables it. */
  readonly signRateLimitPerMinute: number;
  /** Failed logins per client address (any usernames) per minute before 429. 0 disables it. */
  readonly authFailureLimitPerMinute: number;
  /** Failed logins per (username, address) in an hour before the exponential back-off. 0 = no back-off. */
  readonly authFailureFreeAttempts: number;
  /** The longest back-off of one (username, address), in seconds. */
  readonly authFailureMaxBackoffSeconds: number;
  /** Failed logins per username (every address) per hour before 429, except from its known addresses. */
  readonly authFailureLimitPerUsername: number;
  /** Password checks (bcrypt) running at once in the process; more wait up to a second, then 429. 0 = no cap. */
  readonly authConcurrentVerifications: number;
  /** Password checks running at once per client address and per username; more: 429. 0 = no cap. */
  readonly authConcurrentVerificationsPerClient: number;
  /** Rate-limit counters shared through the database: `auto` = when SERVER_PROCESSES > 1 or on a server database. */
  readonly rateLimitSharing: 'auto' | 'on' | 'off';
  /** How often shared rate-limit counters are flushed and read back, in ms. */
  readonly rateLimitSyncIntervalMs: number;
  /** Heavy requests (uploads, imports, large attachment reads) served at once; 0 = no cap. */
  readonly maxConcurrentHeavyRequests: number;
  /** How long a heavy request waits for a slot before 503 `Retry-After: 1`, in ms. */
  readonly heavyQueueTimeoutMs: number;
  /** Requests in flight from one client address (the forwarded one behind trusted proxies); 0 = no cap. */
  readonly maxRequestsPerClient: number;
  /** Time to receive a request's headers, in ms; slower: 408 and the connection closed. */
  readonly headersTimeoutMs: number;
  /** Time to receive a whole request (headers and body), in ms; 0 = no limit. */
  readonly requestTimeoutMs: number;
  /** How far a body may fall behind `bodyMinBytesPerSecond`, in ms, before 408 and the connection closed. */
  readonly bodyTimeoutMs: number;
  /** Minimum average receive rate of a request body, in bytes per second. */
  readonly bodyMinBytesPerSecond: number;
  /** How often the server sweeps orphan protected files, in ms; 0 = never (not even at start). */
  readonly orphanSweepIntervalMs: number;
  /** Files younger than this are never swept (their transaction may still be running), in ms. */
  readonly orphanSweepGraceMs: number;
  /** Proxies whose `X-Forwarded-For` / `X-Forwarded-Proto` are believed. */
  readonly trustedProxies: readonly string[];
  /** Default `request_type` for queue add when the caller gives none (reference 8.8 step 6). */
  readonly defaultRequestType: string;
  /** IANA time zone used for "today" in ages (reference 4.7). */
  readonly timeZone: string;
  /** How long patient search keeps its reference data (identifier types, rules, settings). 0 = no cache. */
  readonly referenceCacheTtlMs: number;
  /** Queue worker: requests run in parallel per queue; 0 = the queue's `maximum_active_threads`. */
  readonly workerConcurrency: number;
  /** Queues the worker serves; empty = every queue in `request_queue`. */
  readonly workerQueues: readonly string[];
  /** Retry back-off table, from `<delay>[*n]@<below try>` steps (reference 9.5, newest branch by default). */
  readonly queueRetryBackoff: readonly BackoffStep[];
  /** Request types whose `REQUEST_BLOB.blob_data` the clean-up routine nulls after a successful attach. */
  readonly queueDropBlobRequestTypes: readonly string[];
  /** DICOM reading and image extraction (`src/modules/dicom`): limits per file, decoding threads. */
  readonly dicom: {
    /** Elements, items and fragments in one file. */
    readonly maxElements: number;
    /** Sequences nested inside each other. */
    readonly maxDepth: number;
    /** Frames extracted from one file (evenly spaced when it has more). */
    readonly maxFrames: number;
    /** Pixels (x samples) extracted from one file; a single frame over it is refused. */
    readonly maxPixels: number;
    /** Time limit of one read or extraction on a decoding thread, in ms. */
    readonly decodeTimeoutMs: number;
    /** Heap cap of each decoding thread, in MiB; also the largest file (or inflated data set) read. */
    readonly decodeMemoryMb: number;
    /** Decoding threads; 0 = one per core. */
    readonly workerThreads: number;
  };
  /**
   * `DEVICE_PROFILES_FILE`: the site's device profiles (JSON, read and checked at start), which add to or
   * replace the built-in ones of device filing; empty without the file.
   */
  readonly deviceProfiles: readonly DeviceProfile[];
  /** HTTPS served by the server itself: PEM certificate chain and key read at start (`TLS_CERT`, `TLS_KEY`). */
  readonly tls?: { readonly cert: Buffer; readonly key: Buffer };
  /** Refuse Basic credentials over plain HTTP (reference D10); on by default when NODE_ENV=production. */
  readonly requireTls: boolean;
  /** API server processes (node:cluster); `auto` = one per core. */
  readonly serverProcesses: number;
  /** `/metrics`: `off` (not served), `on` (open, or the bearer token when set), `basic` (Basic + OprnApi). */
  readonly metrics: 'off' | 'on' | 'basic';
  /** Bearer token accepted by `/metrics` (`METRICS_TOKEN`); required by `METRICS=on` when set. */
  readonly metricsToken?: string;
  /** Audit rows of reads: `async` (committed within `auditFlushMs` after the answer) or `durable` (before). */
  readonly auditReads: 'async' | 'durable';
  /** Async read audit: a row is committed at most this long after its answer, in ms. */
  readonly auditFlushMs: number;
  /** Async read audit: rows not yet committed at which reads answer 503. */
  readonly auditMaxBacklog: number;
  /** Async read audit: age of the oldest row not yet committed beyond which reads answer 503, in ms. */
  readonly auditMaxLagMs: number;
  /** The operations console at `/console/` (`CONSOLE=on|off`). */
  readonly console: boolean;
  /** Console sessions end after this long without a request (`CONSOLE_IDLE_MINUTES`). */
  readonly consoleIdleMinutes: number;
  /** Console sessions end this long after login, whatever the activity (`CONSOLE_SESSION_HOURS`). */
  readonly consoleSessionHours: number;
  /** Key that signs console cookies (`CONSOLE_SESSION_SECRET`); one kept in the database when unset. */
  readonly consoleSessionSecret?: string;
  /** Policy of passwords set with the CLI (`PASSWORD_MIN_LENGTH`, `PASSWORD_MAX_LENGTH`, `PASSWORD_REFUSE_COMMON`). */
  readonly passwordPolicy: {
    readonly minLength: number;
    readonly maxLength: number;
    readonly refusesCommon: boolean;
  };
  /** DICOM receiving: STOW-RS (always) and the C-STORE SCP (when `port` is set). */
  readonly dicomNetwork: DicomNetworkConfig;
}

/** A calling AE title allowed to open associations from an address, a subnet, or anywhere. */
export interface DicomCaller {
  readonly aeTitle: string;
  /** An IP address, a subnet in CIDR notation (`10.1.2.0/24`), or `*` for any address. */
  readonly address: string;
}

export interface DicomNetworkConfig {
  /** `DICOM_PORT`: the C-STORE SCP's TCP port; undefined = the SCP is off. */
  readonly port: number | undefined;
  /** `DICOM_AE_TITLE`: the service's AE title (the called AE title associations must name). */
  readonly aeTitle: string;
  /** `DICOM_ALLOWED_CALLERS`: `TITLE@address`, `TITLE@subnet/bits` or `TITLE@*`, comma-separated. */
  readonly allowedCallers: readonly DicomCaller[];
  /** `DICOM_DUPLICATES`: an instance whose SOP Instance UID was received before: a new request, or refused. */
  readonly duplicates: 'new-request' | 'refuse';
  /** `DICOM_MAX_ASSOCIATIONS`: associations served at once; more are refused (local limit exceeded). */
  readonly maxAssociations: number;
  /** `DICOM_MAX_ASSOCIATIONS_PER_AE`: associations of one calling AE title at once. */
  readonly maxAssociationsPerAe: number;
  /** `DICOM_MAX_ASSOCIATIONS_PER_ADDRESS`: associations from one peer address at once. */
  readonly maxAssociationsPerAddress: number;
  /** `DICOM_MAX_CONNECTIONS`: TCP connections open on the DICOM port; more are closed at once. */
  readonly maxConnections: number;
  /** `DICOM_MAX_CONNECTIONS_PER_ADDRESS`: TCP connections from one peer address. */
  readonly maxConnectionsPerAddress: number;
  /** `DICOM_MAX_UNASSOCIATED_CONNECTIONS`: connections not yet associated; a new one closes the oldest. */
  readonly maxUnassociatedConnections: number;
  /** `DICOM_ASSOCIATION_TIMEOUT_MS`: time from connection to a whole A-ASSOCIATE-RQ; then it is closed. */
  readonly associationTimeoutMs: number;
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

/** Parses the environment into a {@link Config}, throwing a {@link ConfigError} that lists every problem. */
export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const read = (name: string): string | undefined => {
    const value = env[name];
    return value === undefined || value.trim() === '' ? undefined : value.trim();
  };
  const int = (name: string, fallback: number, min: number, max: number): number => {
    const raw = read(name);
    if (raw === undefined) return fallback;
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      problems.push(`${name} must be a whole number from ${min} to ${max}, got "${raw}"`);
      return fallback;
    }
    return Number(raw);
  };
  const oneOf = <T extends string>(name: string, fallback: T, choices: readonly T[]): T => {
    const raw = read(name);
    if (raw === undefined) return fallback;
    const lower = raw.toLowerCase() as T;
    if (!choices.includes(lower)) {
      problems.push(`${name} must be one of ${choices.join(', ')}, got "${raw}"`);
      return fallback;
    }
    return lower;
  };
  const flag = (name: string, fallback: boolean): boolean => {
    const raw = read(name);
    if (raw === undefined) return fallback;
    const lower = raw.toLowerCase();
    if (['1', 'true', 'on', 'yes'].includes(lower)) return true;
    if (['0', 'false', 'off', 'no'].includes(lower)) return false;
    problems.push(`${name} must be on or off, got "${raw}"`);
    return fallback;
  };
  const MiB = 1024 * 1024;

  const institutionCode = read('INSTITUTION_CODE') ?? 'NEW';
  if (institutionCode.length > 10) problems.push('INSTITUTION_CODE must be at most 10 characters');
  const timeZone = read('TIME_ZONE') ?? Intl.DateTimeFormat().resolvedOptions().timeZone;
  try {
    new Intl.DateTimeFormat('en-GB', { timeZone });
  } catch {
    problems.push(`TIME_ZONE must be an IANA time zone, got "${timeZone}"`);
  }
  const databaseSchema = oneOf<DatabaseSchema>('DATABASE_SCHEMA', 'own', ['own', 'openeyes']);
  const database = parseDatabaseUrl(
    read('DATABASE_URL') ?? 'sqlite:./data/records.db',
    { schema: databaseSchema, timeZone },
    problems,
  );
  const isOpenEyes = database.kind === 'mysql' && database.schema === 'openeyes';

  const config: Config = {
    port: int('PORT', 8080, 0, 65535),
    host: read('HOST') ?? '0.0.0.0',
    database,
    dbPoolSize: int('DB_POOL_SIZE', 20, 1, 500),
    filesDir: path.resolve(read('FILES_DIR') ?? './data/files'),
    demoData: oneOf('DEMO_DATA', 'auto', ['auto', 'on', 'off']),
    institutionCode,
    worker: oneOf('WORKER', 'in-process', ['in-process', 'off']),
    logLevel: oneOf<LogLevel>('LOG_LEVEL', 'info', [
      'fatal',
      'error',
      'warn',
      'info',
      'debug',
      'trace',
      'silent',
    ]),
    authCacheTtlMs: int('AUTH_CACHE_TTL_MS', 60_000, 0, 3_600_000),
    requireOprnLogin: flag('REQUIRE_OPRNLOGIN', false),
    attachmentRequireOprnApi: flag('ATTACHMENT_REQUIRE_OPRNAPI', false),
    attachmentBase64Compat: flag('ATTACHMENT_BASE64_COMPAT', false),
    attachmentImmutableGraceSeconds: int('ATTACHMENT_IMMUTABLE_GRACE_SECONDS', 600, 0, 31_536_000),
    limits: {
      signatureBodyBytes: int('SIGN_BODY_LIMIT_BYTES', 10 * MiB, 1024, 1024 * MiB),
      jsonBodyBytes: int('JSON_BODY_LIMIT_BYTES', 1 * MiB, 1024, 1024 * MiB),
      rawBodyBytes: int('RAW_BODY_LIMIT_BYTES', 100 * MiB, 1024, 4096 * MiB),
      isRawBodyBytesSet: read('RAW_BODY_LIMIT_BYTES') !== undefined,
      uploadMemoryBytes: int('UPLOAD_MEMORY_BYTES', 256 * MiB, 16 * MiB, 65536 * MiB),
    },
    signRateLimitPerMinute: int('SIGN_RATE_LIMIT_PER_MINUTE', 30, 0, 1_000_000),
    authFailureLimitPerMinute: int('AUTH_FAILURE_LIMIT_PER_MINUTE', 10, 0, 1_000_000),
    authFailureFreeAttempts: int('AUTH_FAILURE_FREE_ATTEMPTS', 5, 0, 1_000_000),
    authFailureMaxBackoffSeconds: int('AUTH_FAILURE_MAX_BACKOFF_SECONDS', 900, 1, 86_400),
    authFailureLimitPerUsername: int('AUTH_FAILURE_LIMIT_PER_USERNAME', 100, 0, 1_000_000),
    authConcurrentVerifications: int('AUTH_CONCURRENT_VERIFICATIONS', 4, 0, 10_000),
    authConcurrentVerificationsPerClient: int('AUTH_CONCURRENT_VERIFICATIONS_PER_CLIENT', 2, 0, 10_000),
    rateLimitSharing: oneOf('RATE_LIMIT_SHARING', 'auto', ['auto', 'on', 'off']),
    rateLimitSyncIntervalMs: int('RATE_LIMIT_SYNC_INTERVAL_MS', 500, 50, 60_000),
    maxConcurrentHeavyRequests: int('MAX_CONCURRENT_HEAVY_REQUESTS', 64, 0, 100_000),
    heavyQueueTimeoutMs: int('HEAVY_QUEUE_TIMEOUT_MS', 1000, 0, 60_000),
    maxRequestsPerClient: int('MAX_REQUESTS_PER_CLIENT', 32, 0, 1_000_000),
    headersTimeoutMs: int('HEADERS_TIMEOUT_MS', 15_000, 100, 600_000),
    requestTimeoutMs: int('REQUEST_TIMEOUT_MS', 600_000, 0, 86_400_000),
    bodyTimeoutMs: int('BODY_TIMEOUT_MS', 10_000, 100, 600_000),
    bodyMinBytesPerSecond: int('BODY_MIN_BYTES_PER_SECOND', 16_384, 1, 1024 * MiB),
    // Off by default on an OpenEyes database: its files directory is OpenEyes's too.
    orphanSweepIntervalMs: int('ORPHAN_SWEEP_INTERVAL_MS', isOpenEyes ? 0 : 600_000, 0, 86_400_000),
    orphanSweepGraceMs: int('ORPHAN_SWEEP_GRACE_MS', 900_000, 0, 86_400_000),
    trustedProxies: (read('TRUSTED_PROXIES') ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== ''),
    defaultRequestType: read('DEFAULT_REQUEST_TYPE') ?? 'dicom_request',
    timeZone,
    referenceCacheTtlMs: int('REFERENCE_CACHE_TTL_MS', 5_000, 0, 3_600_000),
    workerConcurrency: int('WORKER_CONCURRENCY', 0, 0, 1000),
    workerQueues: list(read('WORKER_QUEUES')),
    queueRetryBackoff: parseBackoff(read('QUEUE_RETRY_BACKOFF') ?? '2m*n@5,30m@13,6h@20', problems),
    queueDropBlobRequestTypes: list(read('QUEUE_DROP_BLOB_REQUEST_TYPES')),
    dicom: {
      maxElements: int('DICOM_MAX_ELEMENTS', 200_000, 100, 100_000_000),
      maxDepth: int('DICOM_MAX_DEPTH', 32, 1, 1000),
      maxFrames: int('DICOM_MAX_FRAMES', 16, 1, 100_000),
      maxPixels: int('DICOM_MAX_PIXELS', 32 * MiB, 1, 2 ** 31),
      decodeTimeoutMs: int('DICOM_DECODE_TIMEOUT_MS', 20_000, 100, 50_000),
      decodeMemoryMb: int('DICOM_DECODE_MEMORY_MB', 512, 64, 16_384),
      workerThreads: int('DICOM_WORKER_THREADS', 0, 0, 256),
    },
    deviceProfiles: deviceProfilesOf(read('DEVICE_PROFILES_FILE'), problems),
    ...tlsFiles(read('TLS_CERT'), read('TLS_KEY'), problems),
    requireTls: flag('REQUIRE_TLS', read('NODE_ENV') === 'production'),
    serverProcesses:
      read('SERVER_PROCESSES')?.toLowerCase() === 'auto'
        ? availableParallelism()
        : int('SERVER_PROCESSES', 1, 1, 256),
    metrics: oneOf('METRICS', 'off', ['off', 'on', 'basic']),
    ...metricsToken(read('METRICS_TOKEN'), problems),
    auditReads: oneOf('AUDIT_READS', 'async', ['async', 'durable']),
    auditFlushMs: int('AUDIT_FLUSH_MS', 50, 1, 10_000),
    auditMaxBacklog: int('AUDIT_MAX_BACKLOG', 10_000, 1, 1_000_000),
    auditMaxLagMs: int('AUDIT_MAX_LAG_MS', 5_000, 100, 3_600_000),
    dicomNetwork: {
      port: read('DICOM_PORT') === undefined ? undefined : int('DICOM_PORT', 0, 0, 65535),
      aeTitle: aeTitle('DICOM_AE_TITLE', read('DICOM_AE_TITLE') ?? 'CRA', problems),
      allowedCallers: dicomCallers(read('DICOM_ALLOWED_CALLERS'), read('DICOM_PORT') !== undefined, problems),
      duplicates: oneOf('DICOM_DUPLICATES', 'new-request', ['new-request', 'refuse']),
      maxAssociations: int('DICOM_MAX_ASSOCIATIONS', 16, 1, 1000),
      maxAssociationsPerAe: int('DICOM_MAX_ASSOCIATIONS_PER_AE', 8, 1, 1000),
      maxAssociationsPerAddress: int('DICOM_MAX_ASSOCIATIONS_PER_ADDRESS', 8, 1, 1000),
      maxConnections: int('DICOM_MAX_CONNECTIONS', 64, 1, 10_000),
      maxConnectionsPerAddress: int('DICOM_MAX_CONNECTIONS_PER_ADDRESS', 16, 1, 10_000),
      maxUnassociatedConnections: int('DICOM_MAX_UNASSOCIATED_CONNECTIONS', 32, 1, 10_000),
      associationTimeoutMs: int('DICOM_ASSOCIATION_TIMEOUT_MS', 5_000, 100, 60_000),
    },
    console: flag('CONSOLE', true),
    consoleIdleMinutes: int('CONSOLE_IDLE_MINUTES', 30, 1, 1440),
    consoleSessionHours: int('CONSOLE_SESSION_HOURS', 12, 1, 168),
    ...consoleSessionSecret(read('CONSOLE_SESSION_SECRET'), problems),
    // NIST SP 800-63B: 8 characters at the very least, and a maximum never below 64.
    passwordPolicy: {
      minLength: int('PASSWORD_MIN_LENGTH', 12, 8, 64),
      maxLength: int('PASSWORD_MAX_LENGTH', 128, 64, 4096),
      refusesCommon: flag('PASSWORD_REFUSE_COMMON', true),
    },
  };
  if (config.auditMaxLagMs <= config.auditFlushMs)
    problems.push('AUDIT_MAX_LAG_MS must be larger than AUDIT_FLUSH_MS');
  if (config.requestTimeoutMs > 0 && config.requestTimeoutMs < config.headersTimeoutMs)
    problems.push('REQUEST_TIMEOUT_MS must be 0 or at least HEADERS_TIMEOUT_MS');
  if (config.dicomNetwork.maxConnections < config.dicomNetwork.maxAssociations)
    problems.push('DICOM_MAX_CONNECTIONS must be at least DICOM_MAX_ASSOCIATIONS');
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

/** `METRICS_TOKEN`: long enough that guessing it is hopeless. */
function metricsToken(token: string | undefined, problems: string[]): { metricsToken?: string } {
  if (token === undefined) return {};
  if (token.length < 16 || /\s/.test(token))
    problems.push('METRICS_TOKEN must be at least 16 characters, no spaces');
  return { metricsToken: token };
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
function dicomCallers(raw: string | undefined, isScpOn: boolean, problems: string[]): DicomCaller[] {
  const callers: DicomCaller[] = [];
  for (const item of list(raw)) {
    const at = item.lastIndexOf('@');
    if (at === -1) {
      problems.push(
        `DICOM_ALLOWED_CALLERS: "${item}" names no address: write ${item}@<ip-address>, ${item}@<subnet>/<bits>, or ${item}@* for any address`,
      );
      continue;
    }
    const title = aeTitle('DICOM_ALLOWED_CALLERS', item.slice(0, at), problems);
    const address = item.slice(at + 1).trim();
    if (address !== '*' && !isAddressOrSubnet(address))
      problems.push(
        `DICOM_ALLOWED_CALLERS: "${item}" must name an IP address, a subnet (ip/bits) or * after @`,
      );
    callers.push({ aeTitle: title, address });
  }
  if (isScpOn && callers.length === 0)
    problems.push('DICOM_ALLOWED_CALLERS must name at least one calling AE title when DICOM_PORT is set');
  return callers;
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
function consoleSessionSecret(
  secret: string | undefined,
  problems: string[],
): { consoleSessionSecret?: string } {
  if (secret === undefined) return {};
  if (secret.length < 32) problems.push('CONSOLE_SESSION_SECRET must be at least 32 characters');
  return { consoleSessionSecret: secret };
}

/** Reads and checks the PEM files of `TLS_CERT` / `TLS_KEY` (both or neither). */
function tlsFiles(
  certPath: string | undefined,
  keyPath: string | undefined,
  problems: string[],
): { tls?: { cert: Buffer; key: Buffer } } {
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
