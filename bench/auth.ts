/**
 * The first figure: what HTTP Basic authentication costs once the credentials are cached.
 *
 * Part 1 (self-contained): bench/auth-server.ts runs the real app with two bench-only routes answering
 * the same bytes, `GET /bench/plain` (no guard) and `GET /bench/auth` (the Basic guard, `OprnApi`). The
 * guard's cost is (plain - guarded) / floor, where the floor is a bare node:http server answering those
 * bytes. Target: under 5%. Floor, plain and guarded are measured interleaved (A-B-C-C-B-A) so that drift
 * on a shared machine falls on all three alike.
 *
 * Part 2 (the product server, src/main/server.ts): `GET /healthz` without auth as the server's baseline,
 * and an authenticated product route, `BENCH_AUTH_PATH` (default
 * `/api/v1/patient/search?term=zzzznotfound`, which answers `[]` from patient search), each against a
 * floor answering its exact bytes.
 */
import type { BenchReport, BenchRow, BenchRunOptions, FloorResponse, RunningProcess } from './lib.ts';
import {
  BENCH_AUTHORIZATION,
  captureResponse,
  ensureBenchAccount,
  measureInterleaved,
  prepareDatabase,
  startFloor,
  startServer,
} from './lib.ts';

const TARGET_OVERHEAD = 0.05;
const DEFAULT_TARGET_PATH = '/api/v1/patient/search?term=zzzznotfound';

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const { dialect, durationSeconds, warmupSeconds } = options;
  const targetPath = process.env.BENCH_AUTH_PATH ?? DEFAULT_TARGET_PATH;
  const headers = { authorization: BENCH_AUTHORIZATION };
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  const running: RunningProcess[] = [];
  const start = async (starting: Promise<RunningProcess>) => {
    const started = await starting;
    running.push(started);
    return started;
  };
  const prepared = await prepareDatabase(dialect, { setup: ensureBenchAccount });
  try {
    const benchServer = await start(startServer({ env: prepared.env, entry: 'bench/auth-server.ts' }));
    const product = await start(startServer({ env: prepared.env }));

    // The first guarded request pays bcrypt and fills the cache; every later one is a cache hit.
    const guardedBytes = await captureResponse(`${benchServer.url}/bench/auth`, { headers });
    if (guardedBytes.status !== 200) throw new Error(`GET /bench/auth answered ${guardedBytes.status}`);
    assertSameBytes(await captureResponse(`${benchServer.url}/bench/plain`), guardedBytes);
    const healthBytes = await captureResponse(`${product.url}/healthz`);
    const targetBytes = await captureResponse(`${product.url}${targetPath}`, { headers });
    if (targetBytes.status !== 200) {
      notes.push(
        `${targetPath} answered ${targetBytes.status} (route not there yet?): its row measures that answer`,
      );
    }
    const benchFloor = await start(startFloor(guardedBytes));
    const healthFloor = await start(startFloor(healthBytes));
    const targetFloor = await start(startFloor(targetBytes));

    for (const connections of options.connections) {
      const load = { connections, durationSeconds, warmupSeconds };
      const [floor, plain, guarded] = await measureInterleaved(
        [
          {
            row: { name: 'floor: bench bytes', dialect: 'none', isFloor: true },
            target: benchFloor,
            path: '/',
          },
          {
            row: { name: 'GET /bench/plain (no auth)', dialect, floorName: 'floor: bench bytes' },
            target: benchServer,
            path: '/bench/plain',
          },
          {
            row: { name: 'GET /bench/auth (Basic, cached)', dialect, floorName: 'floor: bench bytes' },
            target: benchServer,
            path: '/bench/auth',
            headers,
          },
        ],
        load,
      );
      rows.push(floor!, plain!, guarded!);
      rows.push(
        ...(await measureInterleaved(
          [
            {
              row: { name: 'floor: healthz bytes', dialect: 'none', isFloor: true },
              target: healthFloor,
              path: '/',
            },
            {
              row: { name: 'GET /healthz (server, no auth)', dialect, floorName: 'floor: healthz bytes' },
              target: product,
              path: '/healthz',
            },
          ],
          load,
        )),
      );
      rows.push(
        ...(await measureInterleaved(
          [
            {
              row: { name: 'floor: target bytes', dialect: 'none', isFloor: true },
              target: targetFloor,
              path: '/',
            },
            {
              row: {
                name: `GET ${targetPath.split('?')[0]} (Basic, cached)`,
                dialect,
                floorName: 'floor: target bytes',
              },
              target: product,
              path: targetPath,
              headers,
            },
          ],
          load,
        )),
      );

      const overhead = (plain!.requestsPerSec - guarded!.requestsPerSec) / floor!.requestsPerSec;
      notes.push(
        `${connections} conn: Basic auth (cached) costs ${(overhead * 100).toFixed(1)}% of the floor's throughput ` +
          `((plain ${plain!.requestsPerSec.toFixed(0)} - guarded ${guarded!.requestsPerSec.toFixed(0)} req/s) / ` +
          `floor ${floor!.requestsPerSec.toFixed(0)} req/s); target < ${TARGET_OVERHEAD * 100}%: ` +
          (overhead < TARGET_OVERHEAD ? 'met' : 'MISSED'),
      );
      for (const r of [plain!, guarded!]) {
        if (r.non2xx > 0 || r.errors > 0)
          notes.push(`${r.name} at ${connections} conn had non-2xx answers or errors`);
      }
    }
  } finally {
    for (const child of running.reverse()) await child.stop();
    await prepared.cleanup();
  }
  return { rows, notes };
}

/** Plain and guarded must differ only by the guard: same status, header names and body. */
function assertSameBytes(a: FloorResponse, b: FloorResponse): void {
  const names = (r: FloorResponse) => r.headers.map(([name]) => name.toLowerCase()).join(',');
  if (a.status !== b.status || !a.body.equals(b.body) || names(a) !== names(b)) {
    throw new Error('GET /bench/plain and GET /bench/auth do not answer the same bytes');
  }
}
