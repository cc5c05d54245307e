/**
 * A small Encapsulated PDF whose page holds a 16000 x 16000 image (a Flate stream of zeros: ~750 KB that
 * decodes to 768 MB, and a canvas of 1 GB to draw it) is sent through queue add to the real server
 * process, whose in-process worker renders page 1 for thumbnails. The server's resident memory must stay
 * bounded (the thread's heap cap does not cover decoded images or canvases), `/healthz` must answer
 * throughout, and the routine must end with the PDF filed, no thumbnail, and the reason in its log.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TestContext } from 'node:test';
import { after, before, describe, it } from 'node:test';
import { createDeflate } from 'node:zlib';
import type { Row } from '../../src/db/schema.ts';
import { createUser } from '../factories.ts';
import type { TestUser } from '../factories.ts';
import { ADD_PATH, attachmentsByMnemonic, executionsOf, routinesOf } from '../factories-queue.ts';
import type { TestDatabase } from '../harness.ts';
import { createTestDatabase } from '../harness.ts';
import { until } from '../until.ts';
import type { ServerProcess } from './consistency.ts';
import { startServerProcess } from './consistency.ts';

const MiB = 1024 * 1024;
/** Growth of the server's resident memory allowed over its size once ready (it reached 3.6 GB more). */
const RSS_GROWTH_LIMIT_BYTES = 400 * MiB;

/** `/proc/<pid>/status` values in bytes: the resident set now (VmRSS) and its peak (VmHWM). */
function memoryOf(pid: number): { rssBytes: number; peakBytes: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)![1]) * 1024;
  return { rssBytes: kib('VmRSS'), peakBytes: kib('VmHWM') };
}

/** A Flate (zlib) stream of `length` zero bytes, made a few MiB at a time. */
async function deflatedZeros(length: number): Promise<Buffer> {
  const deflate = createDeflate({ level: 9 });
  const chunks: Buffer[] = [];
  deflate.on('data', (chunk: Buffer) => chunks.push(chunk));
  const zeros = Buffer.alloc(4 * MiB);
  let left = length;
  while (left > 0) {
    const part = Math.min(left, zeros.length);
    if (!deflate.write(zeros.subarray(0, part))) await once(deflate, 'drain');
    left -= part;
  }
  deflate.end();
  await once(deflate, 'end');
  return Buffer.concat(chunks);
}

/** An image XObject of zero samples, Flate-compressed. */
async function imageObject(
  width: number,
  height: number,
  colourSpace: 'DeviceRGB' | 'DeviceGray',
  extra = '',
) {
  const samples = await deflatedZeros(width * height * (colourSpace === 'DeviceRGB' ? 3 : 1));
  return Buffer.concat([
    Buffer.from(
      `<< /Type /XObject /Subtype /Image /Width ${width} /Height ${height} /ColorSpace /${colourSpace} /BitsPerComponent 8${extra} /Filter /FlateDecode /Length ${samples.length} >>\nstream\n`,
      'latin1',
    ),
    samples,
    Buffer.from('\nendstream', 'latin1'),
  ]);
}

/**
 * A one-page PDF that draws one image: `width` x `height` RGB, or (`maskSize`) a 1 x 1 RGB image whose
 * soft mask is `maskSize` x `maskSize` (PDF.js checks the size of the image, not of its mask).
 */
