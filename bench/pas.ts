/**
 * The PAS's paths into the service (issue 34): PASAPI `Patient` PUT, HL7 ADT A08 over MLLP, and
 * `pas replay` of a backlog file. The real server (`src/main/server.ts`, WORKER=off) and the real CLI
 * (`src/main/cli.ts`) as child processes on 127.0.0.1; the service's own schema on every dialect (the
 * bench harness has no OpenEyes-shaped database).
 *
 * - `PASAPI Patient PUT`: `BENCH_PAS_PATIENTS` (default 1,000) patients created by PUT first, then
 *   autocannon at 16 connections (or `--connections`) PUTting the full record (two addresses, GP and
 *   practice, both numbers) of an existing patient, each request the next patient round-robin (no two
 *   connections on one patient at once): req/s, p50, p99.
 * - `HL7 A08, one MLLP connection`: the same patients' A08s sent by `@medplum/hl7`'s `Hl7Client` one at a
 *   time, each waiting for its ACK, for `--duration` seconds: messages/s, p50, p99 of one round trip.
 * - `pas replay`: a file of `BENCH_PAS_REPLAY_MESSAGES` (default 100,000) messages, an A28 for each of
 *   `BENCH_PAS_REPLAY_PATIENTS` (default 20,000) new patients then A08s for them, replayed by `npm run cli
 *   -- pas replay` (a process of its own): messages/s, and the process's RSS sampled every second (its
 *   peak; and the mean of the first and of the last tenth of the samples, which are equal when memory
 *   is flat).
 *
 * Targets: PUT >= 300/s (SQLite, PostgreSQL), >= 200/s (MariaDB), p99 <= 50 ms; A08 >= 200/s; replay
 * >= 1,000/s with memory flat. `npm run bench -- pas --dialect all`.
 */
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Hl7Message } from '@medplum/core';
import { Hl7Client } from '@medplum/hl7';
import { createGpAndPractice, createPasInstallation } from '../test/factories-pasapi.ts';
import { freePort } from '../test/ports.ts';
import type { BenchReport, BenchRow, BenchRunOptions, LoadResult } from './lib.ts';
import {
  BENCH_AUTHORIZATION,
  ROOT_DIR,
  START_NODE_FLAGS,
  ensureBenchAccount,
  measure,
  ownChild,
  percentile,
  prepareDatabase,
  readRssBytes,
  startRssSampler,
  startServer,
} from './lib.ts';

const PATIENTS = Number(process.env.BENCH_PAS_PATIENTS ?? 1000);
const REPLAY_MESSAGES = Number(process.env.BENCH_PAS_REPLAY_MESSAGES ?? 100_000);
const REPLAY_PATIENTS = Number(process.env.BENCH_PAS_REPLAY_PATIENTS ?? 20_000);
const PUT_CONNECTIONS = 16;
const TARGET_P99_MS = 50;
const TARGET_A08_PER_S = 200;
const TARGET_REPLAY_PER_S = 1000;
const GP = 'G3258868';
const PRACTICE = 'C82103';

const hospitalNumber = (i: number) => String(7_000_000 + i);
const nhsNumber = (i: number) => `9${String(400_000_000 + i).padStart(9, '0')}`;

/** The full record of patient `i`, two addresses, as OpenEyes's PASAPI feature tests write it. */
function patientXml(i: number, round: number): string {
  return `<Patient>
    <NHSNumber>${nhsNumber(i)}</NHSNumber>
    <NHSNumberStatus>02</NHSNumberStatus>
    <HospitalNumber>${hospitalNumber(i)}</HospitalNumber>
    <Title>MRS</Title>
    <FirstName>Bench${round % 2 === 0 ? 'a' : 'b'}</FirstName>
    <Surname>Paspatient${String(i).padStart(5, '0')}</Surname>
    <DateOfBirth>19${String(40 + (i % 60)).padStart(2, '0')}-03-01</DateOfBirth>
    <Gender>F</Gender>
    <AddressList>
        <Address>
            <Line1>${(round % 90) + 1} Bench Lane</Line1>
            <Line2/>
            <City>Benchtown</City>
            <County>West Yorkshire</County>
            <Postcode>QA88 2GC</Postcode>
            <Country>GB</Country>
            <Type>HOME</Type>
        </Address>
        <Address>
            <Line1>PO Box ${i}</Line1>
            <Line2>Correspondence</Line2>
            <City>Benchcity</City>
            <County>Kent</County>
            <Postcode>QB99 3HD</Postcode>
            <Country>GB</Country>
            <Type>CORR</Type>
        </Address>
    </AddressList>
    <TelephoneNumber>03040 6024378</TelephoneNumber>
    <MobilePhoneNumber>03040 6024378</MobilePhoneNumber>
    <EthnicGroup>A</EthnicGroup>
    <DateOfDeath/>
    <PracticeCode>${PRACTICE}</PracticeCode>
    <GpCode>${GP}</GpCode>
</Patient>`;
}

