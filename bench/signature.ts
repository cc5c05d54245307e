/**
 * Signature import: valid 20 KB PNG signatures posted to `POST /api/v1/sign/add` of the real server
 * (`src/main/server.ts`), each answer 200 "Correct signature saved!" only once its two files are flushed
 * and its rows committed. A handful of CVI events, each with its own unique code, take every post (one
 * event takes any number of signatures: each post is a new signature row). The rate limit is off
 * (SIGN_RATE_LIMIT_PER_MINUTE=0). Target: at least 300 accepted signatures/s at 16 connections on both
 * dialects: `npm run bench -- signature --connections 1,16`.
 *
 * Also reported: how long reading a body with a 1 MB image takes (JSON, strict base64, PNG checks), the
 * work that `body-decoder.ts` moves to a worker thread for bodies above 64 KiB, and the longest stall of
 * this process's event loop while three bodies with 4 MB images are read through that decoder.
 */
import type { Database } from '../src/db/database.ts';
import { createBodyDecoder } from '../src/modules/signature/body-decoder.ts';
import { readSignatureBody } from '../src/modules/signature/signature-body.ts';
import { b64, createCviEventType, createSignableEvent, makePng } from '../test/factories-signature.ts';
import type { BenchReport, BenchRow, BenchRunOptions, RunningProcess } from './lib.ts';
import {
  captureResponse,
  cpuPerRequest,
  measureInterleaved,
  prepareDatabase,
  readCpuMs,
  runLoad,
  startFloor,
  startServer,
} from './lib.ts';

const PATH = '/api/v1/sign/add';
const EVENTS = 8;
const TARGET_PER_SECOND = 300;
const TARGET_CONNECTIONS = 16;

interface EventIds {
  readonly code: string;
  readonly elementId: number;
  readonly elementTypeId: number;
}

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const { dialect, durationSeconds, warmupSeconds } = options;
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  const running: RunningProcess[] = [];
  const events: EventIds[] = [];
  const setup = async (database: Database) => {
    const eventType = await createCviEventType(database.db);
    for (let i = 0; i < EVENTS; i++) {
      const event = await createSignableEvent(database.db, { eventType });
      events.push({ code: event.code, elementId: event.elementId, elementTypeId: event.esignElementTypeId });
    }
  };
  const prepared = await prepareDatabase(dialect, { setup });
  try {
    // Each import flushes two files (file and directory fsyncs) on libuv's thread pool; its default of
    // 4 threads queues them at 16 connections. Deployments should raise it too (docs/OPERATIONS.md).
    const threadPoolSize = process.env.UV_THREADPOOL_SIZE ?? '16';
    const server = await startServer({
      env: { ...prepared.env, SIGN_RATE_LIMIT_PER_MINUTE: '0', UV_THREADPOOL_SIZE: threadPoolSize },
    });
    running.push(server);
    // 100 x 68 RGB noise: a PNG of about 20 KB, as a signature pad's capture.
    const image = b64(makePng(100, 68, { isNoisy: true }));
    const headers = { 'content-type': 'application/json' };
    const bodies = events.map((event) =>
      JSON.stringify({
        unique_identifier: event.code,
        extra_info: JSON.stringify({ e_id: event.elementId, e_t_id: event.elementTypeId }),
        image,
      }),
    );
    const requests = bodies.map((body) => ({ method: 'POST', path: PATH, headers, body }));
    const sample = await captureResponse(`${server.url}${PATH}`, {
      method: 'POST',
      headers,
      body: bodies[0],
    });
    if (sample.status !== 200 || sample.body.toString() !== '"Correct signature saved!"')
      throw new Error(`sign/add answered ${sample.status} ${sample.body.toString()}`);
    const floor = await startFloor(sample);
    running.push(floor);
    notes.push(
      `body: ${Math.round(Buffer.byteLength(bodies[0]!) / 1024)} KiB JSON, ${EVENTS} events round-robin, ` +
        `server UV_THREADPOOL_SIZE=${threadPoolSize}`,
    );

    for (const connections of options.connections) {
      const measured = await measureInterleaved(
        [
          {
            row: { name: 'floor: sign/add bytes', dialect: 'none', isFloor: true },
            target: floor,
            path: PATH,
            method: 'POST',
            headers,
            body: bodies[0],
          },
          {
            row: { name: 'POST /api/v1/sign/add (20 KB PNG)', dialect, floorName: 'floor: sign/add bytes' },
            target: server,
            path: PATH,
            requests,
          },
        ],
        { connections, durationSeconds, warmupSeconds },
      );
      rows.push(...measured);
      // The server's CPU per accepted signature, over a further run of half the duration on its own.
      const cpuBefore = await readCpuMs(server.pid);
      const cpuRun = await runLoad({
        url: `${server.url}${PATH}`,
        requests,
        connections,
        durationSeconds: Math.max(1, durationSeconds / 2),
      });
      notes.push(
        `${connections} conn: ${cpuPerRequest(cpuBefore, await readCpuMs(server.pid), cpuRun.statusCounts['200'] ?? 0)}`,
      );
      const signs = measured[1]!;
      const accepted = (signs.statusCounts['200'] ?? 0) / signs.durationSeconds;
      if (signs.non2xx > 0 || signs.errors > 0)
        notes.push(`${connections} conn: non-2xx answers or errors: ${JSON.stringify(signs.statusCounts)}`);
      if (connections === TARGET_CONNECTIONS) {
        notes.push(
          `${connections} conn: ${accepted.toFixed(0)} accepted signatures/s; target >= ${TARGET_PER_SECOND}: ` +
            (accepted >= TARGET_PER_SECOND ? 'met' : 'MISSED'),
        );
      }
    }
    if (!options.connections.includes(TARGET_CONNECTIONS))
      notes.push(`the target is set at ${TARGET_CONNECTIONS} connections: add it to --connections`);
    notes.push(measureBodyRead());
    notes.push(await measureDecoderStall());
  } finally {
    for (const child of running.reverse()) await child.stop();
    await prepared.cleanup();
  }
  return { rows, notes };
}