async function imageBombPdf(
  options: { width: number; height: number } | { maskSize: number },
): Promise<Buffer> {
  const image =
    'maskSize' in options
      ? await imageObject(1, 1, 'DeviceRGB', ' /SMask 6 0 R')
      : await imageObject(options.width, options.height, 'DeviceRGB');
  const content = Buffer.from('q 612 0 0 792 0 0 cm /Im0 Do Q\n', 'latin1');
  const objects: Buffer[] = [
    Buffer.from('<< /Type /Catalog /Pages 2 0 R >>', 'latin1'),
    Buffer.from('<< /Type /Pages /Kids [3 0 R] /Count 1 >>', 'latin1'),
    Buffer.from(
      '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /Im0 4 0 R >> >> /Contents 5 0 R >>',
      'latin1',
    ),
    image,
    Buffer.concat([
      Buffer.from(`<< /Length ${content.length} >>\nstream\n`, 'latin1'),
      content,
      Buffer.from('endstream', 'latin1'),
    ]),
    ...('maskSize' in options ? [await imageObject(options.maskSize, options.maskSize, 'DeviceGray')] : []),
  ];
  const parts: Buffer[] = [Buffer.from('%PDF-1.7\n', 'latin1')];
  let offset = parts[0]!.length;
  const offsets: number[] = [];
  objects.forEach((body, i) => {
    offsets.push(offset);
    const object = Buffer.concat([
      Buffer.from(`${i + 1} 0 obj\n`, 'latin1'),
      body,
      Buffer.from('\nendobj\n', 'latin1'),
    ]);
    parts.push(object);
    offset += object.length;
  });
  const xref = [
    'xref',
    `0 ${objects.length + 1}`,
    '0000000000 65535 f ',
    ...offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n `),
    'trailer',
    `<< /Size ${objects.length + 1} /Root 1 0 R >>`,
    'startxref',
    String(offset),
    '%%EOF',
    '',
  ].join('\n');
  parts.push(Buffer.from(xref, 'latin1'));
  return Buffer.concat(parts);
}

/**
 * One server process for the file, on SQLite: the attack is on the renderer, the same on every database.
 * One decoding thread with a 256 MiB budget.
 */
describe('an Encapsulated PDF holding a 16000 x 16000 image [sqlite]', () => {
  let testDb: TestDatabase;
  let server: ServerProcess;
  let user: TestUser;
  let readyBytes: number;
  const work = mkdtempSync(path.join(tmpdir(), 'cra-pdf-bomb-'));
  before(async () => {
    testDb = await createTestDatabase('sqlite');
    user = await createUser(testDb.db);
    server = await startServerProcess({
      ...testDb.env,
      WORKER: 'in-process',
      DICOM_WORKER_THREADS: '1',
      DICOM_DECODE_MEMORY_MB: '256',
    });
    readyBytes = memoryOf(server.child.pid!).rssBytes;
  });
  after(async () => {
    server.child.kill('SIGKILL');
    await testDb.drop();
    rmSync(work, { recursive: true, force: true });
  });

  /**
   * Wraps `pdf` in an Encapsulated PDF (pdf2dcm), sends it through queue add and waits for EXTRACT_IMAGE
   * to end, reading the server's memory and `/healthz` every 100 ms; kills the server past the limit.
   */
  async function sendAndWatch(t: TestContext, name: string, pdf: Buffer) {
    const pdfFile = path.join(work, `${name}.pdf`);
    const dicomFile = path.join(work, `${name}.dcm`);
    writeFileSync(pdfFile, pdf);
    assert.ok(pdf.length < 1 * MiB, 'the PDF is small');
    // A Study Date: DICOM_SEED refuses a file without any date.
    execFileSync(
      'pdf2dcm',
      ['+pn', 'Bomb^Test', '+pi', 'BOMB1', '-k', '0008,0020=20260312', pdfFile, dicomFile],
      { stdio: 'pipe' },
    );
    const pid = server.child.pid!;
    const form = new FormData();
    form.append('scan', new Blob([readFileSync(dicomFile)], { type: 'application/dicom' }), 'scan.dcm');
    const response = await fetch(`${server.baseUrl}${ADD_PATH}?request_type=dicom_request`, {
      method: 'POST',
      headers: { authorization: user.authorization },
      body: form,
    });
    assert.equal(response.status, 200, await response.clone().text());
    const { request_id: requestId } = (await response.json()) as { request_id: number };

    let slowestHealthMs = 0;
    let extract: Row<'request_routine'> | undefined;
    await until(
      async () => {
        const { rssBytes } = memoryOf(pid);
        if (rssBytes - readyBytes > RSS_GROWTH_LIMIT_BYTES) {
          server.child.kill('SIGKILL');
          throw new Error(`the server grew by ${Math.round((rssBytes - readyBytes) / MiB)} MiB`);
        }
        const started = performance.now();
        assert.equal((await fetch(`${server.baseUrl}/healthz`)).status, 200);
        slowestHealthMs = Math.max(slowestHealthMs, performance.now() - started);
        extract = (await routinesOf(testDb.db, requestId)).find((r) => r.routine_name === 'EXTRACT_IMAGE');
        return extract !== undefined && ['COMPLETE', 'FAILED'].includes(extract.status);
      },
      { timeoutMs: 60_000, intervalMs: 100, what: 'EXTRACT_IMAGE to finish' },
    ).catch(async (error: unknown) => {
      const routines = (await routinesOf(testDb.db, requestId)).map((r) => `${r.routine_name}:${r.status}`);
      throw new Error(
        `${String(error)}; routines ${routines.join(', ')}; server output:\n${server.output().slice(-2000)}`,
      );
    });
    const { peakBytes } = memoryOf(pid);
    t.diagnostic(
      `peak resident memory: ${Math.round((peakBytes - readyBytes) / MiB)} MiB over the ready server`,
    );
    assert.ok(
      peakBytes - readyBytes <= RSS_GROWTH_LIMIT_BYTES,
      `peak resident memory grew by ${Math.round((peakBytes - readyBytes) / MiB)} MiB`,
    );
    // Two cores shared by many processes on the test machines: a margin over the one second asked.
    assert.ok(slowestHealthMs < 2_000, `/healthz took ${Math.round(slowestHealthMs)} ms`);
    const log = (await executionsOf(testDb.db, extract!.id)).at(-1)?.log_text ?? '';
    return { requestId, pdfFile, status: extract!.status, log };
  }

  it('files the PDF without a thumbnail, with the reason, while memory stays bounded and /healthz answers', async (t) => {
    const { requestId, pdfFile, status, log } = await sendAndWatch(
      t,
      'image',
      await imageBombPdf({ width: 16_000, height: 16_000 }),
    );
    assert.equal(status, 'COMPLETE');
    assert.match(
      log,
      /encapsulated PDF extracted, page 1 not rendered \(page 1 holds an image of more than 33554432 pixels \(DICOM_MAX_PIXELS\)/,
    );
    const pdf = (await attachmentsByMnemonic(testDb.db, requestId)).get('DICOM_PDF');
    assert.ok(pdf, 'the PDF is filed');
    assert.equal(pdf.mime_type, 'application/pdf');
    assert.ok(pdf.blob_data?.equals(readFileSync(pdfFile)), 'the PDF is stored as it was sent');
    assert.equal(pdf.thumbnail_small_blob, null);
  });

  it('files the PDF without a thumbnail when rendering passes DICOM_DECODE_MEMORY_MB (a 1 x 1 image with a 16000 x 16000 soft mask)', async (t) => {
    const { requestId, status, log } = await sendAndWatch(
      t,
      'mask',
      await imageBombPdf({ maskSize: 16_000 }),
    );
    assert.equal(status, 'COMPLETE');
    assert.match(
      log,
      /encapsulated PDF extracted, page 1 not rendered \(rendering it needed more than 256 MiB \(DICOM_DECODE_MEMORY_MB\)\)/,
    );
    const pdf = (await attachmentsByMnemonic(testDb.db, requestId)).get('DICOM_PDF');
    assert.ok(pdf, 'the PDF is filed');
    assert.equal(pdf.thumbnail_small_blob, null);
    // The next PDF is rendered, by a new thread.
    const next = await sendAndWatch(t, 'small', await imageBombPdf({ width: 100, height: 100 }));
    assert.equal(next.status, 'COMPLETE');
    assert.match(next.log, /with thumbnails\nencapsulated PDF extracted; transfer syntax/);
  });
});
