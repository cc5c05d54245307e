/**
 * What the DICOM pool's threads load and how many it starts: a thread that only reads headers holds no
 * decoder, and extracts on demand; header reads share one thread unless they would wait behind an
 * extraction.
 */
import assert from 'node:assert/strict';
import diagnosticsChannel from 'node:diagnostics_channel';
import { after, describe, it } from 'node:test';
import type { Worker } from 'node:worker_threads';
import { loadConfig } from '../../config.ts';
import { buildInstance, sopInstanceUidOf } from '../../../test/dicom-instances.ts';
import { buildPart10File, dicomElement } from '../../../test/factories-queue.ts';
import { DicomError } from './dicom-error.ts';
import type { DicomLoading, DicomPool, DicomTask } from './dicom-pool.ts';
import { createDicomPool } from './dicom-pool.ts';
import { dicomLimitsOf } from './dicom-service.ts';
import { ENCAPSULATED_PDF_SOP_CLASS } from './extract.ts';

const config = loadConfig({ DATABASE_URL: 'sqlite::memory:' });
const LIBRARIES: DicomTask = {
  moduleUrl: new URL('../../../test/dicom-thread-libraries.ts', import.meta.url),
  exportName: 'loadedLibraries',
  purpose: 'test',
};
const DECODERS = ['dcmjs-imaging', 'dcmjs-codecs', 'pdfjs-dist', '@napi-rs/canvas'];

function poolOf(threads: number): DicomPool {
  return createDicomPool({
    threads,
    timeoutMs: 60_000,
    memoryMb: config.dicom.decodeMemoryMb,
    limits: dicomLimitsOf(config),
    pageSizePx: 128,
  });
}

/** A message a DICOM thread posts while it loads its decoders for a job (`DicomLoading`). */
function isLoading(message: unknown): message is DicomLoading {
  return typeof message === 'object' && message !== null && 'loading' in message;
}

/**
 * Calls `onMessage` with every message of each worker thread started from now on, after the pool's own
 * listener has handled it (a microtask later: listeners of one message run before the next arrives).
 * Threads are seen through Node's `worker_threads` diagnostics channel.
 */
function onThreadMessages(onMessage: (message: unknown) => void): {
  readonly messages: unknown[];
  stop(): void;
} {
  const messages: unknown[] = [];
  const subscriber = (created: unknown) => {
    const { worker } = created as { worker: Worker };
    worker.on('message', (message: unknown) => {
      messages.push(message);
      queueMicrotask(() => onMessage(message));
    });
  };
  diagnosticsChannel.subscribe('worker_threads', subscriber);
  return { messages, stop: () => diagnosticsChannel.unsubscribe('worker_threads', subscriber) };
}

/** An Encapsulated PDF of a one-page PDF. */
function pdfInstance(): Buffer {
  const text = (s: string) => Buffer.from(s, 'latin1');
  const pdf = text(
    '%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 120 90]>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n',
  );
  const uid = '1.2.826.0.1.3680043.8.498.77';
  return buildPart10File(
    Buffer.concat([
      dicomElement(0x0008, 0x0016, 'UI', text(ENCAPSULATED_PDF_SOP_CLASS)),
      dicomElement(0x0008, 0x0018, 'UI', text(uid)),
      dicomElement(0x0042, 0x0011, 'OB', pdf),
      dicomElement(0x0042, 0x0012, 'LO', text('application/pdf')),
    ]),
    { sopClassUid: ENCAPSULATED_PDF_SOP_CLASS, sopInstanceUid: uid },
  );
}

