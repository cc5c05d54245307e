/**
 * Benchmark harness: prepares a database, starts the real server (or another entry point) as a child
 * process, starts a "floor" (a bare `node:http` server in its own child process answering the very same
 * bytes), drives both with autocannon on 127.0.0.1, samples the server's RSS, prints a table and saves
 * JSON results under `bench/results/`. Every bench file `bench/<name>.ts` exports
 * `run(options: BenchRunOptions): Promise<BenchReport>` and is started by `npm run bench -- <name>`.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import mysql from 'mysql2/promise';
import pg from 'pg';
import type { Dialect } from '../src/db/database.ts';
import type { Database } from '../src/db/database.ts';
import { openDatabase } from '../src/db/database.ts';
import { mysqlConnectionOptions } from '../src/db/dialects/mysql.ts';
import { loadConfig } from '../src/config.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import type { FileStore } from '../src/files/file-store.ts';
import { createLocalFileStore } from '../src/files/file-store.ts';
import { createAccount } from '../src/modules/user/index.ts';

export type { Dialect } from '../src/db/database.ts';

/** The repository root (the parent of `bench/`). */
export const ROOT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * The Node flags of `npm start` (package.json), so that the bench measures the server as it is deployed
 * (e.g. `--max-semi-space-size`, which bounds the memory of V8's young generation).
 */
export const START_NODE_FLAGS: readonly string[] = startNodeFlagsOf(ROOT_DIR);

/** The Node flags of `npm start` in the checkout at `root` (its package.json). */
export function startNodeFlagsOf(root: string): readonly string[] {
  const manifest = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  return (manifest.scripts.start ?? '').split(/\s+/).filter((word) => word.startsWith('--'));
}

/** The environment assignments of `npm start` (e.g. `MALLOC_MMAP_THRESHOLD_`), applied to the servers started. */
export const START_ENV: Readonly<Record<string, string>> = Object.fromEntries(
  (
    JSON.parse(readFileSync(path.join(ROOT_DIR, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    }
  ).scripts
    .start!.split(/\s+/)
    .map((word) => /^([A-Z_][A-Z0-9_]*)=(\S*)$/.exec(word))
    .filter((match) => match !== null)
    .map((match) => [match[1]!, match[2]!]),
);
export const RESULTS_DIR = path.join(ROOT_DIR, 'bench', 'results');
const DEFAULT_BENCH_DATABASE_URL = 'postgres://postgres:postgres@127.0.0.1:5432/postgres';

/** The PostgreSQL server used by benches: `BENCH_DATABASE_URL`, any database on it (used as admin). */
export function benchDatabaseUrl(): string {
  return process.env.BENCH_DATABASE_URL ?? DEFAULT_BENCH_DATABASE_URL;
}

const DEFAULT_BENCH_MYSQL_URL = 'mysql://cra:cra@127.0.0.1:3307/cra_ci';

/** The MariaDB/MySQL server used by benches: `BENCH_MYSQL_URL`, an account that may create databases. */
export function benchMysqlUrl(): string {
  return process.env.BENCH_MYSQL_URL ?? DEFAULT_BENCH_MYSQL_URL;
}

/** Runs one statement as the MariaDB/MySQL bench account. */
async function runMysqlAdmin(statement: string): Promise<void> {
  const connection = await mysql.createConnection({
    ...mysqlConnectionOptions(benchMysqlUrl()),
    charset: 'utf8mb4',
  });
  try {
    await connection.query(statement);
  } finally {
    await connection.end();
  }
}

// ---------------------------------------------------------------------------------------------------
// Options every bench receives

export interface BenchRunOptions {
  readonly dialect: Dialect;
  /** Measured seconds per load run. */
  readonly durationSeconds: number;
  /** Connection counts to measure, e.g. [1, 32]. */
  readonly connections: readonly number[];
  /** Seconds of unmeasured load before each measured run. */
  readonly warmupSeconds: number;
}

export interface BenchReport {
  readonly rows: readonly BenchRow[];
  /** Lines printed under the table and saved with the results (targets met or missed, caveats). */
  readonly notes?: readonly string[];
}

// ---------------------------------------------------------------------------------------------------
// Databases

export interface PrepareDatabaseOptions {
  /**
   * Keep the database between runs under this name (letters, digits, underscore): SQLite file
   * `$BENCH_DATA_DIR/<name>.db` (default `bench/data/`), PostgreSQL database `cra_bench_<name>`.
   * `fill` runs only when it is built; `BENCH_REBUILD=1` drops and rebuilds it. An existing database can
   * also be named by `BENCH_DB_<NAME>_SQLITE` (a file path) / `BENCH_DB_<NAME>_POSTGRES` (a URL), with
   * its protected files in `BENCH_DB_<NAME>_<DIALECT>_FILES`: it is then used as it is (migrated, never
   * filled, never dropped).
   */
  readonly persistentName?: string;
  /** Fills a newly built database (e.g. a million patients). Not run on a reused database. */
  readonly fill?: (database: Database, context: PrepareContext) => Promise<void>;
  /** Runs on every prepare, after `fill` (e.g. make sure the bench account exists). */
  readonly setup?: (database: Database, context: PrepareContext) => Promise<void>;
  /**
   * `false`: leave the new database empty, for another checkout's server to migrate (its migrations may
   * differ from this checkout's); `fill` and `setup` then run on the empty database. Default true.
   */
  readonly migrate?: boolean;
}

/** What `fill` and `setup` get besides the database: the protected files the server will use. */
export interface PrepareContext {
  readonly filesDir: string;
  readonly files: FileStore;
  /** The `DATABASE_URL` of the database. */
  readonly url: string;
}

export interface PreparedDatabase {
  readonly dialect: Dialect;
  /** The `DATABASE_URL` of the database. */
  readonly url: string;
  /** Environment for a server child process: DATABASE_URL and FILES_DIR. */
  readonly env: Record<string, string>;
  /** The server's FILES_DIR. */
  readonly filesDir: string;
  /** True when `fill` ran in this call. */
  readonly wasFilled: boolean;
  /** Drops a temporary database and its files directory; does nothing to a kept one. */
  cleanup(): Promise<void>;
}

/**
 * A migrated database of `dialect` for a bench: a fresh temporary one by default, or a kept one (see
 * {@link PrepareDatabaseOptions.persistentName}). The bench process closes its own connection before
 * returning, so only the server under test holds the database during a run.
 */
export async function prepareDatabase(
  dialect: Dialect,
  options: PrepareDatabaseOptions = {},
): Promise<PreparedDatabase> {
  const name = options.persistentName;
  if (name !== undefined && !/^\w+$/.test(name)) throw new Error(`bad persistentName "${name}"`);
  const given =
    name === undefined ? undefined : process.env[`BENCH_DB_${name.toUpperCase()}_${dialect.toUpperCase()}`];
  const isRebuild = process.env.BENCH_REBUILD === '1';

  let url: string;
  let filesDir: string;
  let isNew: boolean;
  let markReady = async () => {};
  let cleanup = async () => {};

  if (given !== undefined && given.trim() !== '') {
    url = dialect === 'sqlite' && !given.startsWith('sqlite:') ? `sqlite:${path.resolve(given)}` : given;
    if (dialect === 'sqlite' && !existsSync(url.slice('sqlite:'.length))) {
      throw new Error(`BENCH_DB_${name!.toUpperCase()}_SQLITE names a file that does not exist: ${given}`);
    }
    const givenFiles = process.env[`BENCH_DB_${name!.toUpperCase()}_${dialect.toUpperCase()}_FILES`];
    isNew = false;
    if (givenFiles !== undefined && givenFiles.trim() !== '') {
      filesDir = path.resolve(givenFiles);
    } else {
      const tempFiles = await mkdtemp(path.join(tmpdir(), 'cra-bench-files-'));
      filesDir = tempFiles;
      cleanup = () => rm(tempFiles, { recursive: true, force: true });
    }
  } else if (name !== undefined) {
    const dataDir = path.resolve(process.env.BENCH_DATA_DIR ?? path.join(ROOT_DIR, 'bench', 'data'));
    filesDir = path.join(dataDir, `${name}-${dialect}-files`);
    if (dialect === 'sqlite') {
      const file = path.join(dataDir, `${name}.db`);
      const marker = `${file}.ready`;
      await mkdir(dataDir, { recursive: true });
      isNew = isRebuild || !existsSync(marker);
      if (isNew) {
        for (const f of [file, `${file}-wal`, `${file}-shm`, marker]) await rm(f, { force: true });
        await rm(filesDir, { recursive: true, force: true });
      }
      url = `sqlite:${file}`;
      markReady = () => writeFile(marker, `${new Date().toISOString()}\n`);
    } else if (dialect === 'mysql') {
      // MariaDB keeps no comment on a database: a marker file beside the SQLite ones says it is complete.
      const dbName = `cra_bench_${name.toLowerCase()}`;
      const marker = path.join(dataDir, `${name}-mysql.ready`);
      await mkdir(dataDir, { recursive: true });
      url = withDatabaseName(benchMysqlUrl(), dbName);
      isNew = isRebuild || !existsSync(marker);
      if (isNew) {
        await rm(marker, { force: true });
        await runMysqlAdmin(`drop database if exists \`${dbName}\``);
        await runMysqlAdmin(`create database \`${dbName}\` character set utf8mb4 collate utf8mb4_unicode_ci`);
        await rm(filesDir, { recursive: true, force: true });
      }
      markReady = () => writeFile(marker, `${new Date().toISOString()}\n`);
    } else {
      const dbName = `cra_bench_${name.toLowerCase()}`;
      url = withDatabaseName(benchDatabaseUrl(), dbName);
      const state = await withAdmin(async (admin) => {
        const found = await admin.query<{ comment: string | null }>(
          `select shobj_description(oid, 'pg_database') as comment from pg_database where datname = $1`,
          [dbName],
        );
        return found.rows.length === 0
          ? 'absent'
          : found.rows[0]!.comment === 'cra-bench ready'
            ? 'ready'
            : 'partial';
      });
      isNew = isRebuild || state !== 'ready';
      if (isNew) {
        await withAdmin(async (admin) => {
          await admin.query(`drop database if exists ${dbName} with (force)`);
          await admin.query(`create database ${dbName}`);
        });
        await rm(filesDir, { recursive: true, force: true });
      }
      markReady = async () => {
        await withAdmin((admin) => admin.query(`comment on database ${dbName} is 'cra-bench ready'`));
      };
    }
  } else {
    const dir = await mkdtemp(path.join(tmpdir(), 'cra-bench-'));
    filesDir = path.join(dir, 'files');
    isNew = true;
    if (dialect === 'sqlite') {
      url = `sqlite:${path.join(dir, 'bench.db')}`;
      cleanup = () => rm(dir, { recursive: true, force: true });
    } else if (dialect === 'mysql') {
      const dbName = `cra_bench_tmp_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
      await runMysqlAdmin(`create database \`${dbName}\` character set utf8mb4 collate utf8mb4_unicode_ci`);
      url = withDatabaseName(benchMysqlUrl(), dbName);
      cleanup = async () => {
        await runMysqlAdmin(`drop database if exists \`${dbName}\``);
        await rm(dir, { recursive: true, force: true });
      };
    } else {
      const dbName = `cra_bench_tmp_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
      await withAdmin(async (admin) => {
        await dropAbandonedDatabases(admin);
        await admin.query(`create database ${dbName}`);
      });
      url = withDatabaseName(benchDatabaseUrl(), dbName);
      cleanup = async () => {
        await withAdmin((admin) => admin.query(`drop database if exists ${dbName} with (force)`));
        await rm(dir, { recursive: true, force: true });
      };
    }
  }

  const database = await openDatabase(urlToTarget(url), { poolSize: 4 });
  const context: PrepareContext = { filesDir, files: createLocalFileStore(filesDir), url };
  let wasFilled = false;
  try {
    if (options.migrate !== false) await migrateToLatest(database);
    if (isNew && options.fill !== undefined) {
      await options.fill(database, context);
      wasFilled = true;
    }
    if (isNew) await markReady();
    if (options.setup !== undefined) await options.setup(database, context);
  } catch (error) {
    await database.close();
    if (name === undefined) await cleanup();
    throw error;
  }
  await database.close();
  return {
    dialect,
    url,
    env: { DATABASE_URL: url, FILES_DIR: filesDir },
    filesDir,
    wasFilled,
    cleanup,
  };
}

/** The account every bench authenticates as (holds `API access`, hence `OprnApi`). */
export const BENCH_ACCOUNT = { username: 'bench', password: 'bench:Secret-123' } as const;

/** `Authorization` header value of {@link BENCH_ACCOUNT}. */
export const BENCH_AUTHORIZATION = `Basic ${Buffer.from(`${BENCH_ACCOUNT.username}:${BENCH_ACCOUNT.password}`).toString('base64')}`;

/** Creates {@link BENCH_ACCOUNT} unless it exists (use it in `setup`). */
export async function ensureBenchAccount(database: Database): Promise<void> {
  const existing = await database.db
    .selectFrom('user_authentication')
    .select('id')
    .where('username', '=', BENCH_ACCOUNT.username)
    .executeTakeFirst();
  if (existing === undefined) await createAccount(database.db, { ...BENCH_ACCOUNT, roles: ['API access'] });
}

/**
 * Inserts a request holding one `attachment_data` row of `bytes` random bytes (a `BENCH_BLOB` payload
 * that attachment view serves) and returns the row's id. `lastModifiedDate` settles it (outside the
 * grace period, so that answers carry the immutable cache header).
 */
export async function insertBenchBlob(
  database: Database,
  bytes: number,
  lastModifiedDate?: string,
): Promise<number> {
  const request = await database.db
    .insertInto('request')
    .values({ request_type: 'dicom_request', system_message: 'bench' })
    .returning('id')
    .executeTakeFirstOrThrow();
  const row = await database.db
    .insertInto('attachment_data')
    .values({
      request_id: request.id,
      attachment_mnemonic: 'BENCH_BLOB',
      attachment_type: 'NONE',
      mime_type: 'application/octet-stream',
      blob_data: randomBytes(bytes),
      ...(lastModifiedDate === undefined ? {} : { last_modified_date: lastModifiedDate }),
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

/** A patient that `PATIENT_MATCH` finds: a hospital number, date of birth and sex. */
export interface MatchablePatient {
  readonly patientId: number;
  /** The hospital number, 7 digits. */
  readonly hosNum: string;
  /** `YYYY-MM-DD` */
  readonly dob: string;
  readonly sex: 'F';
}

/**
 * Inserts `count` patients (Bench PatientN, born 1980-01-02, F) with hospital numbers 0000001,
 * 0000002, ... under a LOCAL identifier type (validate_regex digits, pad `%07s`) of a new institution, as
 * a site's PAS would have them, so that queue requests naming them match (use in `setup` or `fill`).
 */
export async function insertMatchablePatients(
  database: Database,
  count: number,
): Promise<MatchablePatient[]> {
  const institution = await database.db
    .insertInto('institution')
    .values({ name: 'Bench', remote_id: 'BENCH', short_name: 'Bench' })
    .returning('id')
    .executeTakeFirstOrThrow();
  const type = await database.db
    .insertInto('patient_identifier_type')
    .values({
      usage_type: 'LOCAL',
      short_title: 'Hos Num',
      long_title: 'Hospital Number',
      institution_id: institution.id,
      validate_regex: '/^([0-9]{1,9})$/',
      pad: '%07s',
      unique_row_string: 'bench-local',
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  const patients: MatchablePatient[] = [];
  for (let i = 1; i <= count; i += 1) {
    const contact = await database.db
      .insertInto('contact')
      .values({ first_name: 'Bench', last_name: `Patient${i}`, title: null })
      .returning('id')
      .executeTakeFirstOrThrow();
    const patient = await database.db
      .insertInto('patient')
      .values({ contact_id: contact.id, dob: '1980-01-02', gender: 'F' })
      .returning('id')
      .executeTakeFirstOrThrow();
    const hosNum = String(i).padStart(7, '0');
    await database.db
      .insertInto('patient_identifier')
      .values({
        patient_id: patient.id,
        patient_identifier_type_id: type.id,
        value: hosNum,
        unique_row_string: `bench-${i}`,
      })
      .execute();
    patients.push({ patientId: patient.id, hosNum, dob: '1980-01-02', sex: 'F' });
  }
  return patients;
}

function urlToTarget(url: string) {
  return loadConfig({ DATABASE_URL: url }).database;
}

function withDatabaseName(serverUrl: string, dbName: string): string {
  const target = new URL(serverUrl);
  target.pathname = `/${dbName}`;
  return target.toString();
}

async function withAdmin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const admin = new pg.Client({ connectionString: benchDatabaseUrl() });
  try {
    await admin.connect();
  } catch (error) {
    throw new Error(
      `PostgreSQL is not reachable at BENCH_DATABASE_URL (${redact(benchDatabaseUrl())}); start it or pass --dialect sqlite`,
      { cause: error },
    );
  }
  try {
    return await work(admin);
  } finally {
    await admin.end();
  }
}

/** Drops temporary bench databases left by a bench process that no longer runs (an interrupted run). */
async function dropAbandonedDatabases(admin: pg.Client): Promise<void> {
  const found = await admin.query<{ datname: string }>(
    `select datname from pg_database where datname like 'cra\\_bench\\_tmp\\_%'`,
  );
  for (const { datname } of found.rows) {
    const pid = Number(/^cra_bench_tmp_(\d+)_/.exec(datname)?.[1]);
    if (Number.isInteger(pid) && pid > 0 && !isProcessAlive(pid)) {
      await admin.query(`drop database if exists ${datname} with (force)`);
    }
  }
}

function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    return u.toString();
  } catch {
    return '(unparsable URL)';
  }
}

// ---------------------------------------------------------------------------------------------------
// Child processes: the server under test and the floor

/** Every child still running: killed if the bench process exits without stopping them (a crash). */
const liveChildren = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of liveChildren) child.kill('SIGKILL');
});
// A bench stopped by a signal goes through 'exit' too (the default action would skip it).
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => process.exit(signal === 'SIGINT' ? 130 : 143));
}

/** Registers `child` so that it never outlives the bench. */
export function ownChild<C extends ChildProcess>(child: C): C {
  liveChildren.add(child);
  child.once('exit', () => liveChildren.delete(child));
  return child;
}

export interface RunningProcess {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  readonly pid: number;
  /** Current resident set size (VmRSS of /proc/<pid>/status). */
  rssBytes(): Promise<number>;
  /** SIGTERM, then wait for exit (SIGKILL after 10 s). */
  stop(): Promise<void>;
}

export interface StartServerOptions {
  /** Environment on top of the defaults (usually `prepared.env`). */
  readonly env?: Record<string, string>;
  /** Entry file relative to the repository root; default `src/main/server.ts`. */
  readonly entry?: string;
  /** Node flags instead of this checkout's `npm start` ones (e.g. another checkout's). */
  readonly nodeFlags?: readonly string[];
  /** Load the demo data (DEMO_DATA=on); off by default. */
  readonly demoData?: boolean;
  /** The server's stdout (its log): shown (default) or dropped, e.g. for `LOG_LEVEL=info` under load. */
  readonly stdout?: 'inherit' | 'ignore';
  readonly readyTimeoutMs?: number;
}

/**
 * Starts the real server (`process.execPath src/main/server.ts`) as a child process on 127.0.0.1 and a
 * free port, with LOG_LEVEL=warn, WORKER=off, DEMO_DATA=off, and waits until `/readyz` answers 200.
 */
export async function startServer(options: StartServerOptions = {}): Promise<RunningProcess> {
  const port = await findFreePort();
  const child = ownChild(
    spawn(
      process.execPath,
      [
        '--disable-warning=ExperimentalWarning',
        ...(options.nodeFlags ?? START_NODE_FLAGS),
        options.entry ?? 'src/main/server.ts',
      ],
      {
        cwd: ROOT_DIR,
        env: {
          ...(options.nodeFlags === undefined ? START_ENV : {}),
          ...process.env,
          LOG_LEVEL: 'warn',
          WORKER: 'off',
          DEMO_DATA: options.demoData === true ? 'on' : 'off',
          ...options.env,
          PORT: String(port),
          HOST: '127.0.0.1',
        },
        stdio: ['ignore', options.stdout ?? 'inherit', 'pipe'],
      },
    ),
  );
  const stderr = collectOutput(child);
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + (options.readyTimeoutMs ?? 60_000);
  while (true) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(
        `server exited (${child.exitCode ?? child.signalCode}) before ready: ${firstErrorLine(stderr())} (its stderr is above)`,
      );
    }
    if ((await httpStatus(`${url}/readyz`)) === 200) break;
    if (Date.now() > deadline) {
      await stopChild(child);
      throw new Error(`server not ready within the timeout (its stderr is above)`);
    }
    await sleep(100);
  }
  return describeProcess(child, url);
}

/** The exact bytes a floor answers with. */
export interface FloorResponse {
  readonly status: number;
  /** Header names and values, in order, as the real endpoint sends them (without Date/Connection). */
  readonly headers: readonly (readonly [string, string])[];
  readonly body: Buffer;
}

/**
 * Starts the floor: a bare `node:http` server in a child process on the same Node, answering every
 * request with `response` (status, headers, body). It is what "the same bytes with no framework, no
 * auth and no database" costs on this machine; each figure is reported as a ratio to it.
 */
export async function startFloor(
  response: FloorResponse,
  /** More environment for the floor's process (e.g. a loop-delay probe's). */
  env: Record<string, string> = {},
): Promise<RunningProcess> {
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-floor-'));
  const specFile = path.join(dir, 'response.json');
  await writeFile(
    specFile,
    JSON.stringify({
      status: response.status,
      headers: response.headers,
      body: response.body.toString('base64'),
    }),
  );
  const child = ownChild(
    spawn(process.execPath, ['bench/floor.ts', specFile], {
      cwd: ROOT_DIR,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...env },
    }),
  );
  const stderr = collectOutput(child);
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening (\d+)/.exec(out);
      if (match !== null) resolve(Number(match[1]));
    });
    child.once('exit', (code) => reject(new Error(`floor exited (${code}): ${firstErrorLine(stderr())}`)));
  });
  const running = describeProcess(child, `http://127.0.0.1:${port}`);
  return {
    ...running,
    async stop() {
      await running.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Headers the HTTP layer writes by itself (node:http adds them in the floor too). */
const HOP_HEADERS = new Set(['date', 'connection', 'keep-alive', 'transfer-encoding']);

/**
 * Requests `url` once and returns the exact response (status, raw headers in order, body) for a floor.
 * Per-request values (x-request-id) keep their length, so the floor writes as many bytes.
 */
export async function captureResponse(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {},
): Promise<FloorResponse> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method: init.method ?? 'GET', headers: init.headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        const headers: [string, string][] = [];
        const raw = response.rawHeaders;
        for (let i = 0; i + 1 < raw.length; i += 2) {
          if (!HOP_HEADERS.has(raw[i]!.toLowerCase())) headers.push([raw[i]!, raw[i + 1]!]);
        }
        resolve({ status: response.statusCode ?? 0, headers, body: Buffer.concat(chunks) });
      });
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(init.body);
  });
}

function describeProcess(child: ChildProcess, url: string): RunningProcess {
  const pid = child.pid;
  if (pid === undefined) throw new Error('child process has no pid');
  return { url, pid, rssBytes: () => readRssBytes(pid), stop: () => stopChild(child) };
}

/** VmRSS of a process, in bytes (0 when the process is gone). */
export async function readRssBytes(pid: number): Promise<number> {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    return match === null ? 0 : Number(match[1]) * 1024;
  } catch {
    return 0;
  }
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

function collectOutput(child: ChildProcess): () => string {
  let text = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    text = (text + chunk.toString()).slice(-8000);
    process.stderr.write(chunk);
  });
  return () => text;
}