/** An ADT message of patient `i` (segments ended by CR). */
function adt(event: 'A28' | 'A08', i: number, controlId: string, round: number): string {
  const structure = event === 'A28' ? 'ADT_A05' : 'ADT_A01';
  return [
    `MSH|^~\\&|PAS|RHS|CRA|EYE|20260301120000||ADT^${event}^${structure}|${controlId}|P|2.4|||AL|NE`,
    `EVN|${event}|20260301120000`,
    `PID|1||${hospitalNumber(i)}^^^PAS^MR~${nhsNumber(i)}^^^NHS^NH||Hl7patient${String(i).padStart(6, '0')}^Bench${round % 2 === 0 ? 'a' : 'b'}^^^mrs||19${String(40 + (i % 60)).padStart(2, '0')}0301|F|||${(round % 90) + 1} Bench Lane^^Benchtown^West Yorkshire^QA88 2GC^^H||01134960000`,
    `PD1|||^^${PRACTICE}|${GP}`,
  ].join('\r');
}

function loadRow(
  name: string,
  dialect: BenchRunOptions['dialect'],
  connections: number,
  result: LoadResult,
): BenchRow {
  return { name, dialect, connections, ...result };
}

/** One message at a time over one connection for `seconds`: messages/s and round-trip percentiles. */
async function sendA08s(port: number, seconds: number, offset: number, pid: number): Promise<LoadResult> {
  const client = new Hl7Client({ host: '127.0.0.1', port });
  const latencies: number[] = [];
  const sampler = startRssSampler(pid);
  let errors = 0;
  const started = performance.now();
  let n = 0;
  try {
    while (performance.now() - started < seconds * 1000) {
      const i = (offset + n) % PATIENTS;
      const text = adt('A08', i, `A08-${offset}-${n}`, n);
      const sent = performance.now();
      const ack = await client.sendAndWait(Hl7Message.parse(text), { timeoutMs: 30_000 });
      latencies.push(performance.now() - sent);
      if (ack.getSegment('MSA')?.getField(1)?.toString() !== 'AA') errors += 1;
      n += 1;
    }
  } finally {
    await client.close();
  }
  const took = (performance.now() - started) / 1000;
  const sorted = Float64Array.from(latencies).sort();
  const rssPeakBytes = await sampler.stop();
  return {
    requestsPerSec: n / took,
    bytesPerSec: 0,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    totalRequests: n,
    durationSeconds: took,
    errors,
    timeouts: 0,
    non2xx: errors,
    statusCounts: { AA: n - errors, other: errors },
    rssPeakBytes,
    rssAfterBytes: await readRssBytes(pid),
  };
}

