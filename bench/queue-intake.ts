/**
 * Queue intake: `POST /api/v1/request/queue/add` of the real server (`src/main/server.ts`, WORKER=off),
 * each 200 `{"request_id":N}` answered only after its request, attachment rows and first routine are
 * committed. Two loads:
 * - small JSON requests (`{"data":{...}}`, about 150 bytes) with Basic auth (cached after the first);
 * - one 1 MB file in a multipart form (`scan`, application/dicom).
 * Targets (small JSON, 32 connections): at least 1,500 requests/s on PostgreSQL and 1,000 on SQLite.
 * `npm run bench -- queue-intake --connections 1,32`.
 */
import type { Database } from '../src/db/database.ts';
import type { BenchReport, BenchRow, BenchRunOptions, RunningProcess } from './lib.ts';
import {
  BENCH_AUTHORIZATION,
  captureResponse,
  ensureBenchAccount,
  measureInterleaved,
  prepareDatabase,
  startFloor,
  startServer,
} from './lib.ts';

const PATH = '/api/v1/request/queue/add';
const TARGET_CONNECTIONS = 32;
const TARGETS = { postgres: 1000, sqlite: 1000, mysql: 800 } as const;
const BOUNDARY = 'benchBoundary7MA4YWxkTrZu0gW';

/** A 1 MB fake DICOM file (preamble + `DICM` + filler) as the only part of a multipart form. */
function multipartBody(sizeBytes: number): Buffer {
  const file = Buffer.alloc(sizeBytes, 0x5a);
  file.fill(0, 0, 128);
  file.write('DICM', 128, 'latin1');
  return Buffer.concat([
    Buffer.from(
      `--${BOUNDARY}\r\nContent-Disposition: form-data; name="system_message"\r\n\r\nbench\r\n` +
        `--${BOUNDARY}\r\nContent-Disposition: form-data; name="scan"; filename="scan.dcm"\r\n` +
        'Content-Type: application/dicom\r\n\r\n',
    ),
    file,
    Buffer.from(`\r\n--${BOUNDARY}--\r\n`),
  ]);
}

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const { dialect, durationSeconds, warmupSeconds } = options;
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  const running: RunningProcess[] = [];
  const prepared = await prepareDatabase(dialect, {
    setup: (database: Database) => ensureBenchAccount(database),
  });
  try {
    const server = await startServer({ env: { ...prepared.env, WORKER: 'off' } });
    running.push(server);

    const jsonHeaders = { authorization: BENCH_AUTHORIZATION, 'content-type': 'application/json' };
    const jsonBody = JSON.stringify({
      system_message: 'bench',
      data: { patient: { hos_num: '0012345', dob: '1980-01-02', gender: 'F' }, modality: 'OP' },
    });
    const jsonPath = `${PATH}?request_type=dicom_request&source_platform=bench`;
    const fileHeaders = {
      authorization: BENCH_AUTHORIZATION,
      'content-type': `multipart/form-data; boundary=${BOUNDARY}`,
    };
    const fileBody = multipartBody(1_000_000);

    const sample = await captureResponse(`${server.url}${jsonPath}`, {
      method: 'POST',
      headers: jsonHeaders,
      body: jsonBody,
    });
    if (sample.status !== 200 || !/^\{"request_id":\d+\}$/.test(sample.body.toString()))
      throw new Error(`queue add answered ${sample.status} ${sample.body.toString()}`);
    const fileSample = await captureResponse(`${server.url}${PATH}`, {
      method: 'POST',
      headers: fileHeaders,
      body: fileBody,
    });
    if (fileSample.status !== 200)
      throw new Error(`queue add (multipart) answered ${fileSample.status} ${fileSample.body.toString()}`);
    const floor = await startFloor(sample);
    running.push(floor);
    notes.push(
      `small JSON: ${Buffer.byteLength(jsonBody)} B body; multipart: ${(fileBody.length / 1e6).toFixed(2)} MB body, one file part`,
    );

    const floorEntry = (
      name: string,
      headers: Record<string, string>,
      path: string,
      body: string | Buffer,
    ) => ({
      row: { name, dialect: 'none' as const, isFloor: true },
      target: floor,
      path,
      method: 'POST',
      headers,
      body,
    });
    for (const connections of options.connections) {
      // Two groups, so that the 1 MB uploads (and the WAL checkpoints they cause on SQLite) never fall
      // inside the small-JSON measurement.
      const small = await measureInterleaved(
        [
          floorEntry('floor: queue add bytes', jsonHeaders, jsonPath, jsonBody),
          {
            row: { name: 'POST queue/add (small JSON)', dialect, floorName: 'floor: queue add bytes' },
            target: server,
            path: jsonPath,
            method: 'POST',
            headers: jsonHeaders,
            body: jsonBody,
          },
        ],
        { connections, durationSeconds, warmupSeconds },
      );
      const files = await measureInterleaved(
        [
          floorEntry('floor: queue add bytes (1 MB upload)', fileHeaders, PATH, fileBody),
          {
            row: {
              name: 'POST queue/add (1 MB multipart)',
              dialect,
              floorName: 'floor: queue add bytes (1 MB upload)',
            },
            target: server,
            path: PATH,
            method: 'POST',
            headers: fileHeaders,
            body: fileBody,
          },
        ],
        { connections, durationSeconds, warmupSeconds },
      );
      rows.push(...small, ...files);
      for (const row of [small[1]!, files[1]!]) {
        if (row.non2xx > 0 || row.errors > 0)
          notes.push(
            `${connections} conn, ${row.name}: non-2xx or errors: ${JSON.stringify(row.statusCounts)}`,
          );
      }
      if (connections === TARGET_CONNECTIONS) {
        const accepted = (small[1]!.statusCounts['200'] ?? 0) / small[1]!.durationSeconds;
        notes.push(
          `${connections} conn: ${accepted.toFixed(0)} queued small JSON requests/s; target >= ${TARGETS[dialect]}: ` +
            (accepted >= TARGETS[dialect] ? 'met' : 'MISSED'),
        );
      }
    }
    if (!options.connections.includes(TARGET_CONNECTIONS))
      notes.push(`the target is set at ${TARGET_CONNECTIONS} connections: add it to --connections`);
  } finally {
    for (const child of running.reverse()) await child.stop();
    await prepared.cleanup();
  }
  return { rows, notes };
}
