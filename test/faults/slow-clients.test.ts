// test-needs: long
/**
 * Slow clients: connections that send their headers or their bodies a byte at a time. They must not hold
 * heavy-request slots (a slot is taken only once a body arrives at a reasonable rate), they are cut with
 * 408 once they fall behind the minimum receive rate or the header time limit, and one client address
 * holds at most MAX_REQUESTS_PER_CLIENT requests in flight (behind a trusted proxy: the forwarded address).
 * Meanwhile uploads, search and status keep answering for everyone else.
 *
 * The attackers connect from 127.0.0.2 (every 127.0.0.0/8 address reaches the server on 127.0.0.1), so
 * that their address differs from the other clients'.
 */
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { countRows, createUser } from '../factories.ts';
import type { TestUser } from '../factories.ts';
import { ADD_PATH, STATUS_PATH } from '../factories-queue.ts';
import { PNG_BYTES } from '../factories-attachment.ts';
import { b64, createSignableEvent, makePng } from '../factories-signature.ts';
import type { TestApp } from '../harness.ts';
import { forEachDialect, startTestApp } from '../harness.ts';
import { until } from '../until.ts';

const ATTACKER = '127.0.0.2';
const SIGN_PATH = '/api/v1/sign/add';
const CREATE_PATH = '/api/v1/attachmentdisplay/create';
/** Every answer the tests wait for comes within this bound, or the test fails. */
const BOUND_MS = 15_000;

interface SlowConnection {
  /** The status line's code once an answer arrived, else undefined. */
  status(): number | undefined;
  isClosed(): boolean;
  stop(): void;
}

/**
 * A raw connection from `localAddress` that sends `head` (request line and headers, possibly not yet
 * terminated), then `burst` at once, then one byte of `drip` every `intervalMs`, until the server answers
 * or closes.
 */
function slowConnection(
  port: number,
  options: { localAddress?: string; head: string; burst?: Buffer; drip: string; intervalMs: number },
): SlowConnection {
  const socket = net.connect({ host: '127.0.0.1', port, localAddress: options.localAddress });
  socket.on('error', () => {});
  let answer = '';
  let isClosed = false;
  let at = 0;
  socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
  socket.on('close', () => {
    isClosed = true;
    clearInterval(timer);
  });
  socket.write(options.head);
  if (options.burst !== undefined) socket.write(options.burst);
  const timer = setInterval(() => {
    if (socket.destroyed || answer.length > 0) return;
    socket.write(options.drip[at % options.drip.length]!);
    at += 1;
  }, options.intervalMs);
  return {
    status: () => {
      const match = /^HTTP\/1\.1 (\d{3})/.exec(answer);
      return match === null ? undefined : Number(match[1]);
    },
    isClosed: () => isClosed,
    stop: () => {
      clearInterval(timer);
      socket.destroy();
    },
  };
}

function postHead(path: string, headers: Record<string, string>, contentLength: number): string {
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
  return `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${lines.join('')}Content-Length: ${contentLength}\r\n\r\n`;
}