function firstErrorLine(text: string): string {
  const lines = text.split('\n').filter((line) => /error/i.test(line));
  return lines[0]?.trim() ?? '';
}

async function findFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function httpStatus(url: string): Promise<number> {
  return new Promise((resolve) => {
    const request = http.get(url, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.on('error', () => resolve(0));
    request.setTimeout(2000, () => request.destroy());
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// ---------------------------------------------------------------------------------------------------
// Load

export interface LoadOptions {
  readonly url: string;
  readonly method?: string;
  readonly headers?: Record<string, string>;
  readonly body?: string | Buffer;
  readonly connections: number;
  readonly durationSeconds: number;
  /** An autocannon request list (cycled through by each connection), for varied requests. */
  readonly requests?: readonly Record<string, unknown>[];
  /** Unmeasured load before the measured run; default 0. */
  readonly warmupSeconds?: number;
  /** Sample this process's RSS during the run (peak) and after it. */
  readonly samplePid?: number;
}

export interface LoadResult {
  readonly requestsPerSec: number;
  readonly bytesPerSec: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly totalRequests: number;
  /** Measured seconds (autocannon stops on its one-second tick, so this can exceed the asked duration). */
  readonly durationSeconds: number;
  readonly errors: number;
  readonly timeouts: number;
  readonly non2xx: number;
  /** Count per HTTP status, e.g. `{ "200": 51234 }`. */
  readonly statusCounts: Record<string, number>;
  readonly rssPeakBytes?: number;
  readonly rssAfterBytes?: number;
}

/**
 * Drives `url` with autocannon from this process. Latency percentiles are computed from every
 * response's own timing (sub-millisecond, all statuses), not from autocannon's whole-millisecond
 * histogram.
 */
export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  if ((options.warmupSeconds ?? 0) > 0) {
    await runAutocannon({ ...options, durationSeconds: options.warmupSeconds! }, undefined);
  }
  const latencies = new LatencyRecorder();
  const sampler = options.samplePid === undefined ? undefined : startRssSampler(options.samplePid);
  const result = await runAutocannon(options, latencies);
  const rssPeakBytes = sampler === undefined ? undefined : await sampler.stop();
  const rssAfterBytes = options.samplePid === undefined ? undefined : await readRssBytes(options.samplePid);
  const statusCounts: Record<string, number> = {};
  for (const [code, stat] of Object.entries(result.statusCodeStats ?? {})) statusCounts[code] = stat.count;
  const seconds = result.duration > 0 ? result.duration : options.durationSeconds;
  return {
    requestsPerSec: latencies.count / seconds,
    bytesPerSec: latencies.bytes / seconds,
    p50Ms: latencies.percentile(50),
    p99Ms: latencies.percentile(99),
    totalRequests: latencies.count,
    durationSeconds: seconds,
    errors: result.errors,
    timeouts: result.timeouts,
    non2xx: result.non2xx,
    statusCounts,
    ...(rssPeakBytes === undefined ? {} : { rssPeakBytes }),
    ...(rssAfterBytes === undefined ? {} : { rssAfterBytes }),
  };
}

/** What `bench/load.child.ts` runs: {@link LoadOptions} that survive JSON, and a body template. */
export interface ChildLoadSpec {
  readonly url: string;
  readonly method?: string;
  readonly headers?: Record<string, string>;
  readonly connections: number;
  readonly durationSeconds: number;
  readonly warmupSeconds?: number;
  /** Each request's body: `{i}` replaced by a counter from `bodyStart` (every body unique). */
  readonly bodyTemplate?: string;
  readonly bodyStart?: number;
  /** `{p}` in the template: a hospital number `0000001` ... of this many patients, in turn. */
  readonly bodyPatients?: number;
  /** Sample this process's RSS during the run (peak) and after it. */
  readonly samplePid?: number;
}

/**
 * Drives a server as an outside client does: autocannon in a Node process of its own
 * (`bench/load.child.ts`), so that the load generator shares no event loop with the bench process.
 * Resolves when the run ends, with the same result as {@link runLoad}.
 */
export async function runLoadInChild(spec: ChildLoadSpec): Promise<LoadResult> {
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-load-'));
  const specFile = path.join(dir, 'load.json');
  await writeFile(specFile, JSON.stringify(spec));
  try {
    const child = ownChild(
      spawn(process.execPath, ['--disable-warning=ExperimentalWarning', 'bench/load.child.ts', specFile], {
        cwd: ROOT_DIR,
        stdio: ['ignore', 'pipe', 'inherit'],
      }),
    );
    let out = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    const line = out.trim().split('\n').pop() ?? '';
    if (code !== 0 || line === '') throw new Error(`load generator exited (${code}) without a result`);
    return JSON.parse(line) as LoadResult;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

interface AutocannonResult {
  duration: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  statusCodeStats?: Record<string, { count: number }>;
}

function runAutocannon(
  options: LoadOptions,
  recorder: LatencyRecorder | undefined,
): Promise<AutocannonResult> {
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: options.url,
        method: options.method ?? 'GET',
        headers: options.headers,
        body: options.body,
        connections: options.connections,
        duration: options.durationSeconds,
        requests: options.requests,
        excludeErrorStats: false,
      },
      (error: Error | null, result: AutocannonResult) => (error ? reject(error) : resolve(result)),
    );
    if (recorder !== undefined) {
      instance.on('response', (_client: unknown, _status: number, bytes: number, timeMs: number) =>
        recorder.record(timeMs, bytes),
      );
    }
  });
}

class LatencyRecorder {
  private values = new Float64Array(1 << 16);
  count = 0;
  bytes = 0;

  record(timeMs: number, bytes: number): void {
    if (this.count === this.values.length) {
      const grown = new Float64Array(this.values.length * 2);
      grown.set(this.values);
      this.values = grown;
    }
    this.values[this.count++] = timeMs;
    this.bytes += bytes;
  }

  percentile(p: number): number {
    if (this.count === 0) return 0;
    const sorted = this.values.subarray(0, this.count).sort();
    return sorted[Math.min(this.count - 1, Math.ceil((p / 100) * this.count) - 1)]!;
  }
}

/** The `p`th percentile (0-100) of `sorted` (ascending), 0 when empty. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** One answer of {@link sendRequest}. */
export interface HttpAnswer {
  readonly status: number;
  readonly body: Buffer;
  /** From the request's start to the answer's last byte. */
  readonly ms: number;
}

/**
 * One HTTP request from this process (a plain `node:http` client, for bodies autocannon cannot send: a
 * different body per request, or a streamed one). The answer's body is kept (small JSON answers).
 * Transport errors reject.
 */
export function sendRequest(
  url: string,
  init: {
    method?: string;
    headers?: Record<string, string | number>;
    body?: Buffer | NodeJS.ReadableStream;
    agent?: http.Agent;
  },
): Promise<HttpAnswer> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const request = http.request(
      url,
      { method: init.method ?? 'GET', headers: init.headers, agent: init.agent },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            body: Buffer.concat(chunks),
            ms: performance.now() - started,
          }),
        );
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    if (init.body === undefined || Buffer.isBuffer(init.body)) request.end(init.body);
    else init.body.pipe(request);
  });
}

