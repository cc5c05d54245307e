/**
 * Scaling from one to two server processes (issue 7 item 7): the real server (`src/main/server.ts`) with
 * `SERVER_PROCESSES=1` and with `SERVER_PROCESSES=2` (node:cluster, one shared port), both on the same demo
 * population (the patient-search bench's, `npm run cli -- demo-data --patients N`), driven by the same
 * authenticated patient search by hospital number. The two servers are measured interleaved (A-B-B-A) at
 * each connection count, and the note gives the throughput ratio 2 processes / 1 process.
 *
 * Environment: `BENCH_SCALING_PATIENTS` (default 100000); the population is kept between runs and shared
 * with `bench/patient-search.ts` (`bench/data/patients_<N>.db`, PostgreSQL `cra_bench_patients_<n>`).
 *
 * Read the ratio with the machine in mind: autocannon runs in this process on the same cores, and on
 * PostgreSQL the database server too; with 2 cores the second server process competes with both, so the
 * ratio is a floor of what a machine with spare cores gives. RSS is the cluster primary's only.
 */
import { sql } from 'kysely';
import { demoHospitalNumber, demoPatientAt, generateDemoPopulation } from '../src/modules/dataset/index.ts';
import type { BenchReport, BenchRow, BenchRunOptions, RunningProcess } from './lib.ts';
import {
  BENCH_AUTHORIZATION,
  captureResponse,
  ensureBenchAccount,
  measureInterleaved,
  prepareDatabase,
  startServer,
} from './lib.ts';

const INSTITUTION_CODE = 'NEW';

function populationFromEnv(): number {
  const raw = process.env.BENCH_SCALING_PATIENTS;
  if (raw === undefined || raw.trim() === '') return 100_000;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 1)
    throw new Error('BENCH_SCALING_PATIENTS must be a whole number');
  return value;
}

/** The hospital number of a live demo patient near the middle of the population. */
function searchedHospitalNumber(population: number): string {
  let k = Math.floor(population * 0.618);
  while (demoPatientAt(k).isDeleted) k = (k + 1) % population;
  return demoHospitalNumber(k);
}

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const { dialect, durationSeconds, warmupSeconds } = options;
  const population = populationFromEnv();
  const prepared = await prepareDatabase(dialect, {
    persistentName: `patients_${population}`,
    fill: async (database) => {
      process.stderr.write(`Building ${population} demo patients on ${dialect}...\n`);
      await generateDemoPopulation(database, { patients: population, institutionCode: INSTITUTION_CODE });
      if (dialect === 'postgres') await sql`analyze`.execute(database.db);
    },
    setup: (database) => ensureBenchAccount(database),
  });
  const headers = { authorization: BENCH_AUTHORIZATION };
  const searchPath = `/api/v1/patient/search?term=${encodeURIComponent(searchedHospitalNumber(population))}`;
  const running: RunningProcess[] = [];
  const rows: BenchRow[] = [];
  try {
    const serverWith = async (processes: number) => {
      const server = await startServer({
        env: {
          ...prepared.env,
          INSTITUTION_CODE,
          SERVER_PROCESSES: String(processes),
          // Every process has its own credential cache: keep it warm for the whole run.
          AUTH_CACHE_TTL_MS: '3600000',
          // Plain HTTP on 127.0.0.1, whatever NODE_ENV says.
          REQUIRE_TLS: 'off',
        },
      });
      running.push(server);
      const answer = await captureResponse(`${server.url}${searchPath}`, { headers });
      const found = JSON.parse(answer.body.toString()) as unknown[];
      if (answer.status !== 200 || !Array.isArray(found) || found.length === 0) {
        throw new Error(`the search answered ${answer.status} on ${processes} process(es)`);
      }
      return server;
    };
    const one = await serverWith(1);
    const two = await serverWith(2);
    const label = `patient search by hospital number @${population}`;
    for (const connections of options.connections) {
      rows.push(
        ...(await measureInterleaved(
          [
            { row: { name: `${label}, 1 process`, dialect }, target: one, path: searchPath, headers },
            { row: { name: `${label}, 2 processes`, dialect }, target: two, path: searchPath, headers },
          ],
          { connections, durationSeconds, warmupSeconds },
        )),
      );
    }
  } finally {
    for (const server of running.reverse()) await server.stop();
    await prepared.cleanup();
  }

  const notes: string[] = [];
  for (const connections of options.connections) {
    const at = rows.filter((row) => row.connections === connections);
    const one = at.find((row) => row.name.endsWith('1 process'));
    const two = at.find((row) => row.name.endsWith('2 processes'));
    if (one === undefined || two === undefined || one.requestsPerSec === 0) continue;
    notes.push(
      `${dialect}, ${connections} conn: 2 processes / 1 process = ${(two.requestsPerSec / one.requestsPerSec).toFixed(2)}x ` +
        `req/s (${one.requestsPerSec.toFixed(0)} -> ${two.requestsPerSec.toFixed(0)}), ` +
        `p99 ${one.p99Ms.toFixed(2)} -> ${two.p99Ms.toFixed(2)} ms`,
    );
  }
  for (const row of rows) {
    if (row.non2xx > 0 || row.errors > 0)
      notes.push(`${row.name} at ${row.connections} conn had non-2xx or errors`);
  }
  notes.push(
    "load generator, server processes (and PostgreSQL) share this machine's cores: the ratio is a lower bound; " +
      "RSS shown is the cluster primary's for 2 processes",
  );
  return { rows, notes };
}