forEachDialect((dialect) => {
  describe(`slow clients [${dialect}]`, () => {
    let app: TestApp;
    let port: number;
    let user: TestUser;
    /** Requests whose headers the server has read, by client address. */
    const received = new Map<string, number>();
    let releaseHeld: () => void = () => {};
    let held: Promise<void> = Promise.resolve();
    before(async () => {
      app = await startTestApp(dialect, {
        env: {
          MAX_CONCURRENT_HEAVY_REQUESTS: '4',
          HEAVY_QUEUE_TIMEOUT_MS: '300',
          MAX_REQUESTS_PER_CLIENT: '8',
          BODY_TIMEOUT_MS: '1000',
          BODY_MIN_BYTES_PER_SECOND: '1024',
          HEADERS_TIMEOUT_MS: '1000',
          TRUSTED_PROXIES: '127.0.0.1',
        },
        // A light route that answers when the test says so: requests in flight for as long as needed.
        extraRoutes: (scope) => {
          scope.get('/test/held', async () => {
            await held;
            return 'done';
          });
        },
      });
      port = Number(new URL(app.baseUrl).port);
      app.app.server.on('request', (request: IncomingMessage) => {
        const address = request.socket.remoteAddress ?? '';
        received.set(address, (received.get(address) ?? 0) + 1);
      });
      user = await createUser(app.db);
    });
    after(() => app.close());

    const seen = (address: string) => received.get(address) ?? 0;
    const within = () => AbortSignal.timeout(BOUND_MS);

    it('keeps uploads, search and status answering while slow bodies are cut with 408, holding no slot', async () => {
      const event = await createSignableEvent(app.db);
      const auth = { authorization: user.authorization };
      const attackers: SlowConnection[] = [];
      const before = seen(ATTACKER);
      // More slow uploads than there are slots, on every heavy route with a body; within the per-client cap.
      const targets = [
        postHead(SIGN_PATH, { 'Content-Type': 'application/json' }, 100_000),
        postHead(ADD_PATH, { ...auth, 'Content-Type': 'application/json' }, 100_000),
        postHead(CREATE_PATH, { ...auth, 'Content-Type': 'image/png' }, 100_000),
      ];
      for (let i = 0; i < 6; i += 1) {
        attackers.push(
          slowConnection(port, { localAddress: ATTACKER, head: targets[i % 3]!, drip: '{', intervalMs: 200 }),
        );
      }
      try {
        await until(() => seen(ATTACKER) === before + 6, {
          what: 'every slow request reached the server',
          timeoutMs: BOUND_MS,
        });

        // Another client's uploads still get slots; search and status answer.
        const sign = await app.request(SIGN_PATH, {
          method: 'POST',
          signal: within(),
          body: JSON.stringify({
            unique_identifier: event.code,
            extra_info: JSON.stringify({ e_id: event.elementId, e_t_id: event.esignElementTypeId }),
            image: b64(makePng()),
          }),
        });
        assert.equal(sign.status, 200);
        assert.equal(await sign.json(), 'Correct signature saved!');
        const queued = await app.request(ADD_PATH, {
          method: 'POST',
          signal: within(),
          headers: { ...auth, 'content-type': 'application/json' },
          body: JSON.stringify({ data: { a: 'b' } }),
        });
        assert.equal(queued.status, 200);
        const { request_id: requestId } = (await queued.json()) as { request_id: number };
        const created = await app.request(CREATE_PATH, {
          method: 'POST',
          signal: within(),
          headers: { ...auth, 'content-type': 'image/png' },
          body: PNG_BYTES,
        });
        assert.equal(created.status, 200);
        const search = await app.request('/api/v1/patient/search?term=smith', {
          headers: auth,
          signal: within(),
        });
        assert.equal(search.status, 200);
        const status = await app.request(`${STATUS_PATH}?request_id=${requestId}`, {
          headers: auth,
          signal: within(),
        });
        assert.equal(status.status, 200);

        // The slow connections are answered 408 and closed; their slots (if any) are free again.
        await until(() => attackers.every((a) => a.isClosed()), {
          what: 'every slow connection closed',
          timeoutMs: BOUND_MS,
        });
        assert.deepEqual(
          attackers.map((a) => a.status()),
          attackers.map(() => 408),
        );
        await until(() => app.app.heavyGate!.active === 0, { what: 'no slot held', timeoutMs: BOUND_MS });
      } finally {
        for (const attacker of attackers) attacker.stop();
      }
    });

    it('takes a slot for a body sent at a reasonable rate, and frees it with 408 when the body then stalls', async () => {
      const logs = await countRows(app.db, 'signature_import_log');
      const stalled = slowConnection(port, {
        localAddress: ATTACKER,
        head: postHead(SIGN_PATH, { 'Content-Type': 'application/json' }, 300_000),
        burst: Buffer.alloc(100_000, 0x20),
        drip: ' ',
        intervalMs: 400,
      });
      try {
        await until(() => app.app.heavyGate!.active === 1, {
          what: 'the flowing body took a slot',
          timeoutMs: BOUND_MS,
        });
        await until(() => stalled.isClosed(), { what: 'the stalled body was cut', timeoutMs: BOUND_MS });
        assert.equal(stalled.status(), 408);
        await until(() => app.app.heavyGate!.active === 0, {
          what: 'its slot was freed',
          timeoutMs: BOUND_MS,
        });
        assert.equal(await countRows(app.db, 'signature_import_log'), logs, 'nothing was written');
      } finally {
        stalled.stop();
      }
    });

    it('accepts a body that arrives slowly but above the minimum rate', async () => {
      const event = await createSignableEvent(app.db);
      const body = JSON.stringify({
        unique_identifier: event.code,
        extra_info: JSON.stringify({ e_id: event.elementId, e_t_id: event.esignElementTypeId }),
        image: b64(makePng(32, 32, { isNoisy: true })),
      });
      assert.ok(body.length > 3000, 'the body takes longer than BODY_TIMEOUT_MS to send');
      // 2 KiB/s against a 1 KiB/s minimum: 32 bytes every 16 ms.
      const socket = net.connect({ host: '127.0.0.1', port });
      let answer = '';
      socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
      socket.write(
        postHead(
          SIGN_PATH,
          { 'Content-Type': 'application/json', Connection: 'close' },
          Buffer.byteLength(body),
        ),
      );
      for (let at = 0; at < body.length; at += 32) {
        socket.write(body.slice(at, at + 32));
        await new Promise((resolve) => setTimeout(resolve, 16));
      }
      await until(() => socket.destroyed || answer.includes('saved'), {
        what: 'answered',
        timeoutMs: BOUND_MS,
      });
      socket.destroy();
      assert.match(answer, /^HTTP\/1\.1 200/);
      assert.match(answer, /"Correct signature saved!"$/);
    });

    it('answers 408 and closes a connection whose headers arrive too slowly', async () => {
      const slow = slowConnection(port, {
        localAddress: ATTACKER,
        head: 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n',
        drip: 'X-Padding: slow\r\n',
        intervalMs: 100,
      });
      try {
        await until(() => slow.isClosed(), { what: 'the slow headers were cut', timeoutMs: BOUND_MS });
        assert.equal(slow.status(), 408);
      } finally {
        slow.stop();
      }
    });

    it('answers 429 past MAX_REQUESTS_PER_CLIENT requests in flight from one address (the forwarded one behind a trusted proxy), and serves other addresses', async () => {
      held = new Promise<void>((resolve) => (releaseHeld = resolve));
      const from = (address: string) => ({ 'x-forwarded-for': address });
      const base = seen('127.0.0.1');
      const first = Array.from({ length: 8 }, () =>
        app.request('/test/held', { headers: from('203.0.113.7'), signal: within() }),
      );
      try {
        await until(() => seen('127.0.0.1') >= base + 8, {
          what: 'eight requests in flight',
          timeoutMs: BOUND_MS,
        });
        const extra = await app.request('/test/held', { headers: from('203.0.113.7'), signal: within() });
        assert.equal(extra.status, 429);
        assert.equal(extra.headers.get('retry-after'), '1');
        assert.equal(await extra.json(), 'Too Many Requests');
        const search = await app.request('/api/v1/patient/search?term=smith', {
          headers: { ...from('203.0.113.7'), authorization: user.authorization },
          signal: within(),
        });
        assert.equal(search.status, 429, 'every route counts');
        const other = app.request('/test/held', { headers: from('203.0.113.8'), signal: within() });
        const status = await app.request(`${STATUS_PATH}?request_id=1`, {
          headers: { ...from('203.0.113.8'), authorization: user.authorization },
          signal: within(),
        });
        assert.notEqual(status.status, 429);
        releaseHeld();
        assert.equal((await other).status, 200);
        for (const response of await Promise.all(first)) assert.equal(response.status, 200);
        const again = await app.request('/test/held', { headers: from('203.0.113.7'), signal: within() });
        assert.equal(again.status, 200, 'the address is served again once its requests are answered');
      } finally {
        releaseHeld();
        await Promise.allSettled(first);
      }
    });
  });
});