/** Reads a process's RSS every `intervalMs`; `stop()` returns the peak seen. */
export function startRssSampler(pid: number, intervalMs = 200): { stop(): Promise<number> } {
  let peak = 0;
  let pending = Promise.resolve();
  const sample = () => {
    pending = readRssBytes(pid).then((rss) => {
      peak = Math.max(peak, rss);
    });
  };
  sample();
  const timer = setInterval(sample, intervalMs);
  return {
    async stop() {
      clearInterval(timer);
      await pending;
      sample();
      await pending;
      return peak;
    },
  };
}

/**
 * Merges runs of one target (e.g. A-B-B-A rounds that cancel drift on a shared machine): requests/s and
 * bytes/s over the total time, p50/p99 as the mean of the runs' values, RSS peak as the maximum, RSS after
 * from the last run, counts summed.
 */
export function mergeLoadResults(results: readonly LoadResult[]): LoadResult {
  if (results.length === 0) throw new Error('nothing to merge');
  const sum = (pick: (r: LoadResult) => number) => results.reduce((total, r) => total + pick(r), 0);
  const seconds = sum((r) => r.durationSeconds);
  const statusCounts: Record<string, number> = {};
  for (const r of results) {
    for (const [code, count] of Object.entries(r.statusCounts))
      statusCounts[code] = (statusCounts[code] ?? 0) + count;
  }
  const peaks = results.map((r) => r.rssPeakBytes).filter((v) => v !== undefined);
  const last = results[results.length - 1]!;
  return {
    requestsPerSec: sum((r) => r.totalRequests) / seconds,
    bytesPerSec: sum((r) => r.bytesPerSec * r.durationSeconds) / seconds,
    p50Ms: sum((r) => r.p50Ms) / results.length,
    p99Ms: sum((r) => r.p99Ms) / results.length,
    totalRequests: sum((r) => r.totalRequests),
    durationSeconds: seconds,
    errors: sum((r) => r.errors),
    timeouts: sum((r) => r.timeouts),
    non2xx: sum((r) => r.non2xx),
    statusCounts,
    ...(peaks.length === 0 ? {} : { rssPeakBytes: Math.max(...peaks) }),
    ...(last.rssAfterBytes === undefined ? {} : { rssAfterBytes: last.rssAfterBytes }),
  };
}

