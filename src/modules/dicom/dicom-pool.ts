/**
 * A small pool of worker threads (`dicom.worker.ts`) that read and decode DICOM files off the event loop.
 * Threads start on first use (each loads the decoders on its first extraction, not before: see
 * `dicom.worker.ts`) and are ended after {@link DEFAULT_IDLE_MS} without work, so that their memory goes
 * back soon after DICOM stops arriving (a thread's isolate, its WebAssembly memory, which never shrinks:
 * tens of MiB each); one job per thread at a time, the others wait in order. Short jobs (header reads)
 * start a thread beyond the first only when they would otherwise wait behind an extraction or a slow job
 * (`needsAnotherThread`). Each job has a time limit, counted from when a ready thread takes it (the time
 * the thread spends loading its decoders for the job is not counted, but bounded by
 * {@link STARTUP_TIMEOUT_MS}), and each thread a heap cap (`resourceLimits`): a thread past either is
 * terminated and replaced, and its job fails with {@link DicomError} `timeout` or `out-of-memory`.
 *
 * Rendering a PDF page has a memory cap of its own: PDF.js holds decoded images in array buffers and
 * draws through canvases, memory the heap cap does not count. While a thread renders, the pool reads its
 * array buffer memory every {@link MEMORY_CHECK_MS}; past DICOM_DECODE_MEMORY_MB of growth the thread is
 * terminated and the job runs again on a new thread without rendering the page, so that the PDF is still
 * extracted, its `pageError` naming the cap. (Decoding images needs no such watch: every allocation is
 * checked against the pixel limit first.) Idle threads do not keep the process alive.
 */
import { Worker, isMarkedAsUntransferable } from 'node:worker_threads';
import type { DicomErrorData } from './dicom-error.ts';
import { DicomError } from './dicom-error.ts';
import type { DicomLimits, Extraction } from './extract.ts';
import type { DicomInspection, DicomSummary } from './inspect.ts';

export type DicomJob =
  | { readonly id: number; readonly kind: 'read'; readonly bytes: Uint8Array; readonly limits: DicomLimits }
  | {
      readonly id: number;
      readonly kind: 'inspect';
      readonly bytes: Uint8Array;
      readonly limits: DicomLimits;
    }
  | {
      readonly id: number;
      readonly kind: 'task';
      readonly bytes: Uint8Array;
      /** The module (a `file:` URL) and the export that the thread calls with the bytes. */
      readonly moduleUrl: string;
      readonly exportName: string;
    }
  | {
      readonly id: number;
      readonly kind: 'extract';
      readonly bytes: Uint8Array;
      readonly limits: DicomLimits;
      readonly pageSizePx: number;
      /** Extract the PDF without rendering its page, for this reason (the page's `pageError`). */
      readonly skipPageReason?: string;
    };

/** What a thread says as it starts (`isDone` false) and ends loading its decoders for job `loading`. */
export interface DicomLoading {
  readonly loading: number;
  readonly isDone: boolean;
}

/** What a thread says as it starts rendering a PDF page: its array buffer memory then (`v8` heap statistics). */
export interface DicomRenderStart {
  readonly renderStarted: number;
  readonly externalBytes: number;
}

export interface DicomJobResult {
  readonly id: number;
  readonly read?: DicomSummary;
  readonly inspection?: DicomInspection;
  /** What a task's function returned (structured-cloned). */
  readonly taskResult?: unknown;
  readonly extraction?: Extraction;
  readonly error?: DicomErrorData;
}

export interface DicomPoolOptions {
  readonly threads: number;
  readonly timeoutMs: number;
  /**
   * Heap cap of each thread (V8 old generation), and the growth of its array buffers allowed while it
   * renders a PDF page, in MiB.
   */
  readonly memoryMb: number;
  readonly limits: DicomLimits;
  /** Longest side of a rendered PDF page, in pixels. */
  readonly pageSizePx: number;
  /** How long a thread stays without work before it is ended; default {@link DEFAULT_IDLE_MS}. */
  readonly idleMs?: number;
}

export interface DicomPool {
  /**
   * With `isHandedOver`, the caller gives up `bytes`: when they are a whole buffer of their own, that
   * buffer is moved to the thread (left detached, length 0) instead of copied; otherwise copied.
   */
  read(bytes: Uint8Array, isHandedOver?: boolean): Promise<DicomSummary>;
  inspect(bytes: Uint8Array): Promise<DicomInspection>;
  /** Calls `task` on a thread with the bytes; see {@link DicomTask}. */
  runTask(task: DicomTask, bytes: Uint8Array): Promise<unknown>;
  extract(bytes: Uint8Array): Promise<Extraction>;
  /** Threads running or starting (idle ones included until they are ended). */
  threadCount(): number;
  /** Terminates the threads; jobs still waiting fail. */
  close(): Promise<void>;
}

