/**
 * Patient search on a large demo population (issue 3): the real server (`src/main/server.ts`) against a
 * database filled by the dataset module's demo generator (the code behind `npm run cli -- demo-data
 * --patients N`), for three searches, each measured against a floor answering its exact bytes:
 *
 * - an exact hospital number (identifier search),
 * - a three-letter surname prefix,
 * - `Last, First dd/mm/yyyy`.
 *
 * The identifier search is measured again on a smaller population, to show that its response time does
 * not grow with the population. The `EXPLAIN` output of each search's statement (the very SQL the
 * service runs, from `compileSearch`) is written to `bench/explain/<dialect>-<search>.txt`.
 *
 * Environment: `BENCH_PATIENTS` (default 1000000) and `BENCH_PATIENTS_SMALL` (default 100000; 0 skips
 * the comparison). Populations are kept between runs (`bench/data/patients_<N>.db`, PostgreSQL database
 * `cra_bench_patients_<n>`; `BENCH_REBUILD=1` rebuilds them). Building a million patients takes a few
 * minutes per dialect.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { loadConfig } from '../src/config.ts';
import type { Database } from '../src/db/database.ts';
import { sessionOptions } from '../src/db/dialects/postgres.ts';
import { castBoundLimits } from '../src/db/dialects/sqlite.ts';
import { demoHospitalNumber, demoPatientAt, generateDemoPopulation } from '../src/modules/dataset/index.ts';
import type { PatientSearchInput } from '../src/modules/patient/patient.service.ts';
import { createPatientSearchService } from '../src/modules/patient/patient.service.ts';
import type {
  BenchReport,
  BenchRow,
  BenchRunOptions,
  Dialect,
  PreparedDatabase,
  RunningProcess,
} from './lib.ts';
import {
  BENCH_AUTHORIZATION,
  ROOT_DIR,
  captureResponse,
  ensureBenchAccount,
  measureInterleaved,
  prepareDatabase,
  startFloor,
  startServer,
} from './lib.ts';

const INSTITUTION_CODE = 'NEW';
const EXPLAIN_DIR = path.join(ROOT_DIR, 'bench', 'explain');

/** Targets of issue 3. */
const TARGETS = {
  identifierFloorRatioSqlite: 0.4,
  identifierP99Ms: 10,
  nameP99Ms: 25,
  rssBytes: 250 * 1024 * 1024,
};

interface SearchCase {
  readonly key: 'identifier' | 'surname-prefix' | 'name-and-dob';
  readonly label: string;
  readonly term: string;
}

/** The three searches, about demo patient `k` (a live patient near the middle of the population). */
function searchCases(population: number): SearchCase[] {
  let k = Math.floor(population * 0.618);
  while (demoPatientAt(k).isDeleted) k = (k + 1) % population;
  const patient = demoPatientAt(k);
  const [year, month, day] = patient.dob.split('-');
  return [
    { key: 'identifier', label: 'hospital number', term: demoHospitalNumber(k) },
    { key: 'surname-prefix', label: '3-letter surname prefix', term: patient.lastName.slice(0, 3) },
    {
      key: 'name-and-dob',
      label: 'Last, First dd/mm/yyyy',
      term: `${patient.lastName}, ${patient.firstName} ${day}/${month}/${year}`,
    },
  ];
}

const searchPath = (term: string) => `/api/v1/patient/search?term=${encodeURIComponent(term)}`;

function sizeFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`${name} must be a whole number`);
  return value;
}

async function preparePopulation(
  dialect: Dialect,
  patients: number,
  explain: boolean,
): Promise<PreparedDatabase> {
  return prepareDatabase(dialect, {
    persistentName: `patients_${patients}`,
    fill: async (database) => {
      process.stderr.write(`Building ${patients} demo patients on ${dialect}...\n`);
      const result = await generateDemoPopulation(database, { patients, institutionCode: INSTITUTION_CODE });
      process.stderr.write(`  done in ${(result.elapsedMs / 1000).toFixed(0)} s\n`);
      await database.dialect.analyzeTables(['patient', 'contact', 'patient_identifier']);
    },
    setup: async (database, context) => {
      await ensureBenchAccount(database);
      if (explain) await writeExplains(database, context.url, searchCases(patients));
    },
  });
}

/**
 * PostgreSQL: the plan the server really runs. The service executes its statement as a named prepared
 * statement with `plan_cache_mode = force_generic_plan` (set on every pool connection), so the plan shown is
 * that of `EXECUTE` of the prepared statement on a pool connection, after the same setting.
 */
