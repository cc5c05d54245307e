import assert from 'node:assert/strict';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { countRows, createUser } from '../../test/factories.ts';
import type { TestUser } from '../../test/factories.ts';
import { ADD_PATH } from '../../test/factories-queue.ts';
import type { TestApp } from '../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../test/harness.ts';
import { until } from '../../test/until.ts';

const GARBAGE = 'GARBAGE / HTTP/1.1\r\nX: \u0001\r\n\r\n';

/**
 * Writes `bytes` on a new connection (then half-closes it when `isEnding`) and resolves with everything
 * the server sent once it closes the connection.
 */
function exchange(port: number, bytes: string, isEnding = false): Promise<string> {
  return new Promise((resolve, reject) => {
    const received: Buffer[] = [];
    const socket = net.connect({ port, host: '127.0.0.1' });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('the server did not close the connection'));
    }, 5000);
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(received).toString('latin1'));
    });
    socket.write(bytes);
    if (isEnding) socket.end();
  });
}

function statuses(answer: string): number[] {
  return [...answer.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => Number(match[1]));
}

let slowStarted: () => void = () => {};
let finishSlow: () => void = () => {};
let slowGate: Promise<void> = Promise.resolve();

/** Holds the next `/test/slow` request in its handler until `finishSlow`; resolves once it got there. */
function holdSlowRoute(): Promise<void> {
  slowGate = new Promise<void>((resolve) => (finishSlow = resolve));
  return new Promise<void>((resolve) => (slowStarted = resolve));
}

forEachDialect((dialect) => {
  describe(`unparseable bytes on a connection [${dialect}]`, () => {
    let app: TestApp;
    let port: number;
    let user: TestUser;
    before(async () => {
      app = await startTestApp(dialect, {
        // A heavy route that works until the test lets it finish: its answer is still owed when the
        // bytes after it arrive.
        extraRoutes: (scope) => {
          scope.post('/test/slow', { config: { heavy: true } }, async () => {
            slowStarted();
            await slowGate;
            return 'done';
          });
        },
      });
      port = (app.app.server.address() as AddressInfo).port;
      user = await createUser(app.db);
    });
    after(() => app.close());

    // However a connection ends, the heavy-request slots its requests took are freed.
    const slotsFreed = () => until(() => app.app.heavyGate!.active === 0, { what: 'heavy slots freed' });

    const queueAdd = (body: string) =>
      `POST ${ADD_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${user.authorization}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    const SLOW = 'POST /test/slow HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n';

    /** Sends `bytes` after a slow request, lets the server read them all, then lets the slow one finish. */
    async function afterSlow(bytes: string, isEnding = false): Promise<string> {
      const started = holdSlowRoute();
      const answer = exchange(port, `${SLOW}${bytes}`, isEnding);
      await started;
      await new Promise((resolve) => setTimeout(resolve, 100));
      finishSlow();
      return answer;
    }

    it('answers bytes that do not parse with 400 "Bad request" and closes the connection', async () => {
      const answer = await exchange(port, GARBAGE);
      assert.deepEqual(statuses(answer), [400]);
      assert.match(answer, /\r\nConnection: close\r\n/);
      assert.ok(answer.endsWith('\r\n\r\n"Bad request"'), answer);
    });

    it('answers a request still being served when garbage follows it, then closes without a refusal', async () => {
      const answer = await afterSlow(GARBAGE);
      assert.deepEqual(statuses(answer), [200], answer);
      assert.match(answer, /\r\nConnection: close\r\n/);
      assert.ok(answer.endsWith('\r\n\r\ndone'), answer);
      await slotsFreed();
    });

    it('answers every request received in full before the garbage, in order, then closes', async () => {
      const requests = await countRows(app.db, 'request');
      const answer = await afterSlow(`${queueAdd('{"data":{"a":1}}')}${GARBAGE}`);
      assert.deepEqual(statuses(answer), [200, 200], answer);
      assert.match(answer, /"request_id":\d+/);
      assert.equal(answer.match(/\r\nConnection: close\r\n/gi)?.length, 1, 'only the last answer closes');
      assert.equal(await countRows(app.db, 'request'), requests + 1);
      await slotsFreed();
    });

    it('answers the complete request before one cut off by a hang-up mid-body, and runs only the complete one', async () => {
      const requests = await countRows(app.db, 'request');
      const cut = queueAdd('{"data":{"a":2}}').slice(0, -5);
      const answer = await afterSlow(cut, true);
      assert.deepEqual(statuses(answer), [200], answer);
      assert.equal(await countRows(app.db, 'request'), requests);
      await slotsFreed();
    });

    it('refuses and closes a connection whose only request is cut off mid-body', async () => {
      const requests = await countRows(app.db, 'request');
      const answer = await exchange(port, queueAdd('{"data":{"a":1}}').slice(0, -5), true);
      assert.deepEqual(statuses(answer), [400], answer);
      assert.equal(await countRows(app.db, 'request'), requests);
      await slotsFreed();
    });

    it('still serves new connections afterwards', async () => {
      assert.equal((await app.request('/healthz')).status, 200);
    });
  });
});