/**
 * A function of another module run on a DICOM thread, for reading a file that needs no more than the file:
 * `exportName` of the module at `moduleUrl`, called with the bytes (a copy the thread owns), synchronous
 * or async, returning a structured-cloneable value. The module must load without a database or the main
 * thread's services. A `DicomError` it throws keeps its code; anything else fails as `decode-failed`.
 */
export interface DicomTask {
  readonly moduleUrl: URL;
  readonly exportName: string;
  /** What the file is read for (`dicom_parses_total{purpose}`): a short fixed word. */
  readonly purpose: string;
}

type JobInput =
  | { readonly kind: 'read' }
  | { readonly kind: 'inspect' }
  | { readonly kind: 'task'; readonly task: DicomTask }
  | { readonly kind: 'extract'; readonly skipPageReason?: string };

interface PendingJob {
  readonly input: JobInput;
  readonly bytes: Uint8Array;
  /** The caller gave up `bytes` (never for a job that can run again: an extraction). */
  readonly isHandedOver?: boolean;
  readonly resolve: (result: DicomJobResult) => void;
  readonly reject: (error: Error) => void;
}

interface PoolThread {
  readonly worker: Worker;
  isReady: boolean;
  job?: {
    readonly id: number;
    readonly pending: PendingJob;
    /** When the thread took the job (`performance.now()`). */
    readonly startedAt: number;
    /** The time limit; while the thread loads its decoders, the start-up limit instead. */
    timer: NodeJS.Timeout;
    /** Set while the thread renders a PDF page. */
    memoryTimer?: NodeJS.Timeout;
  };
  isRetired: boolean;
  /** Ends the thread once it has been idle for `idleMs`. */
  idleTimer?: NodeJS.Timeout;
}

const WORKER_URL = new URL('./dicom.worker.ts', import.meta.url);
/**
 * A thread that has not started by then is given up, with the jobs waiting for it; so is one that has
 * not loaded its decoders for a job by then, with that job.
 */
const STARTUP_TIMEOUT_MS = 60_000;
/**
 * An idle thread is ended after this long. Starting one again costs loading its decoders (a few hundred
 * ms of one core), paid once per burst of DICOM; a steady flow of files never leaves a thread idle this long.
 */
export const DEFAULT_IDLE_MS = 15_000;
/** How often a working thread's array buffer memory is read. */
const MEMORY_CHECK_MS = 100;
const MiB = 1024 * 1024;
/** A header read or file reader running this long no longer counts as short (see `needsAnotherThread`). */
const SHORT_JOB_MS = 1_000;