async function explainPreparedPlan(
  url: string,
  statement: string,
  parameters: readonly unknown[],
): Promise<string[]> {
  const client = new pg.Client({ connectionString: url, options: sessionOptions(url) });
  await client.connect();
  try {
    await client.query('prepare bench_explain as ' + statement);
    const literals = parameters.map((p) =>
      typeof p === 'number' ? String(p) : client.escapeLiteral(String(p)),
    );
    const mode = await client.query<{ plan_cache_mode: string }>('show plan_cache_mode');
    const result = await client.query<Record<string, unknown>>(
      `explain (analyze, buffers, costs off) execute bench_explain(${literals.join(', ')})`,
    );
    return [
      `-- plan_cache_mode: ${mode.rows[0]?.plan_cache_mode ?? '?'} (EXECUTE of the prepared statement)`,
      ...result.rows.map((row) => String(row['QUERY PLAN'])),
    ];
  } finally {
    await client.query('deallocate bench_explain').catch(() => {});
    await client.end();
  }
}

/** Writes the plan of each search's statement, as the service compiles it, to bench/explain/. */
async function writeExplains(database: Database, url: string, cases: readonly SearchCase[]): Promise<void> {
  const config = loadConfig({ INSTITUTION_CODE, REFERENCE_CACHE_TTL_MS: '0', LOG_LEVEL: 'silent' });
  const service = createPatientSearchService({ config, database });
  await mkdir(EXPLAIN_DIR, { recursive: true });
  for (const searchCase of cases) {
    const input: PatientSearchInput = {
      term: searchCase.term,
      identifierType: undefined,
      pageSize: 20,
      page: 1,
      sortColumn: 'default',
      isDescending: false,
      institutionCookie: undefined,
      siteCookie: undefined,
    };
    const compiled = await service.compileSearch(input);
    if (compiled === undefined) throw new Error(`"${searchCase.label}" would not query the database`);
    const plan =
      database.dialect.name === 'sqlite'
        ? (
            await database.db.executeQuery<Record<string, unknown>>({
              ...compiled,
              sql: `explain query plan ${compiled.sql}`,
            })
          ).rows.map((row) => `${String(row.id)} ${String(row.parent)} ${String(row.detail)}`)
        : database.dialect.name === 'mysql'
          ? (
              await database.db.executeQuery<Record<string, unknown>>({
                ...compiled,
                sql: `explain ${compiled.sql}`,
              })
            ).rows.map((row) => JSON.stringify(row))
          : await explainPreparedPlan(url, compiled.sql, compiled.parameters);
    const text = [
      `# ${searchCase.label} (${database.dialect.name}); the one statement GET /api/v1/patient/search runs`,
      '',
      // SQLite's executor prepares bound LIMIT/OFFSET behind a cast (database.ts): show what it runs.
      database.dialect.name === 'sqlite' ? castBoundLimits(compiled.sql) : compiled.sql,
      '',
      `-- parameters: ${JSON.stringify(compiled.parameters)}`,
      '',
      ...plan,
      '',
    ].join('\n');
    await writeFile(path.join(EXPLAIN_DIR, `${database.dialect.name}-${searchCase.key}.txt`), text);
  }
}

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const { dialect, durationSeconds, warmupSeconds } = options;
  const population = sizeFromEnv('BENCH_PATIENTS', 1_000_000);
  const smallPopulation = sizeFromEnv('BENCH_PATIENTS_SMALL', 100_000);
  const headers = { authorization: BENCH_AUTHORIZATION };
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  const running: RunningProcess[] = [];
  const start = async (starting: Promise<RunningProcess>) => {
    const started = await starting;
    running.push(started);
    return started;
  };
  const stopAll = async () => {
    for (const child of running.splice(0).reverse()) await child.stop();
  };
  const serverEnv = (prepared: PreparedDatabase) => ({ ...prepared.env, INSTITUTION_CODE });

  /** Measures the searches against `server`, each with its own floor; returns the rows. */
  const measureCases = async (
    server: RunningProcess,
    cases: readonly SearchCase[],
    suffix: string,
  ): Promise<BenchRow[]> => {
    const measured: BenchRow[] = [];
    for (const searchCase of cases) {
      const bytes = await captureResponse(`${server.url}${searchPath(searchCase.term)}`, { headers });
      const results = JSON.parse(bytes.body.toString()) as { id: number }[];
      if (bytes.status !== 200 || !Array.isArray(results) || results.length === 0) {
        throw new Error(`"${searchCase.label}" answered ${bytes.status} with ${results.length} results`);
      }
      const floor = await start(startFloor(bytes));
      const floorName = `floor: ${searchCase.label}${suffix}`;
      for (const connections of options.connections) {
        measured.push(
          ...(await measureInterleaved(
            [
              { row: { name: floorName, dialect: 'none', isFloor: true }, target: floor, path: '/' },
              {
                row: { name: `${searchCase.label}${suffix} (${results.length} found)`, dialect, floorName },
                target: server,
                path: searchPath(searchCase.term),
                headers,
              },
            ],
            { connections, durationSeconds, warmupSeconds },
          )),
        );
      }
      await floor.stop();
      running.splice(running.indexOf(floor), 1);
    }
    return measured;
  };

  const big = await preparePopulation(dialect, population, true);
  try {
    const server = await start(startServer({ env: serverEnv(big) }));
    const cases = searchCases(population);
    rows.push(...(await measureCases(server, cases, ` @${population}`)));
    await stopAll();
  } finally {
    await stopAll();
    await big.cleanup();
  }

  if (smallPopulation > 0 && smallPopulation !== population) {
    const small = await preparePopulation(dialect, smallPopulation, false);
    try {
      const server = await start(startServer({ env: serverEnv(small) }));
      rows.push(
        ...(await measureCases(server, searchCases(smallPopulation).slice(0, 1), ` @${smallPopulation}`)),
      );
    } finally {
      await stopAll();
      await small.cleanup();
    }
  }

  notes.push(...judge(rows, dialect, options.connections, population, smallPopulation));
  notes.push(`EXPLAIN output of the ${dialect} page queries: bench/explain/${dialect}-*.txt`);
  return { rows, notes };
}