/** Writes the replay's backlog file: an A28 per patient, then A08s, patients interleaved. */
async function writeBacklog(file: string): Promise<void> {
  const out = createWriteStream(file);
  for (let n = 0; n < REPLAY_MESSAGES; n += 1) {
    const i = 100_000 + (n % REPLAY_PATIENTS);
    const text = adt(n < REPLAY_PATIENTS ? 'A28' : 'A08', i, `RPL-${n}`, Math.floor(n / REPLAY_PATIENTS));
    if (!out.write(`${text.replaceAll('\r', '\r\n')}\r\n`)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
}

interface ReplayResult {
  readonly result: LoadResult;
  readonly rssSamplesMb: readonly number[];
  readonly summary: string;
}

async function runReplay(env: Record<string, string>, file: string): Promise<ReplayResult> {
  const child = ownChild(
    spawn(
      process.execPath,
      [
        '--disable-warning=ExperimentalWarning',
        ...START_NODE_FLAGS,
        'src/main/cli.ts',
        'pas',
        'replay',
        file,
      ],
      {
        cwd: ROOT_DIR,
        env: {
          ...process.env,
          ...env,
          // BENCH_PAS_CPU_PROFILE=<dir>: the replay's process writes a V8 CPU profile there.
          ...(process.env.BENCH_PAS_CPU_PROFILE === undefined
            ? {}
            : { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${process.env.BENCH_PAS_CPU_PROFILE}` }),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    ),
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const started = performance.now();
  const samples: number[] = [];
  const timer = setInterval(() => {
    void readRssBytes(child.pid!).then((rss) => {
      if (rss > 0) samples.push(rss / 2 ** 20);
    });
  }, 1000);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearInterval(timer);
  const took = (performance.now() - started) / 1000;
  if (code !== 0) throw new Error(`pas replay exited ${code}: ${stderr.split('\n').slice(-5).join(' | ')}`);
  const summary = stdout.trim().split('\n').at(-1) ?? '';
  const applied = Number(/(\d+) applied/.exec(summary)?.[1] ?? 0);
  return {
    result: {
      requestsPerSec: REPLAY_MESSAGES / took,
      bytesPerSec: 0,
      p50Ms: 0,
      p99Ms: 0,
      totalRequests: applied,
      durationSeconds: took,
      errors: REPLAY_MESSAGES - applied,
      timeouts: 0,
      non2xx: 0,
      statusCounts: {},
      rssPeakBytes: Math.max(0, ...samples) * 2 ** 20,
    },
    rssSamplesMb: samples,
    summary,
  };
}

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const { dialect } = options;
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-bench-pas-'));
  let typeKey = '';
  const prepared = await prepareDatabase(dialect, {
    setup: async (database) => {
      await ensureBenchAccount(database);
      typeKey = (await createPasInstallation(database.db)).typeKey;
      await createGpAndPractice(database.db, GP, PRACTICE);
    },
  });
  const mapFile = path.join(dir, 'field-map.json');
  await writeFile(
    mapFile,
    JSON.stringify({ localIdentifiers: [{ authority: 'PAS', identifierType: typeKey }] }),
  );
  const hl7Port = await freePort();
  const env = {
    ...prepared.env,
    HL7_FIELD_MAP_FILE: mapFile,
    LOG_LEVEL: 'warn',
    DEMO_DATA: 'off',
    WORKER: 'off',
  };
  try {
    const server = await startServer({
      env: {
        ...env,
        HL7_PORT: String(hl7Port),
        HL7_HOST: '127.0.0.1',
        HL7_ALLOWED_SENDERS: 'PAS^RHS@127.0.0.1',
        ...(process.env.BENCH_PAS_CPU_PROFILE === undefined
          ? {}
          : { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${process.env.BENCH_PAS_CPU_PROFILE}` }),
      },
    });
    try {
      // The patients the PUTs update, created by PUT.
      const putPath = (i: number) =>
        `/PASAPI/V1/Patient/${hospitalNumber(i)}/identifier-type/${encodeURIComponent(typeKey)}`;
      const headers = {
        authorization: BENCH_AUTHORIZATION,
        'content-type': 'application/xml',
        accept: 'application/xml',
      };
      for (let i = 0; i < PATIENTS; i += 1) {
        const response = await fetch(`${server.url}${putPath(i)}`, {
          method: 'PUT',
          headers,
          body: patientXml(i, 0),
        });
        if (response.status !== 201)
          throw new Error(`PUT create answered ${response.status}: ${await response.text()}`);
      }
      let next = 0;
      let round = 1;
      const requests = [
        {
          method: 'PUT',
          setupRequest: (request: Record<string, unknown>) => {
            const i = next;
            next = (next + 1) % PATIENTS;
            if (next === 0) round += 1;
            return { ...request, path: putPath(i), body: patientXml(i, round) };
          },
        },
      ];
      const connectionCounts = options.connections.includes(PUT_CONNECTIONS)
        ? options.connections
        : [PUT_CONNECTIONS];
      for (const connections of connectionCounts) {
        rows.push(
          await measure({ name: 'PASAPI Patient PUT (update, 2 addresses)', dialect }, server, {
            path: putPath(0),
            method: 'PUT',
            headers,
            requests,
            connections,
            durationSeconds: options.durationSeconds,
            warmupSeconds: options.warmupSeconds,
          }),
        );
      }
      const put = rows.find((r) => r.connections === PUT_CONNECTIONS)!;
      const putTarget = dialect === 'mysql' ? 200 : 300;
      notes.push(
        `PUT at ${PUT_CONNECTIONS} connections: ${Math.round(put.requestsPerSec)}/s (target >= ${putTarget}), p99 ${put.p99Ms.toFixed(1)} ms (target <= ${TARGET_P99_MS}); ${put.non2xx} non-2xx; ${PATIENTS} patients round-robin; own schema`,
      );

      // HL7 A08: the patients exist (PUT above, same numbers and identifier type).
      await sendA08s(hl7Port, Math.min(2, options.warmupSeconds), 0, server.pid);
      const a08 = await sendA08s(hl7Port, options.durationSeconds, 500, server.pid);
      rows.push(loadRow('HL7 ADT A08, 1 MLLP connection, ACK awaited', dialect, 1, a08));
      notes.push(
        `A08 over one MLLP connection: ${Math.round(a08.requestsPerSec)} messages/s (target >= ${TARGET_A08_PER_S}), p99 ${a08.p99Ms.toFixed(1)} ms; ${a08.errors} not AA`,
      );
    } finally {
      await server.stop();
    }

    // The replay, in its own process, on the same database (the server stopped).
    const file = path.join(dir, 'backlog.hl7');
    await writeBacklog(file);
    const replay = await runReplay(env, file);
    rows.push(loadRow(`pas replay, ${REPLAY_MESSAGES} messages (file)`, dialect, 1, replay.result));
    const s = replay.rssSamplesMb;
    const tenth = Math.max(1, Math.floor(s.length / 10));
    const mean = (values: readonly number[]) =>
      values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);
    notes.push(
      `replay: ${Math.round(replay.result.requestsPerSec)} messages/s (target >= ${TARGET_REPLAY_PER_S}) over ${replay.result.durationSeconds.toFixed(1)} s; ` +
        `RSS ${s.length} samples: first tenth ${mean(s.slice(0, tenth)).toFixed(0)} MB, last tenth ${mean(s.slice(-tenth)).toFixed(0)} MB, peak ${Math.max(0, ...s).toFixed(0)} MB; "${replay.summary}"`,
    );
  } finally {
    await prepared.cleanup();
    await rm(dir, { recursive: true, force: true });
  }
  return { rows, notes };
}
