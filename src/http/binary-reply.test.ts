import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Fastify from 'fastify';
import type { FastifyInstance } from 'fastify';
import { until } from '../../test/until.ts';
import {
  contentDispositionOf,
  formatHttpDate,
  parseEntityTagList,
  parseHttpDate,
  sendBinary,
} from './binary-reply.ts';

describe('parseHttpDate', () => {
  const expected = Date.UTC(1994, 10, 6, 8, 49, 37);

  it('reads the three forms of RFC 9110 5.6.7', () => {
    assert.equal(parseHttpDate('Sun, 06 Nov 1994 08:49:37 GMT')?.getTime(), expected);
    assert.equal(parseHttpDate('Sunday, 06-Nov-94 08:49:37 GMT')?.getTime(), expected);
    assert.equal(parseHttpDate('Sun Nov  6 08:49:37 1994')?.getTime(), expected);
  });

  it('puts a two-digit year more than 50 years ahead in the past century', () => {
    const thisYear = new Date().getUTCFullYear();
    const ahead = (thisYear + 60) % 100;
    const parsed = parseHttpDate(`Monday, 01-Jan-${String(ahead).padStart(2, '0')} 00:00:00 GMT`);
    assert.equal(parsed?.getUTCFullYear(), thisYear + 60 - 100);
  });

  it('rejects anything else, including impossible dates and other zones', () => {
    for (const value of [
      '',
      'garbage',
      'Sun, 06 Nov 1994 08:49:37 UTC',
      'Sun, 6 Nov 1994 08:49:37 GMT',
      'Sun, 31 Feb 1994 08:49:37 GMT',
      'Sun, 06 Nov 1994 24:00:00 GMT',
      '1994-11-06T08:49:37Z',
      'Sun, 06 Nov 1994 08:49:37 GMT\r\nX: y',
    ])
      assert.equal(parseHttpDate(value), undefined, value);
  });

  it('round-trips with formatHttpDate', () => {
    const date = new Date(expected);
    assert.equal(formatHttpDate(date), 'Sun, 06 Nov 1994 08:49:37 GMT');
    assert.equal(parseHttpDate(formatHttpDate(date))?.getTime(), expected);
  });
});

describe('contentDispositionOf', () => {
  it('shows raster images and PDF inline and downloads everything a browser could run', () => {
    for (const type of ['image/png', 'IMAGE/JPEG', 'image/gif', 'application/pdf', 'image/png; q=1'])
      assert.equal(contentDispositionOf(type), 'inline', type);
    for (const type of [
      'text/html',
      'image/svg+xml',
      'application/xml',
      'text/xml',
      'application/xhtml+xml',
      'text/plain',
      'application/json',
      'application/octet-stream',
      'application/dicom',
    ])
      assert.equal(contentDispositionOf(type), 'attachment', type);
  });
});

describe('parseEntityTagList', () => {
  it('reads *, single tags, weak tags and lists with empty elements', () => {
    assert.equal(parseEntityTagList(' * '), '*');
    assert.deepEqual(parseEntityTagList('"a"'), [{ tag: '"a"', isWeak: false }]);
    assert.deepEqual(parseEntityTagList('W/"a", "b" ,, "c"'), [
      { tag: '"a"', isWeak: true },
      { tag: '"b"', isWeak: false },
      { tag: '"c"', isWeak: false },
    ]);
  });

  it('rejects malformed values', () => {
    for (const value of ['', 'a', '"a', 'W/', 'W/a', '"a" "b"', '"a"x', '"a\\"b"', '*, "a"'])
      assert.equal(parseEntityTagList(value), undefined, value);
  });
});

describe('sendBinary: bodies whose memory the reply owns', () => {
  let app: FastifyInstance;
  let baseUrl: string;
  /** What the next request sends: set by each test. */
  let next: { body: Buffer | AsyncIterable<Buffer>; sizeBytes: number };
  let onResponse = () => {};

  before(async () => {
    app = Fastify({ forceCloseConnections: true });
    app.addHook('onResponse', async () => onResponse());
    app.get('/body', (_request, reply) =>
      sendBinary(
        reply,
        {
          contentType: 'application/octet-stream',
          sizeBytes: next.sizeBytes,
          etag: '"x"',
          lastModified: undefined,
          cacheControl: 'no-store',
        },
        next.body,
      ),
    );
    baseUrl = await app.listen({ port: 0, host: '127.0.0.1' });
  });
  after(async () => app.close());

  const MiB = 1024 * 1024;
  const fetchBody = async () => Buffer.from(await (await fetch(`${baseUrl}/body`)).arrayBuffer());
  /** Resolves once the server has finished (or closed) the response in flight. */
  const responseDone = () =>
    new Promise<void>((resolve) => {
      onResponse = resolve;
    });

  it('sends every chunk in order and releases each one once sent, some before the last is read', async () => {
    const chunks = Array.from({ length: 12 }, (_, i) => Buffer.alloc(MiB, i));
    const expected = Buffer.concat(chunks);
    let releasedBeforeLast = 0;
    next = {
      sizeBytes: expected.length,
      body: (async function* () {
        for (const [index, chunk] of chunks.entries()) {
          if (index === chunks.length - 1) releasedBeforeLast = chunks.filter((c) => c.length === 0).length;
          yield chunk;
        }
      })(),
    };
    const done = responseDone();
    const received = await fetchBody();
    await done;
    assert.ok(received.equals(expected));
    assert.ok(releasedBeforeLast > 0, 'no chunk was released while the body was being sent');
    assert.deepEqual(
      chunks.map((c) => c.length),
      chunks.map(() => 0),
    );
  });

  it('releases a large Buffer body once sent, and leaves small or shared Buffers alone', async () => {
    for (const [body, isReleased] of [
      [Buffer.alloc(MiB, 7), true],
      [Buffer.alloc(2048, 7), false],
      [Buffer.alloc(2 * MiB, 7).subarray(MiB), false],
    ] as const) {
      const copy = Buffer.from(body);
      next = { body, sizeBytes: body.length };
      const done = responseDone();
      assert.ok((await fetchBody()).equals(copy));
      await done;
      assert.equal(body.length, isReleased ? 0 : copy.length);
    }
  });

  it('stops reading chunks when the client goes away, and leaves unsent ones to the collector', async () => {
    const sent: Buffer[] = [];
    let isStopped = false;
    next = {
      sizeBytes: 64 * MiB,
      body: (async function* () {
        try {
          for (let i = 0; i < 64; i++) {
            const chunk = Buffer.alloc(MiB, i);
            sent.push(chunk);
            yield chunk;
          }
        } finally {
          isStopped = true;
        }
      })(),
    };
    const controller = new AbortController();
    const response = await fetch(`${baseUrl}/body`, { signal: controller.signal });
    await response.body!.getReader().read();
    controller.abort();
    await until(() => isStopped, { what: 'the body stream stopped' });
    assert.ok(sent.length < 64);
    // The last chunk was still on its way (the client read once): never released under a cancelled write.
    assert.equal(sent.at(-1)?.length, MiB);
  });
});
