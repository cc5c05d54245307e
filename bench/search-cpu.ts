/**
 * `npm run bench -- search-cpu --dialect sqlite --duration 5 --connections 32`: CPU time per patient
 * search, from the kernel's accounting rather than from throughput, so that it stays comparable on a
 * loaded machine. The real server answers `GET /api/v1/patient/search` for an exact hospital number on a
 * demo population (`BENCH_PATIENTS`, default 100000, kept as `patients_<N>` like `patient-search`'s); per
 * run the bench reads `utime + stime` of every thread of the server (`/proc/<pid>/task/<tid>/stat`) before
 * and after, and divides by the answers: main thread (the event loop) and the whole process; and the main
 * thread's voluntary context switches per answer (how often the event loop went to sleep and woke up).
 *
 * - `BENCH_BASELINE_DIR=/path/to/other/checkout`: a second server from that checkout's
 *   `src/main/server.ts` (with the Node flags of its `npm start`) on the same database, measured in
 *   A-B-B-A order with this one, so that a change is measured against its baseline in the same run.
 * - `BENCH_BASELINE_ENV="NAME=value NAME2=value"`: the baseline server gets these variables too; without
 *   `BENCH_BASELINE_DIR` the baseline is this checkout with them (e.g. `AUDIT_READS=durable`);
 *   `BENCH_BASELINE_NODE_FLAGS="--flag ..."` likewise adds Node flags (V8 flags NODE_OPTIONS refuses).
 * - Every server is started with `loop-delay-probe.child.js` preloaded: each run also reports the server's
 *   event-loop delay (`monitorEventLoopDelay`, p50 / p99 / max) over its measured seconds.
 * - `BENCH_CPU_PROFILE=1`: afterwards, one more run of this checkout's server under V8's sampling profiler
 *   (`--cpu-prof`, 100 us interval); the samples taken during that run's measured seconds are summarised
 *   by self time per function in microseconds per request, written to
 *   `bench/profiles/search-<date>.md` (`BENCH_PROFILE_NAME` instead of `search-<date>`), with the
 *   flame graph `search-<date>.svg` (`flamegraph.ts`) and the `.cpuprofile` beside it when smaller than
 *   2 MB. `BENCH_PROFILE_ENV="NAME=value ..."`: variables of the
 *   profiled server (e.g. `AUDIT_READS=durable`).
 */
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile, copyFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { demoHospitalNumber, demoPatientAt, generateDemoPopulation } from '../src/modules/dataset/index.ts';
import type { BenchReport, BenchRow, BenchRunOptions, RunningProcess } from './lib.ts';
import * as lib from './lib.ts';
import { flameGraphSvg, type CpuProfile } from './flamegraph.ts';