/** Notes saying which targets of issue 3 were met. */
function judge(
  rows: readonly BenchRow[],
  dialect: Dialect,
  connections: readonly number[],
  population: number,
  smallPopulation: number,
): string[] {
  const notes: string[] = [];
  const find = (label: string, size: number, conn: number) =>
    rows.find((r) => r.isFloor !== true && r.connections === conn && r.name.startsWith(`${label} @${size} `));
  const floorOf = (row: BenchRow) =>
    rows.find((r) => r.isFloor === true && r.name === row.floorName && r.connections === row.connections);
  const verdict = (isMet: boolean) => (isMet ? 'met' : 'MISSED');
  const conn = connections.includes(32) ? 32 : Math.max(...connections);

  const identifier = find('hospital number', population, conn);
  if (identifier !== undefined) {
    const floor = floorOf(identifier);
    const ratio = floor === undefined ? 0 : identifier.requestsPerSec / floor.requestsPerSec;
    if (dialect === 'sqlite') {
      notes.push(
        `identifier search at ${conn} conn: ${(ratio * 100).toFixed(1)}% of the floor (target >= ` +
          `${TARGETS.identifierFloorRatioSqlite * 100}%): ${verdict(ratio >= TARGETS.identifierFloorRatioSqlite)}`,
      );
    }
    notes.push(
      `identifier search p99 at ${conn} conn: ${identifier.p99Ms.toFixed(2)} ms (target < ${TARGETS.identifierP99Ms} ms): ` +
        verdict(identifier.p99Ms < TARGETS.identifierP99Ms),
    );
  }
  for (const label of ['3-letter surname prefix', 'Last, First dd/mm/yyyy']) {
    const row = find(label, population, conn);
    if (row === undefined) continue;
    notes.push(
      `${label} p99 at ${conn} conn: ${row.p99Ms.toFixed(2)} ms (target < ${TARGETS.nameP99Ms} ms): ` +
        verdict(row.p99Ms < TARGETS.nameP99Ms),
    );
  }
  const peak = Math.max(...rows.filter((r) => r.isFloor !== true).map((r) => r.rssPeakBytes ?? 0));
  notes.push(
    `server RSS peak: ${(peak / 1024 / 1024).toFixed(0)} MB` +
      (dialect === 'sqlite'
        ? ` (target < ${TARGETS.rssBytes / 1024 / 1024} MB with the ${population}-patient SQLite database): ${verdict(peak < TARGETS.rssBytes)}`
        : ''),
  );
  for (const c of connections) {
    const big = find('hospital number', population, c);
    const small = find('hospital number', smallPopulation, c);
    if (big === undefined || small === undefined) continue;
    notes.push(
      `identifier search at ${c} conn, ${smallPopulation} vs ${population} patients: p50 ${small.p50Ms.toFixed(2)} vs ` +
        `${big.p50Ms.toFixed(2)} ms, p99 ${small.p99Ms.toFixed(2)} vs ${big.p99Ms.toFixed(2)} ms, ` +
        `${small.requestsPerSec.toFixed(0)} vs ${big.requestsPerSec.toFixed(0)} req/s`,
    );
  }
  for (const row of rows) {
    if (row.non2xx > 0 || row.errors > 0)
      notes.push(`${row.name} at ${row.connections} conn had non-2xx answers or errors`);
  }
  return notes;
}
