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
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import { createLocalFileStore } from '../src/files/file-store.ts';
import { createBasicAuthGuard } from '../src/http/basic-auth.ts';
import type { ModuleOptions } from '../src/http/module.ts';
import { createAuthenticator } from '../src/modules/user/index.ts';
import type {
  BenchReport,
  BenchRow,
  BenchRunOptions,
  FloorResponse,
  PreparedDatabase,
  RunningProcess,
} from './lib.ts';
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

/** The two bench-only routes: the same bytes, one behind the Basic guard. */
export function registerBenchAuthRoutes(scope: FastifyInstance, { basicAuth }: ModuleOptions): void {
  scope.get('/bench/plain', async () => []);
  scope.get('/bench/auth', { preHandler: basicAuth({ operation: 'OprnApi' }) }, async () => []);
}
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

    const guardCostUs = await measureGuardInProcess(prepared);

    for (const connections of options.connections) {
      const load = { connections, durationSeconds, warmupSeconds };
      // Re-verify before each guarded run, so that the cache entry (AUTH_CACHE_TTL_MS) does not expire
      // during it and make every open connection pay bcrypt at once.
      const primeCache = async () => {
        await captureResponse(`${benchServer.url}/bench/auth`, { headers });
      };
      const primeProductCache = async () => {
        await captureResponse(`${product.url}${targetPath}`, { headers });
      };
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
            beforeRun: primeCache,
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
              beforeRun: primeProductCache,
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
      notes.push(
        `${connections} conn: in-process, the guard itself (cached) takes ${guardCostUs.toFixed(2)} µs of CPU per request, ` +
          `${((guardCostUs * floor!.requestsPerSec) / 1e4).toFixed(1)}% of the floor's time per request ` +
          `(1 / ${floor!.requestsPerSec.toFixed(0)} req/s)`,
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

/**
 * The guard's own CPU per request, without network or framework noise: the real guard
 * (`createBasicAuthGuard` over the real authenticator and database), a callback-style hook, called
 * directly with a cached header in a synchronous loop (each call must answer through `done` before it
 * returns), in rounds; the median, in microseconds. It leaves out what Fastify spends on running a
 * preHandler at all, which the HTTP rows include.
 */
async function measureGuardInProcess(prepared: PreparedDatabase): Promise<number> {
  const config = loadConfig({ ...prepared.env, LOG_LEVEL: 'silent' });
  const database = await openDatabase(config.database, { poolSize: 2 });
  try {
    const deps = {
      config,
      database,
      files: createLocalFileStore(config.filesDir),
      authenticator: createAuthenticator(database.db, { cacheTtlMs: 3_600_000 }),
    };
    const guard = createBasicAuthGuard(deps)({ operation: 'OprnApi' });
    // Only what the guard reads of a request: the header, the client address and the request logger.
    const request = {
      headers: { authorization: BENCH_AUTHORIZATION },
      ip: '127.0.0.1',
      log: { info: () => {} },
    } as unknown as FastifyRequest;
    const reply = {} as FastifyReply;
    // The guard is a callback-style hook: it answers through `done`, synchronously on a cache hit.
    const callGuard = guard as unknown as (
      request: FastifyRequest,
      reply: FastifyReply,
      done: (error?: Error) => void,
    ) => void;
    // The first call pays bcrypt and fills the cache; a guard that never calls `done` fails the bench
    // instead of hanging it.
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the guard did not call done within 30 s')), 30_000);
      callGuard(request, reply, (error) => {
        clearTimeout(timer);
        if (error === undefined) resolve();
        else reject(error);
      });
    });
    if (request.principal === undefined)
      throw new Error('the guard let the bench account in without a principal');
    let answered = 0;
    let refusal: Error | undefined;
    const done = (error?: Error) => {
      answered += 1;
      if (error !== undefined) refusal = error;
    };
    const perCallUs = (count: number) => {
      answered = 0;
      const started = process.hrtime.bigint();
      for (let i = 0; i < count; i += 1) callGuard(request, reply, done);
      const elapsedNs = Number(process.hrtime.bigint() - started);
      // Every call must have passed from the cache before returning: anything else is not this figure.
      if (refusal !== undefined) throw new Error(`the guard refused a cached request: ${refusal.message}`);
      if (answered !== count)
        throw new Error(`the guard answered ${answered} of ${count} cached calls at once`);
      return elapsedNs / 1000 / count;
    };
    perCallUs(20_000);
    const rounds: number[] = [];
    for (let round = 0; round < 7; round += 1) rounds.push(perCallUs(20_000));
    return rounds.sort((a, b) => a - b)[Math.floor(rounds.length / 2)]!;
  } finally {
    await database.close();
  }
}

/** Plain and guarded must differ only by the guard: same status, header names and body. */
function assertSameBytes(a: FloorResponse, b: FloorResponse): void {
  const names = (r: FloorResponse) => r.headers.map(([name]) => name.toLowerCase()).join(',');
  if (a.status !== b.status || !a.body.equals(b.body) || names(a) !== names(b)) {
    throw new Error('GET /bench/plain and GET /bench/auth do not answer the same bytes');
  }
}
