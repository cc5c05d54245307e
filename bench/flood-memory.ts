/**
 * Memory after hostile floods: does the server's RSS come back once the load ends? The real server
 * (`src/main/server.ts`, WORKER=off, DICOM port open) with `memory-probe.child.js` preloaded; its idle RSS
 * is read, then, all at once:
 *
 * - `STOW-RS`: `BENCH_FLOOD_PARALLEL` parallel `POST /api/v1/dicomweb/studies`, each one instance of
 *   `BENCH_FLOOD_MB` MiB, `BENCH_FLOOD_ROUNDS` times;
 * - `C-STORE`: as many parallel `storescu` associations, each sending the same number of such instances;
 * - a connection flood: `BENCH_FLOOD_CONNECTIONS` TCP connections from 127.0.0.x that send 64 KiB of a
 *   never-ending A-ASSOCIATE-RQ and then nothing (the DICOM port closes them);
 * - refused DIMSE: C-ECHOs carrying a 2 MiB data set (the port aborts them).
 *
 * Then RSS is sampled every second for `BENCH_FLOOD_SETTLE_S` seconds (default 60). Rows (one per
 * moment: idle, peak, +1 s, +60 s) give RSS and, in the notes, what it is made of: `process.memoryUsage()`
 * of the main thread (heap, external, array buffers), malloc'ed memory as V8 counts it, anonymous and file
 * pages (`/proc/<pid>/smaps_rollup`) and the process's threads by name (`/proc/<pid>/task/<tid>/comm`:
 * DICOM worker threads and their isolates, libuv, V8 platform, libvips). Target: +60 s within 50 MB of
 * idle. `npm run bench -- flood-memory --dialect sqlite` (the --duration/--connections options do not
 * apply).
 */
import { createReadStream } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { buildInstance } from '../test/dicom-instances.ts';
import { runDcmtk } from '../test/dcmtk.ts';
import { freePort } from '../test/ports.ts';
import type { BenchReport, BenchRow, BenchRunOptions } from './lib.ts';
import * as lib from './lib.ts';