// ---------------------------------------------------------------------------------------------------
// Results

export interface BenchRow extends LoadResult {
  /** What was measured, e.g. `GET /bench/auth (Basic, cached)`. */
  readonly name: string;
  readonly dialect: Dialect | 'none';
  readonly connections: number;
  /** True for a floor row. */
  readonly isFloor?: boolean;
  /** The `name` of the floor row (same dialect and connections) this row is compared with. */
  readonly floorName?: string;
}

/**
 * Measures one target: runs the load and returns a table row. `samplePid` defaults to the target's
 * process so that RSS is the server's.
 */
export async function measure(
  row: { name: string; dialect: Dialect | 'none'; isFloor?: boolean; floorName?: string },
  target: RunningProcess,
  load: Omit<LoadOptions, 'url' | 'samplePid'> & { path: string },
): Promise<BenchRow> {
  const { path: urlPath, ...rest } = load;
  const result = await runLoad({ ...rest, url: `${target.url}${urlPath}`, samplePid: target.pid });
  return { ...row, connections: load.connections, ...result };
}

/** One target of {@link measureInterleaved}. */
export interface MeasureEntry {
  readonly row: { name: string; dialect: Dialect | 'none'; isFloor?: boolean; floorName?: string };
  readonly target: RunningProcess;
  readonly path: string;
  readonly method?: string;
  readonly headers?: Record<string, string>;
  readonly body?: string | Buffer;
  readonly requests?: readonly Record<string, unknown>[];
  /** Runs before each of this target's runs (e.g. re-fill a cache that must not expire mid-run). */
  readonly beforeRun?: () => Promise<void>;
}