const INSTITUTION_CODE = 'NEW';
/** Clock ticks per second of /proc/<pid>/stat times (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100;
const BUDGET_US = 60;

interface CpuTimes {
  readonly mainTicks: number;
  readonly allTicks: number;
}

/** utime + stime of the main thread and of every thread of `pid`, in clock ticks. */
async function readCpuTicks(pid: number): Promise<CpuTimes> {
  let mainTicks = 0;
  let allTicks = 0;
  for (const tid of await readdir(`/proc/${pid}/task`)) {
    let text: string;
    try {
      text = await readFile(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // a thread that ended meanwhile
    }
    // Fields after the command name (which may hold spaces) start at field 3; utime and stime are 14, 15.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    allTicks += ticks;
    if (tid === String(pid)) mainTicks += ticks;
  }
  return { mainTicks, allTicks };
}

/**
 * Context switches of the main thread (`/proc/<pid>/task/<pid>/status`): voluntary ones are mostly its
 * waits in epoll (a wake-up each), involuntary ones preemptions by other work on the machine.
 */
async function readContextSwitches(pid: number): Promise<{ voluntary: number; involuntary: number }> {
  const text = await readFile(`/proc/${pid}/task/${pid}/status`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return { voluntary: field('voluntary_ctxt_switches'), involuntary: field('nonvoluntary_ctxt_switches') };
}

interface CpuRow extends BenchRow {
  readonly mainUsPerRequest: number;
  readonly allUsPerRequest: number;
  readonly loopDelay: lib.LoopDelay;
  /** The main thread's voluntary context switches (wake-ups) per request. */
  readonly wakeUpsPerRequest: number;
  /** Times per second the main thread was preempted (involuntary context switches): the machine's load. */
  readonly preemptionsPerSecond: number;
}

/** A server under test with its event-loop delay probe. */
interface ProbedServer {
  readonly process: RunningProcess;
  readonly probe: lib.LoopProbe;
}

async function measureCpu(
  name: string,
  { process: server, probe }: ProbedServer,
  urlPath: string,
  options: BenchRunOptions,
  connections: number,
  onWindow?: (startNs: bigint, endNs: bigint) => void,
): Promise<CpuRow> {
  const headers = { authorization: lib.BENCH_AUTHORIZATION };
  if (options.warmupSeconds > 0) {
    await lib.runLoad({
      url: `${server.url}${urlPath}`,
      headers,
      connections,
      durationSeconds: options.warmupSeconds,
    });
  }
  await probe.read(server.pid);
  const before = await readCpuTicks(server.pid);
  const switchesBefore = await readContextSwitches(server.pid);
  const startNs = process.hrtime.bigint();
  const load = await lib.runLoad({
    url: `${server.url}${urlPath}`,
    headers,
    connections,
    durationSeconds: options.durationSeconds,
    samplePid: server.pid,
  });
  const endNs = process.hrtime.bigint();
  const after = await readCpuTicks(server.pid);
  const switchesAfter = await readContextSwitches(server.pid);
  const loopDelay = await probe.read(server.pid);
  onWindow?.(startNs, endNs);
  const perRequest = (ticks: number) =>
    load.totalRequests === 0 ? 0 : ((ticks / TICKS_PER_SECOND) * 1e6) / load.totalRequests;
  return {
    name,
    dialect: options.dialect,
    connections,
    ...load,
    mainUsPerRequest: perRequest(after.mainTicks - before.mainTicks),
    allUsPerRequest: perRequest(after.allTicks - before.allTicks),
    loopDelay,
    wakeUpsPerRequest:
      load.totalRequests === 0
        ? 0
        : (switchesAfter.voluntary - switchesBefore.voluntary) / load.totalRequests,
    preemptionsPerSecond: (switchesAfter.involuntary - switchesBefore.involuntary) / load.durationSeconds,
  };
}

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const patients = Number(process.env.BENCH_PATIENTS ?? 100_000);
  const baselineDir = process.env.BENCH_BASELINE_DIR;
  const isProfiled = process.env.BENCH_CPU_PROFILE === '1';
  /** Extra variables of the profiled server (`BENCH_PROFILE_ENV`, e.g. `AUDIT_READS=durable`). */
  const profileEnv = parseEnvList(process.env.BENCH_PROFILE_ENV ?? '');
  const prepared = await lib.prepareDatabase(options.dialect, {
    persistentName: `patients_${patients}`,
    fill: async (database) => {
      process.stderr.write(`Building ${patients} demo patients on ${options.dialect}...\n`);
      await generateDemoPopulation(database, { patients, institutionCode: INSTITUTION_CODE });
      await database.dialect.analyzeTables(['patient', 'contact', 'patient_identifier']);
    },
    setup: lib.ensureBenchAccount,
  });
  let k = Math.floor(patients * 0.618);
  while (demoPatientAt(k).isDeleted) k = (k + 1) % patients;
  const urlPath = `/api/v1/patient/search?term=${encodeURIComponent(demoHospitalNumber(k))}`;
  const env = { ...prepared.env, INSTITUTION_CODE };
  const rows: CpuRow[] = [];
  const notes: string[] = [];
  const running: RunningProcess[] = [];
  const baselineEnv = parseEnvList(process.env.BENCH_BASELINE_ENV ?? '');
  /** Node flags added to the baseline's (V8 flags that NODE_OPTIONS refuses, e.g. GC settings). */
  const baselineFlags = (process.env.BENCH_BASELINE_NODE_FLAGS ?? '').split(/\s+/).filter((f) => f !== '');
  const probeDir = await mkdtemp(path.join(tmpdir(), 'cra-loop-probe-'));
  const startProbed = async (
    name: string,
    options: {
      readonly env?: Record<string, string>;
      readonly entryDir?: string;
      readonly extraFlags?: readonly string[];
    },
  ): Promise<ProbedServer> => {
    const probe = lib.createLoopProbe(probeDir, name, options.env?.NODE_OPTIONS);
    const flags =
      options.entryDir === undefined
        ? lib.START_NODE_FLAGS
        : lib.startNodeFlagsOf(path.resolve(options.entryDir));
    const server = await lib.startServer({
      env: { ...env, ...options.env, ...probe.env },
      nodeFlags: [...flags, ...(options.extraFlags ?? [])],
      ...(options.entryDir === undefined
        ? {}
        : { entry: path.resolve(options.entryDir, 'src/main/server.ts') }),
    });
    running.push(server);
    return { process: server, probe };
  };
  try {
    const candidate = await startProbed('candidate', {});
    const hasBaseline =
      (baselineDir !== undefined && baselineDir !== '') ||
      Object.keys(baselineEnv).length > 0 ||
      baselineFlags.length > 0;
    const baseline = hasBaseline
      ? await startProbed('baseline', {
          env: baselineEnv,
          extraFlags: baselineFlags,
          ...(baselineDir === undefined || baselineDir === '' ? {} : { entryDir: baselineDir }),
        })
      : undefined;
    if (baseline !== undefined) {
      const where = baselineDir === undefined || baselineDir === '' ? 'this checkout' : baselineDir;
      const extra = [...Object.entries(baselineEnv).map(([k, v]) => `${k}=${v}`), ...baselineFlags];
      notes.push(`baseline: ${where}${extra.length > 0 ? ` with ${extra.join(' ')}` : ''}`);
    }
    // The floor: a bare node:http server answering the very bytes of this search, so that what the
    // service itself costs per search is the difference (its main thread's CPU per request bounds what
    // any server on this Node and machine can reach).
    const floorProbe = lib.createLoopProbe(probeDir, 'floor', process.env.NODE_OPTIONS);
    const floorProcess = await lib.startFloor(
      await lib.captureResponse(`${candidate.process.url}${urlPath}`, {
        headers: { authorization: lib.BENCH_AUTHORIZATION },
      }),
      floorProbe.env,
    );
    running.push(floorProcess);
    const floor: ProbedServer = { process: floorProcess, probe: floorProbe };
    for (const connections of options.connections) {
      rows.push(await measureCpu('floor: same bytes, bare node:http', floor, urlPath, options, connections));
      const order =
        baseline === undefined
          ? [['this checkout', candidate] as const]
          : ([
              ['baseline', baseline],
              ['this checkout', candidate],
              ['this checkout', candidate],
              ['baseline', baseline],
            ] as const);
      for (const [label, server] of order) {
        rows.push(await measureCpu(`identifier search: ${label}`, server, urlPath, options, connections));
      }
    }
    for (const child of running.splice(0)) await child.stop();

    if (isProfiled) {
      const connections = options.connections.at(-1)!;
      const profileDir = await mkdtemp(path.join(tmpdir(), 'cra-cpu-prof-'));
      try {
        const profiled = await startProbed('profiled', {
          env: {
            ...profileEnv,
            NODE_OPTIONS:
              `${process.env.NODE_OPTIONS ?? ''} --cpu-prof --cpu-prof-interval=100 --cpu-prof-dir=${profileDir}`.trim(),
          },
        });
        let window: [bigint, bigint] = [0n, 0n];
        const row = await measureCpu(
          'identifier search: profiled',
          profiled,
          urlPath,
          options,
          connections,
          (a, b) => {
            window = [a, b];
          },
        );
        rows.push(row);
        await profiled.process.stop();
        running.splice(running.indexOf(profiled.process), 1);
        const envText = Object.entries(profileEnv)
          .map(([k, v]) => `${k}=${v} `)
          .join('');
        notes.push(...(await summariseProfile(profileDir, profiled.process.pid, window, row, envText)));
      } finally {
        await rm(profileDir, { recursive: true, force: true });
      }
    }
  } finally {
    for (const child of running.splice(0)) await child.stop();
    await prepared.cleanup();
    await rm(probeDir, { recursive: true, force: true });
  }
  for (const row of rows) {
    notes.push(
      `${row.name}, ${row.connections} conn: ${row.requestsPerSec.toFixed(0)} req/s, main thread ${row.mainUsPerRequest.toFixed(1)} us/request, all threads ${row.allUsPerRequest.toFixed(1)} us/request (budget ${BUDGET_US} us main thread), ${row.wakeUpsPerRequest.toFixed(2)} wake-ups/request; event-loop delay p50 ${row.loopDelay.p50Ms.toFixed(2)} / p99 ${row.loopDelay.p99Ms.toFixed(2)} / max ${row.loopDelay.maxMs.toFixed(2)} ms; GC ${row.loopDelay.gcCount} pauses, ${row.loopDelay.gcTotalMs.toFixed(0)} ms in all, longest ${row.loopDelay.gcMaxMs.toFixed(1)} ms (major: ${row.loopDelay.gcMajorCount}, ${row.loopDelay.gcMajorTotalMs.toFixed(0)} ms, longest ${row.loopDelay.gcMajorMaxMs.toFixed(1)} ms); preempted ${row.preemptionsPerSecond.toFixed(0)}/s`,
    );
  }
  return { rows, notes };
}

/** `NAME=value NAME2=value` (whitespace-separated) as an environment. */
function parseEnvList(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const word of text.split(/\s+/)) {
    if (word === '') continue;
    const equals = word.indexOf('=');
    if (equals <= 0) throw new Error(`"${word}" is not NAME=value`);
    env[word.slice(0, equals)] = word.slice(equals + 1);
  }
  return env;
}