const PROBE = path.join(lib.ROOT_DIR, 'bench', 'memory-probe.child.js');
const PARALLEL = Number(process.env.BENCH_FLOOD_PARALLEL ?? 8);
const INSTANCE_MB = Number(process.env.BENCH_FLOOD_MB ?? 24);
const ROUNDS = Number(process.env.BENCH_FLOOD_ROUNDS ?? 2);
const CONNECTIONS = Number(process.env.BENCH_FLOOD_CONNECTIONS ?? 1000);
const SETTLE_SECONDS = Number(process.env.BENCH_FLOOD_SETTLE_S ?? 60);
const TARGET_MB = 50;
const BOUNDARY = 'benchFloodBoundary7a1e';
const SCU_AE = 'BENCHSCU';
/** The C-ECHO attacker: another AE title and address, so that the senders' association limits stay theirs. */
const ECHO_AE = 'BENCHECHO';
const ECHO_ADDRESS = '127.0.0.10';
const CALLED_AE = 'CRA';
const MiB = 1024 * 1024;

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const { dialect } = options;
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-bench-flood-'));
  const probeFile = path.join(dir, 'probe.jsonl');
  const files: string[][] = [];
  for (let p = 0; p < PARALLEL; p += 1) {
    const streamDir = path.join(dir, `s${p}`);
    await mkdir(streamDir);
    const own: string[] = [];
    for (let r = 0; r < ROUNDS; r += 1) {
      const file = path.join(streamDir, `${r}.dcm`);
      await writeFile(file, buildInstance({ pixelBytes: INSTANCE_MB * MiB }));
      own.push(file);
    }
    files.push(own);
  }
  const prepared = await lib.prepareDatabase(dialect, { setup: (db) => lib.ensureBenchAccount(db) });
  const dicomPort = await freePort();
  const server = await lib.startServer({
    env: {
      ...prepared.env,
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${PROBE}`.trim(),
      BENCH_MEMORY_PROBE_FILE: probeFile,
      DICOM_PORT: String(dicomPort),
      DICOM_AE_TITLE: CALLED_AE,
      DICOM_ALLOWED_CALLERS: `${SCU_AE}@127.0.0.1,${ECHO_AE}@${ECHO_ADDRESS}`,
    },
  });
  const rows: BenchRow[] = [];
  const notes: string[] = [
    `floods: ${PARALLEL} parallel STOW-RS and ${PARALLEL} parallel C-STORE of ${INSTANCE_MB} MiB instances x ${ROUNDS}, ` +
      `${CONNECTIONS} unassociated connections of 64 KiB, 8 C-ECHOs with a 2 MiB data set; then ${SETTLE_SECONDS} s idle`,
  ];
  try {
    // A first STOW-RS and C-STORE of a small instance: the idle figure is the server once its DICOM stack
    // is loaded, as after any first instance, so that what is measured is what the floods leave.
    const small = path.join(dir, 'small.dcm');
    await writeFile(small, buildInstance({ pixelBytes: 64 * 1024 }));
    await stow(server.url, [small]);
    await cStore(dicomPort, [small]);
    await sleep(2000);
    const idle = await snapshot(server.pid, probeFile, 'idle');

    const sampler = lib.startRssSampler(server.pid, 100);
    const started = performance.now();
    const outcomes = await Promise.all([
      Promise.all(files.map(async (own) => stow(server.url, own))).then((n) => n.flat()),
      Promise.all(files.map(async (own) => cStore(dicomPort, own))),
      connectionFlood(dicomPort),
      refusedEchoes(dicomPort),
    ]);
    const loadSeconds = (performance.now() - started) / 1000;
    const peak = await sampler.stop();
    notes.push(
      `load ${loadSeconds.toFixed(1)} s: STOW-RS statuses ${JSON.stringify(count(outcomes[0]))}, ` +
        `C-STORE exits ${JSON.stringify(count(outcomes[1]))}, flood connections closed by the server ${outcomes[2]}, ` +
        `C-ECHOs aborted ${outcomes[3]}`,
    );
    await sleep(1000);
    const after1 = await snapshot(server.pid, probeFile, '+1 s');
    const curve: number[] = [];
    for (let s = 2; s <= SETTLE_SECONDS; s += 1) {
      await sleep(1000);
      curve.push(await lib.readRssBytes(server.pid));
    }
    const after60 = await snapshot(server.pid, probeFile, `+${SETTLE_SECONDS} s`);
    const delta = (after60.rss - idle.rss) / MiB;
    notes.push(
      `RSS idle ${mb(idle.rss)}, peak ${mb(peak)}, +1 s ${mb(after1.rss)}, +${SETTLE_SECONDS} s ${mb(after60.rss)} MB: ` +
        `${delta.toFixed(0)} MB above idle (target <= ${TARGET_MB}): ${delta <= TARGET_MB ? 'met' : 'MISSED'}`,
      `RSS every 10 s after the load (MB): ${curve
        .filter((_, i) => (i + 2) % 10 === 0)
        .map((b) => mb(b))
        .join(' ')}`,
    );
    const trimmed: Snapshot[] = [];
    if (process.env.BENCH_FLOOD_MALLOC_TRIM === '1') {
      // Diagnosis: how much of what stays is free memory glibc keeps (malloc_trim gives it back) rather than
      // memory in use.
      const { spawnSync } = await import('node:child_process');
      spawnSync('gdb', ['-p', String(server.pid), '-batch', '-ex', 'call (int)malloc_trim(0)'], {
        stdio: 'ignore',
      });
      trimmed.push(await snapshot(server.pid, probeFile, `+${SETTLE_SECONDS} s, then malloc_trim(0)`));
    }
    for (const s of [idle, after1, after60, ...trimmed]) notes.push(describe(s));
    for (const s of [idle, after1, after60]) {
      rows.push({
        name: `${s.label}`,
        dialect,
        connections: PARALLEL,
        requestsPerSec: 0,
        bytesPerSec: 0,
        p50Ms: 0,
        p99Ms: 0,
        totalRequests: 0,
        durationSeconds: 0,
        errors: 0,
        timeouts: 0,
        non2xx: 0,
        statusCounts: {},
        rssPeakBytes: s.label === '+1 s' ? peak : s.rss,
        rssAfterBytes: s.rss,
      });
    }
  } finally {
    await server.stop();
    await prepared.cleanup();
    await rm(dir, { recursive: true, force: true });
  }
  return { rows, notes };
}

interface Snapshot {
  readonly label: string;
  readonly rss: number;
  readonly anonymous: number;
  readonly file: number;
  readonly threads: Record<string, number>;
  /** Anonymous RSS by kind of mapping (`/proc/<pid>/smaps`). */
  readonly anonymousByKind: Record<string, number>;
  readonly probe: {
    memory: NodeJS.MemoryUsage;
    mallocedBytes: number;
  };
}

async function snapshot(pid: number, probeFile: string, label: string): Promise<Snapshot> {
  const before = await lineCount(probeFile);
  process.kill(pid, 'SIGUSR2');
  const deadline = Date.now() + 10_000;
  while ((await lineCount(probeFile)) === before) {
    if (Date.now() > deadline) throw new Error('the memory probe did not answer');
    await sleep(20);
  }
  const lines = (await readFile(probeFile, 'utf8')).trim().split('\n');
  const probe = JSON.parse(lines.at(-1)!) as Snapshot['probe'];
  const rollup = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kb = (field: string) =>
    Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(rollup)?.[1] ?? 0) * 1024;
  const threads: Record<string, number> = {};
  for (const tid of await readdir(`/proc/${pid}/task`)) {
    const name = (await readFile(`/proc/${pid}/task/${tid}/comm`, 'utf8').catch(() => '?')).trim();
    threads[name] = (threads[name] ?? 0) + 1;
  }
  return {
    label,
    anonymousByKind: await anonymousByKind(pid),
    rss: await lib.readRssBytes(pid),
    anonymous: kb('Anonymous'),
    file: kb('Rss') - kb('Anonymous'),
    threads,
    probe,
  };
}

/**
 * Anonymous resident memory by mapping: glibc's main heap (`[heap]`), its other arenas (mappings of
 * 64 MiB, the size glibc reserves for a thread's heap, counted with their inaccessible part), thread
 * stacks, and the rest (V8's heap pages and large Buffers, which are mapped on their own).
 */
async function anonymousByKind(pid: number): Promise<Record<string, number>> {
  const text = await readFile(`/proc/${pid}/smaps`, 'utf8');
  const kinds: Record<string, number> = {};
  let kind = 'other';
  for (const line of text.split('\n')) {
    const header = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (header !== null) {
      const from = parseInt(header[1]!, 16);
      const to = parseInt(header[2]!, 16);
      const name = header[4]!;
      // A thread arena: 64 MiB aligned, read-write at its start, the rest of the 64 MiB inaccessible.
      const isArenaStart = from % (64 * MiB) === 0 && name === '' && to - from <= 64 * MiB;
      kind =
        name === '[heap]'
          ? 'malloc main heap'
          : name.startsWith('[stack')
            ? 'stacks'
            : name !== ''
              ? 'file'
              : isArenaStart && header[3]!.startsWith('rw')
                ? 'malloc thread arenas'
                : 'other anonymous';
      continue;
    }
    const anonymous = /^Anonymous:\s+(\d+) kB/.exec(line);
    if (anonymous !== null && kind !== 'file') kinds[kind] = (kinds[kind] ?? 0) + Number(anonymous[1]) * 1024;
  }
  return kinds;
}

function describe(s: Snapshot): string {
  const m = s.probe.memory;
  return (
    `${s.label}: RSS ${mb(s.rss)} MB = anonymous ${mb(s.anonymous)} + file ${mb(s.file)}; main thread heap ` +
    `${mb(m.heapUsed)}/${mb(m.heapTotal)}, external ${mb(m.external)} (array buffers ${mb(m.arrayBuffers)}), ` +
    `V8 malloced ${mb(s.probe.mallocedBytes)}; anonymous by mapping ${Object.entries(s.anonymousByKind)
      .map(([kind, bytes]) => `${kind} ${mb(bytes)}`)
      .join(', ')}; threads ${Object.entries(s.threads)
      .map(([name, n]) => `${name} x${n}`)
      .join(', ')}`
  );
}

async function lineCount(file: string): Promise<number> {
  try {
    return (await readFile(file, 'utf8')).split('\n').filter((l) => l !== '').length;
  } catch {
    return 0;
  }
}

function mb(bytes: number): string {
  return (bytes / MiB).toFixed(0);
}

function count(values: readonly (string | number)[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const v of values) counts[String(v)] = (counts[String(v)] ?? 0) + 1;
  return counts;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** One STOW-RS request per file, in turn; resolves to their statuses. */
async function stow(baseUrl: string, files: readonly string[]): Promise<number[]> {
  const statuses: number[] = [];
  for (const file of files) {
    const body = Readable.from(
      (async function* () {
        yield Buffer.from(`--${BOUNDARY}\r\nContent-Type: application/dicom\r\n\r\n`);
        for await (const chunk of createReadStream(file)) yield chunk as Buffer;
        yield Buffer.from(`\r\n--${BOUNDARY}--\r\n`);
      })(),
    );
    statuses.push(
      await new Promise<number>((resolve) => {
        const request = http.request(
          `${baseUrl}/api/v1/dicomweb/studies`,
          {
            method: 'POST',
            headers: {
              authorization: lib.BENCH_AUTHORIZATION,
              'content-type': `multipart/related; type="application/dicom"; boundary=${BOUNDARY}`,
              accept: 'application/dicom+json',
            },
          },
          (response) => {
            response.resume();
            response.on('end', () => resolve(response.statusCode ?? 0));
          },
        );
        request.on('error', () => resolve(0));
        body.pipe(request);
      }),
    );
  }
  return statuses;
}

/** One `storescu` association sending `files`; resolves to its exit code. */
async function cStore(port: number, files: readonly string[]): Promise<string> {
  const result = await runDcmtk(
    'storescu',
    ['-aet', SCU_AE, '-aec', CALLED_AE, '-xe', '127.0.0.1', String(port), ...files],
    10 * 60_000,
  );
  return result.code === 0 && !/Store Failed/.test(result.output) ? 'ok' : `exit ${result.code}`;
}

/** Connections from 127.0.0.2-9 that send the start of a huge A-ASSOCIATE-RQ; resolves to how many the server closed. */
async function connectionFlood(port: number): Promise<number> {
  const header = Buffer.alloc(6);
  header[0] = 0x01;
  header.writeUInt32BE(0x00ffffff, 2);
  const body = Buffer.concat([header, Buffer.alloc(64 * 1024 - 6)]);
  let closed = 0;
  const sockets: net.Socket[] = [];
  const batch = 100;
  for (let i = 0; i < CONNECTIONS; i += batch) {
    await Promise.all(
      Array.from({ length: Math.min(batch, CONNECTIONS - i) }, (_, j) => {
        const socket = net.connect({ host: '127.0.0.1', port, localAddress: `127.0.0.${2 + ((i + j) % 8)}` });
        sockets.push(socket);
        socket.on('error', () => {});
        socket.on('close', () => (closed += 1));
        return new Promise<void>((resolve) => {
          socket.once('connect', () => socket.write(body, () => resolve()));
          socket.once('close', () => resolve());
        });
      }),
    );
  }
  const deadline = Date.now() + 15_000;
  while (closed < sockets.length && Date.now() < deadline) await sleep(100);
  for (const socket of sockets) socket.destroy();
  return closed;
}

/** C-ECHOs carrying a 2 MiB data set, which the port aborts; resolves to how many were closed. */
async function refusedEchoes(port: number): Promise<number> {
  const results = await Promise.all(Array.from({ length: 8 }, () => refusedEcho(port)));
  return results.filter(Boolean).length;
}

function item(type: number, body: Buffer): Buffer {
  const header = Buffer.alloc(4);
  header[0] = type;
  header.writeUInt16BE(body.length, 2);
  return Buffer.concat([header, body]);
}

function pdu(type: number, body: Buffer): Buffer {
  const header = Buffer.alloc(6);
  header[0] = type;
  header.writeUInt32BE(body.length, 2);
  return Buffer.concat([header, body]);
}

function element(elementNumber: number, value: Buffer): Buffer {
  const header = Buffer.alloc(8);
  header.writeUInt16LE(elementNumber, 2);
  header.writeUInt32LE(value.length, 4);
  return Buffer.concat([header, value]);
}

async function refusedEcho(port: number): Promise<boolean> {
  const verification = '1.2.840.10008.1.1';
  const fixed = Buffer.alloc(68);
  fixed.writeUInt16BE(1, 0);
  Buffer.from(CALLED_AE.padEnd(16, ' ')).copy(fixed, 4);
  Buffer.from(ECHO_AE.padEnd(16, ' ')).copy(fixed, 20);
  const maxLength = Buffer.alloc(4);
  maxLength.writeUInt32BE(16_384);
  const associate = pdu(
    0x01,
    Buffer.concat([
      fixed,
      item(0x10, Buffer.from('1.2.840.10008.3.1.1.1')),
      item(
        0x20,
        Buffer.concat([
          Buffer.from([1, 0, 0, 0]),
          item(0x30, Buffer.from(verification)),
          item(0x40, Buffer.from('1.2.840.10008.1.2')),
        ]),
      ),
      item(0x50, Buffer.concat([item(0x51, maxLength), item(0x52, Buffer.from('1.2.3.4.5.6'))])),
    ]),
  );
  const us = (v: number) => {
    const b = Buffer.alloc(2);
    b.writeUInt16LE(v);
    return b;
  };
  const fields = Buffer.concat([
    element(0x0002, Buffer.from(`${verification}\0`)),
    element(0x0100, us(0x0030)),
    element(0x0110, us(1)),
    element(0x0800, us(0x0000)),
  ]);
  const groupLength = Buffer.alloc(4);
  groupLength.writeUInt32LE(fields.length);
  const command = Buffer.concat([element(0x0000, groupLength), fields]);
  const pData = (isCommand: boolean, isLast: boolean, value: Buffer) => {
    const header = Buffer.alloc(6);
    header.writeUInt32BE(value.length + 2, 0);
    header[4] = 1;
    header[5] = (isCommand ? 1 : 0) | (isLast ? 2 : 0);
    return pdu(0x04, Buffer.concat([header, value]));
  };
  const socket = net.connect({ host: '127.0.0.1', port, localAddress: ECHO_ADDRESS });
  socket.on('error', () => {});
  let isClosed = false;
  const closed = new Promise<void>((resolve) => socket.once('close', () => ((isClosed = true), resolve())));
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  const answered = new Promise<void>((resolve) => socket.once('data', () => resolve()));
  socket.write(associate);
  await Promise.race([answered, closed]);
  socket.write(pData(true, true, command));
  const empty = Buffer.alloc(2 * MiB);
  for (let offset = 0; offset < empty.length; offset += 8) empty.writeUInt16LE(0x0008, offset);
  const fragment = 16_384 - 6;
  for (let offset = 0; offset < empty.length && !isClosed; offset += fragment) {
    const chunk = pData(false, offset + fragment >= empty.length, empty.subarray(offset, offset + fragment));
    if (!socket.write(chunk)) await Promise.race([new Promise((r) => socket.once('drain', r)), closed]);
  }
  await Promise.race([closed, sleep(10_000)]);
  socket.destroy();
  return isClosed;
}