/**
 * Measures several targets (typically floor, baseline, candidate) at one connection count in
 * A-B-C-C-B-A order, each run half the duration, and merges each target's two runs (see
 * {@link mergeLoadResults}). Drift on a shared machine then falls alike on every target, so their ratios
 * are fairer than from back-to-back runs. Each target is warmed up before its first run.
 */
export async function measureInterleaved(
  entries: readonly MeasureEntry[],
  load: { connections: number; durationSeconds: number; warmupSeconds?: number },
): Promise<BenchRow[]> {
  const runs = new Map<MeasureEntry, LoadResult[]>(entries.map((entry) => [entry, []]));
  for (const [index, entry] of [...entries, ...[...entries].reverse()].entries()) {
    await entry.beforeRun?.();
    const result = await runLoad({
      url: `${entry.target.url}${entry.path}`,
      connections: load.connections,
      durationSeconds: load.durationSeconds / 2,
      warmupSeconds: index < entries.length ? (load.warmupSeconds ?? 0) : 0,
      samplePid: entry.target.pid,
      method: entry.method,
      headers: entry.headers,
      body: entry.body,
      requests: entry.requests,
    });
    runs.get(entry)!.push(result);
  }
  return entries.map((entry) => ({
    ...entry.row,
    connections: load.connections,
    ...mergeLoadResults(runs.get(entry)!),
  }));
}

