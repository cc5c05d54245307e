/**
 * A DICOM worker thread (`dicom-pool.ts`): reads headers and received instances, extracts images and
 * runs other modules' file readers (`DicomTask`), off the event loop. One job at a time; the pool
 * enforces the time limit and the heap cap (`resourceLimits`) by terminating the thread. The libraries'
 * console output is dropped (`silence-console.ts`), except the warnings that extraction acts on (a
 * corrupt JPEG frame, an oversized image in a PDF).
 *
 * Reading headers needs only `inspect.ts`. Extraction (`extract.ts`, with `dcmjs-imaging` and its
 * WebAssembly decoders) is loaded by the thread's first extraction job, and PDF.js by its first PDF
 * page: a thread that only checks received instances or runs file readers never holds them (tens of MB
 * per thread). The thread tells the pool while it loads the decoders, so that loading them is not
 * counted in the job's time limit.
 */
import { setLibraryMessageListener } from './silence-console.ts';
import { getHeapStatistics } from 'node:v8';
import { parentPort } from 'node:worker_threads';
import { DicomError, messageOf } from './dicom-error.ts';
import type { DicomJob, DicomJobResult, DicomLoading, DicomRenderStart } from './dicom-pool.ts';
import type * as Extract from './extract.ts';
import { inspectDicom, readDicom } from './inspect.ts';

let extract: typeof Extract | undefined;

/** `extract.ts` with its decoders ready, loaded on this thread's first extraction (job `id`). */
async function loadExtract(id: number): Promise<typeof Extract> {
  if (extract !== undefined) return extract;
  parentPort!.postMessage({ loading: id, isDone: false } satisfies DicomLoading);
  let loaded: typeof Extract;
  try {
    loaded = await import('./extract.ts');
    setLibraryMessageListener(loaded.noteLibraryMessage);
    await loaded.initialiseDecoders();
  } catch (error) {
    throw new DicomError('worker-failed', `The decoders could not be loaded: ${messageOf(error)}`);
  }
  extract = loaded;
  parentPort!.postMessage({ loading: id, isDone: true } satisfies DicomLoading);
  return loaded;
}

async function run(job: DicomJob): Promise<DicomJobResult> {
  if (job.kind !== 'extract') {
    if (job.kind === 'read') return { id: job.id, read: readDicom(job.bytes, job.limits) };
    if (job.kind === 'inspect') return { id: job.id, inspection: inspectDicom(job.bytes, job.limits) };
    // Another module's reader (`DicomTask`): the module is named by the main thread's code, never by a file.
    const module = (await import(job.moduleUrl)) as Record<string, unknown>;
    const task = module[String(job.exportName)];
    if (typeof task !== 'function') throw new Error(`No function ${job.exportName} in the task's module`);
    return { id: job.id, taskResult: await (task as (bytes: Uint8Array) => unknown)(job.bytes) };
  }
  const { extractDicom } = await loadExtract(job.id);
  const extraction = await extractDicom(job.bytes, job.limits, {
    pageSizePx: job.pageSizePx,
    ...(job.skipPageReason === undefined ? {} : { skipPageReason: job.skipPageReason }),
    // The pool watches this thread's array buffer memory from here (see dicom-pool.ts).
    onPageRender: () =>
      parentPort!.postMessage({
        renderStarted: job.id,
        externalBytes: getHeapStatistics().external_memory,
      } satisfies DicomRenderStart),
  });
  return { id: job.id, extraction };
}

function transferListOf(result: DicomJobResult): ArrayBuffer[] {
  const extraction = result.extraction;
  if (extraction?.kind === 'images') {
    return extraction.frames.map((f) => ('jpeg' in f ? f.jpeg.buffer : f.pixels.buffer) as ArrayBuffer);
  }
  if (extraction?.kind === 'pdf') {
    return [
      extraction.pdf.buffer as ArrayBuffer,
      ...(extraction.page ? [extraction.page.pixels.buffer as ArrayBuffer] : []),
    ];
  }
  return [];
}

parentPort!.on('message', (job: DicomJob) => {
  run(job)
    .then(
      (result) => parentPort!.postMessage(result, transferListOf(result)),
      (error: unknown) => {
        const failure =
          error instanceof DicomError
            ? { code: error.code, message: error.message }
            : {
                code: 'decode-failed' as const,
                message: `The file could not be read: ${messageOf(error).replace(/\s+/g, ' ').slice(0, 300)}`,
              };
        parentPort!.postMessage({ id: job.id, error: failure } satisfies DicomJobResult);
      },
    )
    .finally(() => releaseBytes(job.bytes));
});

/**
 * Frees the file a finished job was given (the thread's own copy, which nothing holds any more) at once,
 * rather than when the thread's heap is next collected: reading a header allocates so little that a
 * thread could otherwise hold tens of MB of received files it is done with.
 */
function releaseBytes(bytes: Uint8Array): void {
  const buffer = bytes.buffer as ArrayBuffer;
  // Detaching the buffer (moving it to an empty one) frees its memory; the job's copy is a whole buffer.
  if (!buffer.detached && bytes.byteOffset === 0 && bytes.byteLength === buffer.byteLength)
    buffer.transfer(0);
}

// A job's time limit starts when a ready thread takes it.
parentPort!.postMessage({ ready: true });