export function createDicomPool(options: DicomPoolOptions): DicomPool {
  const idleMs = options.idleMs ?? DEFAULT_IDLE_MS;
  const threads: PoolThread[] = [];
  const waiting: PendingJob[] = [];
  let nextId = 1;
  let isClosed = false;
  /** Calls {@link dispatch} again once a running short job stops counting as short. */
  let recheckTimer: NodeJS.Timeout | undefined;

  const spawn = (): PoolThread => {
    const worker = new Worker(WORKER_URL, {
      resourceLimits: {
        maxOldGenerationSizeMb: options.memoryMb,
        maxYoungGenerationSizeMb: Math.max(8, Math.min(64, Math.floor(options.memoryMb / 8))),
        stackSizeMb: 4,
      },
    });
    worker.unref();
    const thread: PoolThread = { worker, isReady: false, isRetired: false };
    const startTimer = setTimeout(() => {
      retire(thread, new DicomError('worker-failed', 'The decoding thread did not start'));
      for (const pending of waiting.splice(0)) {
        pending.reject(new DicomError('worker-failed', 'The decoding thread did not start'));
      }
    }, STARTUP_TIMEOUT_MS);
    worker.on('message', (result: DicomJobResult | DicomLoading | DicomRenderStart | { ready: true }) => {
      if ('loading' in result) {
        const job = thread.job;
        if (job?.id !== result.loading) return;
        clearTimeout(job.timer);
        job.timer = result.isDone
          ? startTimeLimit(thread)
          : setTimeout(() => {
              retire(
                thread,
                new DicomError('worker-failed', 'The decoding thread did not load its decoders'),
              );
            }, STARTUP_TIMEOUT_MS);
        return;
      }
      if ('renderStarted' in result) {
        const job = thread.job;
        if (job?.id === result.renderStarted && job.memoryTimer === undefined) {
          job.memoryTimer = watchRenderMemory(thread, job.id, result.externalBytes);
        }
        return;
      }
      if ('ready' in result) {
        clearTimeout(startTimer);
        thread.isReady = true;
        dispatch();
        if (thread.job === undefined) armIdleEnd(thread);
        return;
      }
      const job = thread.job;
      if (job === undefined || job.id !== result.id) return;
      finish(thread);
      job.pending.resolve(result);
      dispatch();
    });
    worker.on('error', (error: Error & { code?: string }) => {
      if (error.code === 'ERR_WORKER_OUT_OF_MEMORY') {
        retire(
          thread,
          new DicomError(
            'out-of-memory',
            `Decoding needed more than ${options.memoryMb} MiB (DICOM_DECODE_MEMORY_MB)`,
          ),
        );
      } else {
        retire(thread, new DicomError('worker-failed', `The decoding thread failed: ${error.message}`));
      }
    });
    worker.on('exit', (code) => {
      clearTimeout(startTimer);
      retire(thread, new DicomError('worker-failed', `The decoding thread stopped (exit code ${code})`));
    });
    threads.push(thread);
    return thread;
  };

  /** Clears the thread's job; an idle thread no longer keeps the process alive, and ends after `idleMs`. */
  const finish = (thread: PoolThread) => {
    if (thread.job !== undefined) stopJobTimers(thread.job);
    thread.job = undefined;
    thread.worker.unref();
    armIdleEnd(thread);
  };

  /** Ends `thread` once it has been idle for `idleMs` (a new job disarms it). */
  const armIdleEnd = (thread: PoolThread) => {
    if (thread.isRetired) return;
    clearTimeout(thread.idleTimer);
    thread.idleTimer = setTimeout(() => {
      if (thread.job !== undefined || thread.isRetired) return;
      thread.isRetired = true;
      const index = threads.indexOf(thread);
      if (index >= 0) threads.splice(index, 1);
      thread.worker.terminate().catch(() => {});
    }, idleMs);
    thread.idleTimer.unref();
  };

  /** Removes a thread (terminating it) and fails its job with `reason`, or runs it again as `rerun`. */
  function retire(thread: PoolThread, reason: DicomError, rerun?: JobInput): void {
    const job = thread.job;
    clearTimeout(thread.idleTimer);
    if (thread.job !== undefined) stopJobTimers(thread.job);
    thread.job = undefined;
    if (!thread.isRetired) {
      thread.isRetired = true;
      const index = threads.indexOf(thread);
      if (index >= 0) threads.splice(index, 1);
      thread.worker.terminate().catch(() => {});
    }
    if (job !== undefined && rerun !== undefined) waiting.unshift({ ...job.pending, input: rerun });
    else job?.pending.reject(reason);
    dispatch();
  }

  function dispatch(): void {
    while (waiting.length > 0 && !isClosed) {
      const thread = threads.find((t) => t.isReady && t.job === undefined);
      if (thread === undefined) {
        // Threads still starting take the waiting jobs when they are ready.
        const starting = threads.filter((t) => !t.isReady).length;
        if (starting >= waiting.length || threads.length >= options.threads) return;
        if (!needsAnotherThread()) return;
        spawn();
        continue;
      }
      const pending = waiting.shift()!;
      const id = nextId++;
      clearTimeout(thread.idleTimer);
      thread.job = { id, pending, startedAt: performance.now(), timer: startTimeLimit(thread) };
      thread.worker.ref();
      // A buffer the thread owns, moved rather than cloned: the caller's own when handed over, else a copy.
      const bytes =
        pending.isHandedOver === true ? movableOrCopy(pending.bytes) : new Uint8Array(pending.bytes);
      const input = pending.input;
      const job: DicomJob =
        input.kind === 'task'
          ? {
              id,
              kind: 'task',
              bytes,
              moduleUrl: input.task.moduleUrl.href,
              exportName: input.task.exportName,
            }
          : input.kind === 'read'
            ? { id, kind: 'read', bytes, limits: options.limits }
            : input.kind === 'inspect'
              ? { id, kind: 'inspect', bytes, limits: options.limits }
              : {
                  id,
                  kind: 'extract',
                  bytes,
                  limits: options.limits,
                  pageSizePx: options.pageSizePx,
                  ...(input.skipPageReason === undefined ? {} : { skipPageReason: input.skipPageReason }),
                };
      thread.worker.postMessage(job, [bytes.buffer]);
    }
  }

  /**
   * Whether the waiting jobs, none of which has a ready thread, are worth starting another thread for.
   * Short jobs (reading a header, inspecting a received instance, another module's file reader: about a
   * millisecond each) wait for a thread running a short job rather than each start a thread: one thread
   * keeps up with them, and every thread holds tens of MB. A waiting extraction starts a thread, and so
   * do short jobs when every thread is busy extracting (seconds, for a large file) or with a job that has
   * run for {@link SHORT_JOB_MS} (a hostile file near the limits), so that they never queue behind those.
   */
  function needsAnotherThread(): boolean {
    if (waiting.some((pending) => pending.input.kind === 'extract')) return true;
    const now = performance.now();
    let shortestWaitMs = Infinity;
    for (const thread of threads) {
      // A thread still starting takes the waiting short jobs when it is ready.
      if (thread.job === undefined) return false;
      if (thread.job.pending.input.kind === 'extract') continue;
      const runMs = now - thread.job.startedAt;
      if (runMs < SHORT_JOB_MS) shortestWaitMs = Math.min(shortestWaitMs, SHORT_JOB_MS - runMs);
    }
    if (shortestWaitMs === Infinity) return true;
    if (recheckTimer === undefined) {
      recheckTimer = setTimeout(() => {
        recheckTimer = undefined;
        dispatch();
      }, Math.ceil(shortestWaitMs));
      recheckTimer.unref();
    }
    return false;
  }

  /** Starts the time limit of the job `thread` runs: past it, the thread is retired and the job fails. */
  function startTimeLimit(thread: PoolThread): NodeJS.Timeout {
    return setTimeout(() => {
      retire(
        thread,
        new DicomError(
          'timeout',
          `Decoding took longer than ${options.timeoutMs} ms (DICOM_DECODE_TIMEOUT_MS)`,
        ),
      );
    }, options.timeoutMs);
  }

  /**
   * Reads the array buffer memory of `thread` while it renders the PDF page of job `id`; once that has
   * grown by more than DICOM_DECODE_MEMORY_MB from `startBytes`, retires the thread and runs the job again
   * without the page. A read is answered between two JavaScript steps of the thread, even in a long loop.
   */
  function watchRenderMemory(thread: PoolThread, id: number, startBytes: number): NodeJS.Timeout {
    const reason = `rendering it needed more than ${options.memoryMb} MiB (DICOM_DECODE_MEMORY_MB)`;
    let isReading = false;
    const timer = setInterval(() => {
      if (isReading) return;
      isReading = true;
      thread.worker.getHeapStatistics().then(
        (statistics) => {
          isReading = false;
          if (thread.job?.id !== id || statistics.external_memory - startBytes <= options.memoryMb * MiB) {
            return;
          }
          retire(thread, new DicomError('out-of-memory', reason), {
            kind: 'extract',
            skipPageReason: reason,
          });
        },
        () => {
          isReading = false;
        },
      );
    }, MEMORY_CHECK_MS);
    timer.unref();
    return timer;
  }

  const submit = (input: JobInput, bytes: Uint8Array, isHandedOver = false): Promise<DicomJobResult> => {
    if (isClosed) return Promise.reject(new Error('The DICOM pool is closed'));
    return new Promise<DicomJobResult>((resolve, reject) => {
      waiting.push({ input, bytes, isHandedOver, resolve, reject });
      dispatch();
    }).then((result) => {
      if (result.error !== undefined) throw new DicomError(result.error.code, result.error.message);
      return result;
    });
  };

  return {
    async read(bytes, isHandedOver) {
      return (await submit({ kind: 'read' }, bytes, isHandedOver)).read!;
    },
    async inspect(bytes) {
      return (await submit({ kind: 'inspect' }, bytes)).inspection!;
    },
    async runTask(task, bytes) {
      return (await submit({ kind: 'task', task }, bytes)).taskResult;
    },
    async extract(bytes) {
      return (await submit({ kind: 'extract' }, bytes)).extraction!;
    },
    threadCount() {
      return threads.length;
    },
    async close() {
      isClosed = true;
      clearTimeout(recheckTimer);
      for (const pending of waiting.splice(0)) pending.reject(new Error('The DICOM pool is closed'));
      const closing = new Error('The DICOM pool is closed');
      await Promise.all(
        threads.splice(0).map((thread) => {
          const job = thread.job;
          thread.isRetired = true;
          finish(thread);
          job?.pending.reject(closing);
          return thread.worker.terminate();
        }),
      );
    },
  };
}

/**
 * `bytes` as a view of their whole buffer when that buffer is theirs alone and can be moved to a thread
 * (not a slice of a larger one, such as Node's pool of small Buffers; not shared; not marked
 * untransferable), else a copy.
 */
function movableOrCopy(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  const buffer = bytes.buffer;
  if (
    buffer instanceof ArrayBuffer &&
    !buffer.detached &&
    bytes.byteOffset === 0 &&
    bytes.byteLength === buffer.byteLength &&
    !isMarkedAsUntransferable(buffer)
  ) {
    return new Uint8Array(buffer);
  }
  return new Uint8Array(bytes);
}

function stopJobTimers(job: { readonly timer: NodeJS.Timeout; readonly memoryTimer?: NodeJS.Timeout }): void {
  clearTimeout(job.timer);
  clearInterval(job.memoryTimer);
}