/** requests/s of `row` divided by its floor's, or undefined without a floor row. */
export function ratioToFloor(row: BenchRow, rows: readonly BenchRow[]): number | undefined {
  if (row.floorName === undefined) return undefined;
  const floor = rows.find(
    (r) =>
      r.name === row.floorName &&
      r.connections === row.connections &&
      (r.dialect === row.dialect || r.dialect === 'none'),
  );
  return floor === undefined || floor.requestsPerSec === 0
    ? undefined
    : row.requestsPerSec / floor.requestsPerSec;
}

/** Prints name, dialect, connections, req/s, MB/s, p50, p99, server RSS (peak/after), ratio to floor. */
export function printTable(rows: readonly BenchRow[], notes: readonly string[] = []): void {
  const header = [
    'name',
    'dialect',
    'conn',
    'req/s',
    'MB/s',
    'p50 ms',
    'p99 ms',
    'RSS peak/after MB',
    'vs floor',
    'status',
  ];
  const body = rows.map((row) => {
    const ratio = ratioToFloor(row, rows);
    const statuses = Object.entries(row.statusCounts)
      .map(([code, count]) => `${code}:${count}`)
      .join(' ');
    return [
      row.name,
      row.dialect,
      String(row.connections),
      row.requestsPerSec.toFixed(0),
      (row.bytesPerSec / 1e6).toFixed(2),
      row.p50Ms.toFixed(2),
      row.p99Ms.toFixed(2),
      `${mb(row.rssPeakBytes)}/${mb(row.rssAfterBytes)}`,
      row.isFloor === true ? 'floor' : ratio === undefined ? '-' : `${(ratio * 100).toFixed(1)}%`,
      statuses + (row.errors > 0 ? ` errors:${row.errors}` : ''),
    ];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((cells) => cells[i]!.length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) =>
        i === 0 || i === cells.length - 1 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!),
      )
      .join('  ');
  const out = [
    line(header),
    widths.map((w) => '-'.repeat(w)).join('  '),
    ...body.map(line),
    ...notes.map((n) => `* ${n}`),
  ];
  process.stdout.write(`${out.join('\n')}\n`);
}