// ---------------------------------------------------------------------------------------------------
// Profile summary

/** Where a function lives: this project's file, an npm package, Node's own code, or V8. */
function originOf(url: string): string {
  if (url === '') return '(V8 / native)';
  const packageMatch = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (packageMatch !== null) return packageMatch[1]!;
  if (url.startsWith('node:')) return 'node';
  const own = url.indexOf('/src/');
  return own >= 0 ? url.slice(own + 1) : url;
}

async function summariseProfile(
  dir: string,
  pid: number,
  window: readonly [bigint, bigint],
  row: CpuRow,
  /** The profiled server's extra variables, as `NAME=value ` words. */
  envText: string,
): Promise<string[]> {
  // The main thread's profile is CPU.<date>.<time>.<pid>.0.<seq>.cpuprofile (thread id 0).
  const files = (await readdir(dir)).filter((f) => f.includes(`.${pid}.0.`) && f.endsWith('.cpuprofile'));
  if (files.length !== 1) return [`profile: expected one main-thread profile, found ${files.length}`];
  const file = path.join(dir, files[0]!);
  const profile = JSON.parse(await readFile(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
  const [startUs, endUs] = [Number(window[0] / 1000n), Number(window[1] / 1000n)];
  const selfUs = new Map<number, number>();
  let t = profile.startTime;
  let totalUs = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const delta = profile.timeDeltas[i]!;
    t += delta;
    if (t < startUs || t > endUs) continue;
    const node = byId.get(profile.samples[i]!)!;
    if (node.callFrame.functionName === '(idle)') continue;
    selfUs.set(node.id, (selfUs.get(node.id) ?? 0) + delta);
    totalUs += delta;
  }
  const requests = row.totalRequests;
  const perRequest = (us: number) => (us / requests).toFixed(2);
  const byFunction = new Map<string, number>();
  const byOrigin = new Map<string, number>();
  /** Self time of a function by the chain of its three nearest callers. */
  const callers = new Map<string, Map<string, number>>();
  const keyOf = (id: number) => {
    const frame = byId.get(id)!.callFrame;
    const origin = originOf(frame.url);
    return `${frame.functionName || '(anonymous)'} ${origin}${frame.url === '' ? '' : `:${frame.lineNumber + 1}`}`;
  };
  for (const [id, us] of selfUs) {
    const key = keyOf(id);
    byFunction.set(key, (byFunction.get(key) ?? 0) + us);
    const origin = originOf(byId.get(id)!.callFrame.url);
    byOrigin.set(origin, (byOrigin.get(origin) ?? 0) + us);
    const chain: string[] = [];
    for (let p = parentOf.get(id); p !== undefined && chain.length < 3; p = parentOf.get(p))
      chain.push(keyOf(p));
    const byChain = callers.get(key) ?? new Map<string, number>();
    byChain.set(chain.join(' < '), (byChain.get(chain.join(' < ')) ?? 0) + us);
    callers.set(key, byChain);
  }
  const top = (map: Map<string, number>, count: number) =>
    [...map].sort((a, b) => b[1] - a[1]).slice(0, count);
  const date = new Date().toISOString().slice(0, 10);
  const name = process.env.BENCH_PROFILE_NAME ?? `search-${date}`;
  const outDir = path.join(lib.ROOT_DIR, 'bench', 'profiles');
  await mkdir(outDir, { recursive: true });
  const profileSize = (await stat(file)).size;
  if (profileSize < 2 * 1024 * 1024) await copyFile(file, path.join(outDir, `${name}.cpuprofile`));
  const svg = flameGraphSvg(profile, {
    title: `Patient search (identifier), main thread, ${row.dialect}, ${row.connections} connections, ${date}`,
    requests,
    windowUs: [startUs, endUs],
    originOf,
  });
  await writeFile(path.join(outDir, `${name}.svg`), svg);
  const lines = [
    `# Patient search (identifier), main thread CPU profile, ${date}`,
    '',
    `\`${envText}BENCH_CPU_PROFILE=1 npm run bench -- search-cpu --dialect ${row.dialect} --duration ${row.durationSeconds.toFixed(0)} --connections ${row.connections}\`;`,
    `${requests} requests in the measured window at ${row.connections} connections (${row.requestsPerSec.toFixed(0)} req/s under the profiler),`,
    `${perRequest(totalUs)} us of sampled main-thread time per request (idle excluded; the kernel's count for`,
    `the same run: ${row.mainUsPerRequest.toFixed(1)} us). Sampling interval 100 us; the profiler itself slows the process.`,
    `Event-loop delay over the run: p50 ${row.loopDelay.p50Ms.toFixed(2)} ms, p99 ${row.loopDelay.p99Ms.toFixed(2)} ms, max ${row.loopDelay.maxMs.toFixed(2)} ms;`,
    `GC: ${row.loopDelay.gcCount} pauses, ${row.loopDelay.gcTotalMs.toFixed(0)} ms in all, longest ${row.loopDelay.gcMaxMs.toFixed(1)} ms (major: ${row.loopDelay.gcMajorCount}, ${row.loopDelay.gcMajorTotalMs.toFixed(0)} ms, longest ${row.loopDelay.gcMajorMaxMs.toFixed(1)} ms); main thread preempted ${row.preemptionsPerSecond.toFixed(0)} times/s.`,
    `Flame graph: \`${name}.svg\` (frames under 0.2% of the time left out). ` +
      (profileSize < 2 * 1024 * 1024
        ? `The profile is \`${name}.cpuprofile\` (open it in Chrome DevTools, Performance, or speedscope).`
        : `The profile (${(profileSize / 1e6).toFixed(1)} MB) is not kept.`),
    '',
    '## By origin (self time, us per request)',
    '',
    '| origin | us/request | share |',
    '|---|---|---|',
    ...top(byOrigin, 25).map(
      ([origin, us]) => `| ${origin} | ${perRequest(us)} | ${((us / totalUs) * 100).toFixed(1)}% |`,
    ),
    '',
    '## Top functions (self time, us per request)',
    '',
    '| function origin:line | us/request | share |',
    '|---|---|---|',
    ...top(byFunction, 40).map(
      ([key, us]) =>
        `| \`${key.replace(/\|/g, '\\|')}\` | ${perRequest(us)} | ${((us / totalUs) * 100).toFixed(1)}% |`,
    ),
    '',
    '## Callers of the top ten (three nearest frames, us per request)',
    '',
    ...top(byFunction, 10).flatMap(([key]) => [
      `- \`${key}\``,
      ...top(callers.get(key)!, 3).map(
        ([chain, us]) => `  - ${perRequest(us)} from \`${chain || '(root)'}\``,
      ),
    ]),
    '',
  ];
  const out = path.join(outDir, `${name}.md`);
  await writeFile(out, lines.join('\n'));
  return [
    `profile: ${perRequest(totalUs)} us sampled per request; summary in ${path.relative(lib.ROOT_DIR, out)}`,
    ...top(byOrigin, 8).map(([origin, us]) => `  ${origin}: ${perRequest(us)} us/request`),
  ];
}