describe('DICOM pool threads', () => {
  const pools: DicomPool[] = [];
  after(() => Promise.all(pools.map((pool) => pool.close())));

  it('loads no decoder on a thread that only inspects and reads headers, and extracts on it after that', async () => {
    const pool = poolOf(1);
    pools.push(pool);
    const instance = buildInstance();
    const inspection = await pool.inspect(instance);
    assert.equal(inspection.summary?.header.SOPInstanceUID, sopInstanceUidOf(instance));
    assert.equal((await pool.read(instance)).hasPixelData, true);
    const beforeExtraction = (await pool.runTask(LIBRARIES, Buffer.alloc(0))) as string[];
    assert.ok(beforeExtraction.includes('dicom-parser'), 'the task sees the packages the thread loaded');
    assert.deepEqual(
      beforeExtraction.filter((name) => DECODERS.includes(name)),
      [],
      'no decoder, PDF.js or canvas on a thread that only read headers',
    );

    const extraction = await pool.extract(instance);
    assert.equal(extraction.kind, 'images');
    const afterImage = (await pool.runTask(LIBRARIES, Buffer.alloc(0))) as string[];
    assert.ok(afterImage.includes('dcmjs-imaging'), 'the image was rendered on the same thread');
    assert.ok(!afterImage.includes('pdfjs-dist'), 'PDF.js only for a PDF');

    const pdf = await pool.extract(pdfInstance());
    assert.equal(pdf.kind, 'pdf');
    assert.equal(pdf.kind === 'pdf' && pdf.pageError, undefined);
    assert.ok(((await pool.runTask(LIBRARIES, Buffer.alloc(0))) as string[]).includes('pdfjs-dist'));
    assert.equal(pool.threadCount(), 1);
  });

  it('moves a handed-over buffer of its own to the thread, and copies any other', async () => {
    const pool = poolOf(1);
    pools.push(pool);
    const instance = buildInstance();
    const uid = sopInstanceUidOf(instance);
    // A buffer of its own, handed over: moved, so the caller's view is left detached.
    const own = new Uint8Array(instance);
    assert.equal((await pool.read(own, true)).header.SOPInstanceUID, uid);
    assert.equal(own.byteLength, 0);
    assert.equal(own.buffer.detached, true);
    // Not handed over: copied, the caller's bytes untouched.
    const kept = new Uint8Array(instance);
    assert.equal((await pool.read(kept)).header.SOPInstanceUID, uid);
    assert.ok(Buffer.from(kept).equals(instance));
    // Handed over but a slice of a larger buffer (as Node's pooled small Buffers are): copied, so the
    // rest of that buffer is never taken from whoever shares it.
    const shared = new Uint8Array(instance.length + 16);
    shared.set(instance, 16);
    const slice = shared.subarray(16);
    assert.equal((await pool.read(slice, true)).header.SOPInstanceUID, uid);
    assert.equal(shared.byteLength, instance.length + 16);
    assert.ok(Buffer.from(slice).equals(instance));
  });

  it('does not count loading the decoders in the time limit of the first extraction, and counts the extraction', async (t) => {
    // The pool's timers run on a mocked clock that moves only when the thread says where it is: ten
    // seconds pass while it loads its decoders (a time limit of 100 ms in force then ends the job), and
    // in a second pool 100 ms pass right after it has loaded them (the limit then ends the job). No
    // real time is measured, so a loaded machine cannot change the outcome.
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const limitedPool = () => {
      const pool = createDicomPool({
        threads: 1,
        timeoutMs: 100,
        memoryMb: config.dicom.decodeMemoryMb,
        limits: dicomLimitsOf(config),
        pageSizePx: 128,
      });
      pools.push(pool);
      return pool;
    };

    const whileLoading = onThreadMessages((message) => {
      if (isLoading(message) && !message.isDone) t.mock.timers.tick(10_000);
    });
    try {
      const extraction = await limitedPool().extract(buildInstance({ pixelBytes: 48 }));
      assert.equal(extraction.kind, 'images');
    } finally {
      whileLoading.stop();
    }
    assert.deepEqual(
      whileLoading.messages.filter(isLoading).map((m) => m.isDone),
      [false, true],
      'the thread said when it started and ended loading its decoders',
    );

    const afterLoading = onThreadMessages((message) => {
      if (isLoading(message) && message.isDone) t.mock.timers.tick(100);
    });
    try {
      await assert.rejects(limitedPool().extract(buildInstance({ pixelBytes: 48 })), (error: unknown) => {
        assert.ok(error instanceof DicomError);
        assert.equal(error.code, 'timeout');
        return true;
      });
    } finally {
      afterLoading.stop();
    }
  });

  it('runs concurrent header reads on one thread, and starts another for an extraction', async () => {
    const pool = poolOf(2);
    pools.push(pool);
    const instances = Array.from({ length: 8 }, () => buildInstance({ pixelBytes: 64 * 1024 }));
    const inspections = await Promise.all(instances.map((instance) => pool.inspect(instance)));
    inspections.forEach((inspection, i) =>
      assert.equal(inspection.summary?.header.SOPInstanceUID, sopInstanceUidOf(instances[i]!)),
    );
    assert.equal(pool.threadCount(), 1, 'eight inspections at once shared one thread');

    // The extraction takes the ready thread; the inspections would wait behind it, so a second starts.
    const [extraction, ...more] = await Promise.all([
      pool.extract(instances[0]!),
      ...instances.map((instance) => pool.inspect(instance)),
    ]);
    assert.equal(extraction.kind, 'images');
    assert.equal(more.length, 8);
    assert.equal(pool.threadCount(), 2);
  });
});