function mb(bytes: number | undefined): string {
  return bytes === undefined ? '-' : (bytes / 1024 / 1024).toFixed(0);
}

/** Writes `bench/results/<name>-<dialect>-<timestamp>.json`; returns the file path. */
export async function saveResults(
  name: string,
  rows: readonly BenchRow[],
  extra: { notes?: readonly string[]; options?: unknown } = {},
): Promise<string> {
  await mkdir(RESULTS_DIR, { recursive: true });
  const dialects = [...new Set(rows.map((r) => r.dialect).filter((d) => d !== 'none'))];
  const dialect = dialects.length === 1 ? dialects[0]! : dialects.length === 0 ? 'none' : 'mixed';
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const file = path.join(RESULTS_DIR, `${name}-${dialect}-${stamp}.json`);
  const payload = {
    name,
    dialect,
    at: new Date().toISOString(),
    node: process.version,
    ...extra,
    rows: rows.map((row) => ({ ...row, ratioToFloor: ratioToFloor(row, rows) ?? null })),
  };
  await writeFile(file, `${JSON.stringify(payload, null, 2)}\n`);
  return file;
}

// ---------------------------------------------------------------------------------------------------
// Event-loop delay of a server under test (loop-delay-probe.child.js)

const LOOP_PROBE = path.join(ROOT_DIR, 'bench', 'loop-delay-probe.child.js');

