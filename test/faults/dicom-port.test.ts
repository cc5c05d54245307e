/**
 * Hostile clients on the DICOM port, each attack at a reduced scale: a C-ECHO or C-FIND carrying a large
 * data set, an N-EVENT-REPORT-RSP to no report or an N-ACTION without its data set, a flood of connections that never associate, a PDU declaring gigabytes then trickling, one
 * calling AE or address taking every association, and C-STORE data sets held to the upload memory budget.
 * Throughout each, `/healthz` answers within a second. The peers are raw sockets (`node:net`) speaking
 * the upper layer protocol (PS3.8) byte by byte, from 127.0.0.x addresses (every 127.0.0.0/8 address
 * reaches the server on 127.0.0.1).
 */
import assert from 'node:assert/strict';
import { readdir, rm, mkdtemp, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { spoolDirOf } from '../../src/files/spool.ts';
import type { DicomServer } from '../../src/modules/dicom-receive/index.ts';
import { runDcmtk } from '../dcmtk.ts';
import {
  buildInstance,
  multipartRelated,
  newUid,
  sopInstanceUidOf,
  stowContentType,
} from '../dicom-instances.ts';
import { receiptOf, startDicomTestApp } from '../dicom-receiving.ts';
import type { TestUser } from '../factories.ts';
import { createUser } from '../factories.ts';
import type { TestApp } from '../harness.ts';
import { forEachDialect } from '../harness.ts';
import { until } from '../until.ts';

const AE = 'CRA_TEST';
const VERIFICATION = '1.2.840.10008.1.1';
const SECONDARY_CAPTURE = '1.2.840.10008.5.1.4.1.1.7';
const STORAGE_COMMITMENT = '1.2.840.10008.1.20.1';
const IMPLICIT_LE = '1.2.840.10008.1.2';
const EXPLICIT_LE = '1.2.840.10008.1.2.1';
const HEALTH_BOUND_MS = 1000;

/** Health watchers and peers of the test running, stopped after it whatever its outcome. */
const cleanUps: (() => Promise<void> | void)[] = [];

/**
 * Probes `/healthz` every 100 ms until stopped; resolves to the slowest answer's time in ms (a failed or
 * non-200 probe counts as infinitely slow).
 */
function watchHealth(app: TestApp): { stop(): Promise<number> } {
  let slowest = 0;
  let isStopped = false;
  const loop = (async () => {
    while (!isStopped) {
      const started = performance.now();
      try {
        const response = await app.request('/healthz', { signal: AbortSignal.timeout(10_000) });
        await response.arrayBuffer();
        slowest = Math.max(slowest, response.status === 200 ? performance.now() - started : Infinity);
      } catch {
        slowest = Infinity;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();
  const stop = async () => {
    isStopped = true;
    await loop;
    return slowest;
  };
  cleanUps.push(async () => void (await stop()));
  return { stop };
}

function item(type: number, body: Buffer): Buffer {
  const header = Buffer.alloc(4);
  header[0] = type;
  header.writeUInt16BE(body.length, 2);
  return Buffer.concat([header, body]);
}

function pdu(type: number, body: Buffer, declaredLength = body.length): Buffer {
  const header = Buffer.alloc(6);
  header[0] = type;
  header.writeUInt32BE(declaredLength, 2);
  return Buffer.concat([header, body]);
}

function aeField(title: string): Buffer {
  return Buffer.from(title.padEnd(16, ' '), 'ascii');
}

/**
 * An A-ASSOCIATE-RQ proposing Verification (context 1), Secondary Capture (context 3) and Storage
 * Commitment Push Model (context 5).
 */
function associateRq(callingAe: string): Buffer {
  const fixed = Buffer.alloc(68);
  fixed.writeUInt16BE(1, 0);
  aeField(AE).copy(fixed, 4);
  aeField(callingAe).copy(fixed, 20);
  const context = (id: number, abstractSyntax: string, transferSyntaxes: string[]) =>
    item(
      0x20,
      Buffer.concat([
        Buffer.from([id, 0, 0, 0]),
        item(0x30, Buffer.from(abstractSyntax)),
        ...transferSyntaxes.map((ts) => item(0x40, Buffer.from(ts))),
      ]),
    );
  const maxLength = Buffer.alloc(4);
  maxLength.writeUInt32BE(16_384);
  const userInfo = item(0x50, Buffer.concat([item(0x51, maxLength), item(0x52, Buffer.from('1.2.3.4.5.6'))]));
  return pdu(
    0x01,
    Buffer.concat([
      fixed,
      item(0x10, Buffer.from('1.2.840.10008.3.1.1.1')),
      context(1, VERIFICATION, [IMPLICIT_LE]),
      context(3, SECONDARY_CAPTURE, [EXPLICIT_LE]),
      context(5, STORAGE_COMMITMENT, [IMPLICIT_LE]),
      userInfo,
    ]),
  );
}

function element(elementNumber: number, value: Buffer): Buffer {
  const header = Buffer.alloc(8);
  header.writeUInt16LE(0, 0);
  header.writeUInt16LE(elementNumber, 2);
  header.writeUInt32LE(value.length, 4);
  return Buffer.concat([header, value]);
}

function us(value: number): Buffer {
  const bytes = Buffer.alloc(2);
  bytes.writeUInt16LE(value);
  return bytes;
}

function uid(value: string): Buffer {
  return Buffer.from(value.length % 2 === 0 ? value : `${value}\0`, 'ascii');
}

/** A command set (Implicit VR Little Endian, group length first). */
function commandSet(commandField: number, sopClass: string, hasDataSet: boolean): Buffer {
  const body = Buffer.concat([
    element(0x0002, uid(sopClass)),
    element(0x0100, us(commandField)),
    element(0x0110, us(1)),
    element(0x0800, us(hasDataSet ? 0x0000 : 0x0101)),
  ]);
  const length = Buffer.alloc(4);
  length.writeUInt32LE(body.length);
  return Buffer.concat([element(0x0000, length), body]);
}

/** A P-DATA-TF of one PDV. */
function pData(contextId: number, isCommand: boolean, isLast: boolean, value: Buffer): Buffer {
  const header = Buffer.alloc(6);
  header.writeUInt32BE(value.length + 2, 0);
  header[4] = contextId;
  header[5] = (isCommand ? 1 : 0) | (isLast ? 2 : 0);
  return pdu(0x04, Buffer.concat([header, value]));
}

/** A raw peer: every byte the server sent, and whether it closed. */
class Peer {
  readonly socket: net.Socket;
  received = Buffer.alloc(0);
  isClosed = false;
  constructor(port: number, localAddress = '127.0.0.1') {
    this.socket = net.connect({ host: '127.0.0.1', port, localAddress });
    this.socket.on('error', () => {});
    this.socket.on('data', (chunk: Buffer) => (this.received = Buffer.concat([this.received, chunk])));
    this.socket.on('close', () => (this.isClosed = true));
    cleanUps.push(() => this.close());
  }
  connected(): Promise<void> {
    return new Promise((resolve) => this.socket.once('connect', () => resolve()));
  }
  /** The PDU types the server sent, in order. */
  pduTypes(): number[] {
    const types: number[] = [];
    let offset = 0;
    while (offset + 6 <= this.received.length) {
      types.push(this.received[offset]!);
      offset += 6 + this.received.readUInt32BE(offset + 2);
    }
    return types;
  }
  async associate(callingAe: string): Promise<number> {
    this.socket.write(associateRq(callingAe));
    await until(() => this.received.length >= 6 || this.isClosed, { what: 'the association answer' });
    return this.received[0] ?? 0;
  }
  close(): void {
    this.socket.destroy();
  }
}

forEachDialect((dialect) => {
  describe(`DICOM port under hostile clients [${dialect}]`, () => {
    let app: TestApp;
    let server: DicomServer;
    let dir: string;
    let user: TestUser;

    before(async () => {
      ({ app, server } = await startDicomTestApp(dialect, 'MODALITY1@*,OTHER@127.0.0.0/8', {
        DICOM_ASSOCIATION_TIMEOUT_MS: '1500',
        DICOM_MAX_ASSOCIATIONS_PER_AE: '3',
        DICOM_MAX_ASSOCIATIONS_PER_ADDRESS: '5',
        UPLOAD_MEMORY_BYTES: String(16 * 1024 * 1024),
        DICOM_MAX_ELEMENTS: '100',
      }));
      user = await createUser(app.db);
      dir = await mkdtemp(path.join(tmpdir(), 'cra-dicom-port-'));
    });
    afterEach(async () => {
      for (const cleanUp of cleanUps.splice(0)) await cleanUp();
    });
    after(async () => {
      await server.stop(2000);
      await app.close();
      await rm(dir, { recursive: true, force: true });
    });

    for (const [name, commandField] of [
      ['C-ECHO', 0x0030],
      ['C-FIND', 0x0020],
    ] as const) {
      it(`aborts a ${name} carrying a data set before reading it, with /healthz answering throughout`, async () => {
        const health = watchHealth(app);
        const peer = new Peer(server.port);
        await peer.connected();
        assert.equal(await peer.associate('MODALITY1'), 0x02);
        peer.received = Buffer.alloc(0);
        peer.socket.write(pData(1, true, true, commandSet(commandField, VERIFICATION, true)));
        // 2 MiB of empty elements (a quarter of the attack), in PDUs within the announced maximum.
        const emptyElements = Buffer.alloc(2 * 1024 * 1024);
        for (let offset = 0; offset < emptyElements.length; offset += 8)
          emptyElements.writeUInt16LE(0x0008, offset);
        const fragment = 16_384 - 6;
        for (let offset = 0; offset < emptyElements.length && !peer.isClosed; offset += fragment) {
          const isLast = offset + fragment >= emptyElements.length;
          if (!peer.socket.write(pData(1, false, isLast, emptyElements.subarray(offset, offset + fragment))))
            await new Promise((resolve) => peer.socket.once('drain', resolve));
        }
        await until(() => peer.isClosed, { what: 'the association aborted', timeoutMs: 10_000 });
        assert.deepEqual(peer.pduTypes(), [0x07], 'an A-ABORT and nothing else (no C-ECHO answer)');
        assert.ok((await health.stop()) < HEALTH_BOUND_MS, '/healthz answered within a second');
      });
    }

    it('aborts an N-EVENT-REPORT-RSP to no report and an N-ACTION without a data set on the commitment context', async () => {
      for (const commandField of [0x8100, 0x0130]) {
        const peer = new Peer(server.port);
        await peer.connected();
        assert.equal(await peer.associate('MODALITY1'), 0x02);
        peer.received = Buffer.alloc(0);
        peer.socket.write(pData(5, true, true, commandSet(commandField, STORAGE_COMMITMENT, false)));
        await until(() => peer.isClosed, { what: 'the association aborted', timeoutMs: 10_000 });
        assert.deepEqual(
          peer.pduTypes(),
          [0x07],
          `an A-ABORT and nothing else (0x${commandField.toString(16)})`,
        );
      }
    });

    it('closes connections beyond the per-address and unassociated limits, and idle ones after the association timeout', async () => {
      const health = watchHealth(app);
      const peers: Peer[] = [];
      // 8 addresses x 20 connections that never send a byte.
      for (let host = 2; host < 10; host += 1)
        for (let n = 0; n < 20; n += 1) peers.push(new Peer(server.port, `127.0.0.${host}`));
      await Promise.all(peers.map((p) => Promise.race([p.connected(), until(() => p.isClosed)])));
      // Per address at most 16; not yet associated at most 32 in all (newer ones replace the oldest).
      await until(() => peers.filter((p) => !p.isClosed).length <= 32, {
        what: 'the flood cut to the unassociated limit',
        timeoutMs: 5000,
      });
      // A sender still gets in during the flood.
      const echo = await runDcmtk('echoscu', [
        '-aet',
        'MODALITY1',
        '-aec',
        AE,
        '127.0.0.1',
        String(server.port),
      ]);
      assert.equal(echo.code, 0, echo.output);
      await until(() => peers.every((p) => p.isClosed), {
        what: 'idle connections closed after DICOM_ASSOCIATION_TIMEOUT_MS',
        timeoutMs: 5000,
      });
      assert.ok((await health.stop()) < HEALTH_BOUND_MS, '/healthz answered within a second');
    });

    it('closes a connection whose first PDU is not a small A-ASSOCIATE-RQ, before buffering it', async () => {
      const huge = new Peer(server.port);
      await huge.connected();
      huge.socket.write(pdu(0x01, Buffer.alloc(1024), 0xfffffff0));
      await until(() => huge.isClosed, { what: 'a 4 GB A-ASSOCIATE-RQ refused', timeoutMs: 2000 });
      const data = new Peer(server.port);
      await data.connected();
      data.socket.write(pData(1, true, true, commandSet(0x0030, VERIFICATION, false)));
      await until(() => data.isClosed, { what: 'a P-DATA-TF before association refused', timeoutMs: 2000 });
      assert.equal(data.received.length, 0);
    });

    it('aborts an association whose P-DATA-TF declares more than the maximum length, at once', async () => {
      const health = watchHealth(app);
      const peer = new Peer(server.port);
      await peer.connected();
      assert.equal(await peer.associate('MODALITY1'), 0x02);
      peer.received = Buffer.alloc(0);
      const started = performance.now();
      peer.socket.write(pdu(0x04, Buffer.alloc(0), 0xfffffff0));
      // Then a trickle, as the attack did, until the server gives up on it.
      const trickle = setInterval(() => peer.socket.write(Buffer.alloc(64 * 1024)), 5);
      try {
        await until(() => peer.isClosed, { what: 'the association aborted', timeoutMs: 5000 });
      } finally {
        clearInterval(trickle);
      }
      assert.ok(performance.now() - started < 2000, 'aborted on the header, not after the trickle');
      assert.deepEqual(peer.pduTypes(), [0x07]);
      assert.ok((await health.stop()) < HEALTH_BOUND_MS, '/healthz answered within a second');
    });

    it('limits the associations of one calling AE title and of one address (local limit exceeded)', async () => {
      const open: Peer[] = [];
      const associate = async (callingAe: string, address: string) => {
        const peer = new Peer(server.port, address);
        open.push(peer);
        await peer.connected();
        await peer.associate(callingAe);
        return peer;
      };
      try {
        for (let n = 0; n < 3; n += 1)
          assert.equal((await associate('MODALITY1', '127.0.0.1')).received[0], 0x02);
        const overAe = await associate('MODALITY1', '127.0.0.7');
        // A-ASSOCIATE-RJ: transient (2), service provider presentation (3), local limit exceeded (2).
        assert.deepEqual([...overAe.received.subarray(0, 10)], [0x03, 0, 0, 0, 0, 4, 0, 2, 3, 2]);
        for (let n = 0; n < 2; n += 1)
          assert.equal((await associate('OTHER', '127.0.0.1')).received[0], 0x02);
        const overAddress = await associate('OTHER', '127.0.0.1');
        assert.deepEqual([...overAddress.received.subarray(0, 10)], [0x03, 0, 0, 0, 0, 4, 0, 2, 3, 2]);
        assert.equal((await associate('OTHER', '127.0.0.8')).received[0], 0x02, 'another address');
      } finally {
        for (const peer of open) peer.close();
      }
      await until(() => open.every((p) => p.isClosed));
    });

    it('spools a C-STORE data set past 1 MiB and loads it only within UPLOAD_MEMORY_BYTES', async () => {
      // The whole budget is held (as by uploads in flight): the store waits, its data set on disk.
      const release = await app.app.uploadMemory.reserve(16 * 1024 * 1024);
      const instance = buildInstance({ pixelBytes: 3 * 1024 * 1024 });
      const file = path.join(dir, 'large.dcm');
      await writeFile(file, instance);
      let isReleased = false;
      try {
        const store = runDcmtk('storescu', [
          '-aet',
          'MODALITY1',
          '-aec',
          AE,
          '127.0.0.1',
          String(server.port),
          file,
        ]);
        const spoolDir = spoolDirOf(app.config.filesDir);
        await until(
          async () => (await readdir(spoolDir).catch(() => [])).some((n) => n.endsWith('.upload')),
          {
            what: 'the data set spooled to a file',
            timeoutMs: 10_000,
          },
        );
        await new Promise((resolve) => setTimeout(resolve, 300));
        assert.equal(await receiptOf(app.db, sopInstanceUidOf(instance)), undefined, 'waits for memory');
        release();
        isReleased = true;
        const result = await store;
        assert.equal(result.code, 0, result.output);
        assert.ok((await receiptOf(app.db, sopInstanceUidOf(instance))) !== undefined);
        assert.deepEqual(await readdir(spoolDir), [], 'the spool file removed');
      } finally {
        if (!isReleased) release();
      }
    });

    it('removes the spool file of a C-STORE data set cut off by the connection', async () => {
      const peer = new Peer(server.port);
      await peer.connected();
      assert.equal(await peer.associate('MODALITY1'), 0x02);
      peer.socket.write(pData(3, true, true, commandSet(0x0001, SECONDARY_CAPTURE, true)));
      const fragment = 16_384 - 6;
      for (let sent = 0; sent < 1536 * 1024; sent += fragment)
        peer.socket.write(pData(3, false, false, Buffer.alloc(fragment)));
      const spoolDir = spoolDirOf(app.config.filesDir);
      const spooled = async () =>
        (await readdir(spoolDir).catch(() => [])).filter((n) => n.endsWith('.upload'));
      await until(async () => (await spooled()).length === 1, { what: 'the data set spooled to a file' });
      peer.close();
      await until(async () => (await spooled()).length === 0, { what: 'the spool file removed' });
    });

    const stow = (body: Buffer) =>
      app.request('/api/v1/dicomweb/studies', {
        method: 'POST',
        headers: { authorization: user.authorization, 'content-type': stowContentType() },
        body,
      });

    it('spools a STOW-RS part past 1 MiB and loads it only within UPLOAD_MEMORY_BYTES', async () => {
      const release = await app.app.uploadMemory.reserve(16 * 1024 * 1024);
      const instance = buildInstance({ pixelBytes: 3 * 1024 * 1024 });
      let isReleased = false;
      try {
        const answer = stow(multipartRelated([instance]));
        const spoolDir = spoolDirOf(app.config.filesDir);
        await until(
          async () => (await readdir(spoolDir).catch(() => [])).some((n) => n.endsWith('.upload')),
          {
            what: 'the part spooled to a file',
            timeoutMs: 10_000,
          },
        );
        await new Promise((resolve) => setTimeout(resolve, 300));
        assert.equal(await receiptOf(app.db, sopInstanceUidOf(instance)), undefined, 'waits for memory');
        release();
        isReleased = true;
        const response = await answer;
        assert.equal(response.status, 200);
        assert.ok((await receiptOf(app.db, sopInstanceUidOf(instance))) !== undefined);
        assert.deepEqual(await readdir(spoolDir), [], 'the spool file removed');
      } finally {
        if (!isReleased) release();
      }
    });

    it('answers an instance over a limit (A700, it would fail again) as a failure, not 503', async () => {
      // More elements than DICOM_MAX_ELEMENTS: refused with A700 whenever it is sent.
      const references = Array.from({ length: 60 }, () => ({
        ReferencedSOPClassUID: SECONDARY_CAPTURE,
        ReferencedSOPInstanceUID: newUid(),
      }));
      const instance = buildInstance({ tags: { ReferencedImageSequence: references as unknown as string } });
      const response = await stow(multipartRelated([instance]));
      assert.equal(response.status, 409);
      assert.equal(response.headers.get('retry-after'), null);
      const body = (await response.json()) as Record<
        string,
        { Value?: Record<string, { Value?: unknown[] }>[] }
      >;
      const failed = body['00081198']?.Value ?? [];
      assert.equal(failed.length, 1);
      assert.deepEqual(failed[0]!['00081197']?.Value, [0xa700]);
      assert.deepEqual(failed[0]!['00081155']?.Value, [sopInstanceUidOf(instance)]);
      assert.equal(await receiptOf(app.db, sopInstanceUidOf(instance)), undefined);
    });
  });
});