/** Time to read a body carrying a 1 MB PNG on one thread (median of a few runs). */
function measureBodyRead(): string {
  const png = makePng(600, 580, { isNoisy: true });
  const body = Buffer.from(
    JSON.stringify({ unique_identifier: 'ABCDEF', extra_info: '{"e_id":1,"e_t_id":1}', image: b64(png) }),
  );
  const times: number[] = [];
  for (let i = 0; i < 7; i++) {
    const start = performance.now();
    const input = readSignatureBody(body);
    times.push(performance.now() - start);
    if (input?.image.state !== 'valid') throw new Error('the 1 MB sample did not read as a valid image');
  }
  times.sort((a, b) => a - b);
  return (
    `reading a body with a ${(png.length / 1e6).toFixed(2)} MB PNG takes ${times[3]!.toFixed(1)} ms ` +
    '(median): bodies above 64 KiB are read on a worker thread, off the event loop'
  );
}

/**
 * The longest event-loop stall while three bodies with 4 MB PNGs are read through the body decoder
 * (worker threads), next to the time one such body takes inline: read inline, the three would run back to
 * back in one tick, one stall of about three times that.
 */
async function measureDecoderStall(): Promise<string> {
  const bodyWith = (png: Buffer) =>
    Buffer.from(
      JSON.stringify({ unique_identifier: 'ABCDEF', extra_info: '{"e_id":1,"e_t_id":1}', image: b64(png) }),
    );
  const png = makePng(1200, 1100, { isNoisy: true });
  const bodies = [1, 2, 3].map(() => bodyWith(png));
  const inlineStart = performance.now();
  readSignatureBody(bodies[0]!);
  const inlineMs = performance.now() - inlineStart;
  const decoder = createBodyDecoder();
  try {
    // Start the worker threads first: spawning one is not part of reading a body.
    await Promise.all([decoder.decode(Buffer.from(bodies[0]!)), decoder.decode(Buffer.from(bodies[1]!))]);
    // A 1 ms ticker: the longest gap between its ticks is the longest stall of the event loop.
    let last = performance.now();
    let maxGapMs = 0;
    const ticker = setInterval(() => {
      const now = performance.now();
      maxGapMs = Math.max(maxGapMs, now - last);
      last = now;
    }, 1);
    try {
      await new Promise((resolve) => setTimeout(resolve, 20));
      const inputs = await Promise.all(bodies.map((body) => decoder.decode(body)));
      if (inputs.some((input) => input?.image.state !== 'valid'))
        throw new Error('a 4 MB sample did not read as a valid image');
      await new Promise((resolve) => setTimeout(resolve, 5));
    } finally {
      clearInterval(ticker);
    }
    return (
      `longest event-loop stall while three bodies with ${(png.length / 1e6).toFixed(1)} MB PNGs are read ` +
      `on worker threads: ${maxGapMs.toFixed(1)} ms (one such body read inline: ${inlineMs.toFixed(1)} ms)`
    );
  } finally {
    await decoder.close();
  }
}