/** The server's event-loop delay over one measured run, in ms (the sampling interval taken off). */
export interface LoopDelay {
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  readonly meanMs: number;
  /** Garbage collections on the main thread over the run: count, summed and longest pause. */
  readonly gcCount: number;
  readonly gcTotalMs: number;
  readonly gcMaxMs: number;
  /** Of them, the major (mark-compact) ones. */
  readonly gcMajorCount: number;
  readonly gcMajorTotalMs: number;
  readonly gcMajorMaxMs: number;
}

/** A server's event-loop delay probe: its environment, and one reading per call of `read`. */
export interface LoopProbe {
  /** Environment that preloads the probe (to be merged into the server's; NODE_OPTIONS is extended). */
  readonly env: Record<string, string>;
  /** The delay since the previous call (or since the start), read from the server `pid`. */
  read(pid: number): Promise<LoopDelay>;
}

/** A probe writing to a file in `dir` named after `name` (one per server). */
export function createLoopProbe(
  dir: string,
  name: string,
  nodeOptions = process.env.NODE_OPTIONS ?? '',
): LoopProbe {
  const file = path.join(dir, `loop-${name}.jsonl`);
  const lineCount = async () => {
    try {
      return (await readFile(file, 'utf8')).split('\n').filter((line) => line !== '').length;
    } catch {
      return 0;
    }
  };
  return {
    env: {
      NODE_OPTIONS: `${nodeOptions} --import=${LOOP_PROBE}`.trim(),
      BENCH_LOOP_PROBE_FILE: file,
    },
    async read(pid) {
      const before = await lineCount();
      process.kill(pid, 'SIGUSR2');
      const deadline = Date.now() + 10_000;
      while ((await lineCount()) === before) {
        if (Date.now() > deadline) throw new Error('the loop delay probe did not answer (is it preloaded?)');
        await sleep(10);
      }
      const lines = (await readFile(file, 'utf8')).trim().split('\n');
      return JSON.parse(lines.at(-1)!) as LoopDelay;
    },
  };
}

// ---------------------------------------------------------------------------------------------------
// CPU time of a process under test

/**
 * User + system CPU time of `pid` in milliseconds: its main thread (the event loop,
 * `/proc/<pid>/task/<pid>/stat`) and all its threads (`/proc/<pid>/stat`: GC helpers, libuv's pool).
 * Kernel accounting, so it stays comparable on a loaded machine, unlike rates; 10 ms resolution.
 */
export async function readCpuMs(pid: number): Promise<{ mainMs: number; allMs: number }> {
  const ticksOf = async (file: string) => {
    const text = await readFile(file, 'utf8');
    // Fields after the command name (which may hold spaces); utime and stime are fields 14 and 15.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  };
  return {
    mainMs: await ticksOf(`/proc/${pid}/task/${pid}/stat`),
    allMs: await ticksOf(`/proc/${pid}/stat`),
  };
}

/** `CPU per request: main thread X us, all threads Y us` between two {@link readCpuMs} readings. */
export function cpuPerRequest(
  before: { mainMs: number; allMs: number },
  after: { mainMs: number; allMs: number },
  requests: number,
): string {
  const us = (ms: number) => (requests === 0 ? 'n/a' : `${Math.round((ms * 1000) / requests)} us`);
  return `CPU per request: main thread ${us(after.mainMs - before.mainMs)}, all threads ${us(after.allMs - before.allMs)}`;
}
