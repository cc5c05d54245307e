/**
 * Reads sign/add bodies without blocking the event loop for long. Parsing JSON, decoding base64 and
 * checking a 1 MB image takes several milliseconds, and a body may be several MiB (`SIGN_BODY_LIMIT_BYTES`), so bodies above
 * `inlineMaxBytes` are read on a small pool of worker threads;
 * small bodies (the usual 20 KB signature) are read inline, where a worker's hand-off would cost more
 * than the work.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import type { SignatureInput } from './signature-body.ts';
import { readSignatureBody } from './signature-body.ts';

export interface DecodeRequest {
  readonly id: number;
  readonly body: Uint8Array;
}

export type DecodeResponse =
  | { readonly id: number; readonly input: SignatureInput | undefined }
  | { readonly id: number; readonly error: string };

export interface BodyDecoder {
  /**
   * The body read as {@link readSignatureBody} does; undefined when it is not a JSON object. A large
   * body that owns its whole buffer is moved to the worker: the caller must not use it afterwards.
   */
  decode(body: Uint8Array): Promise<SignatureInput | undefined>;
  /** Stops the worker threads. */
  close(): Promise<void>;
}

export interface BodyDecoderOptions {
  /** Bodies up to this size are read on the calling thread. */
  readonly inlineMaxBytes?: number;
  /** Worker threads, started on first use. */
  readonly threads?: number;
}

interface PoolWorker {
  readonly worker: Worker;
  readonly pending: Map<number, (response: DecodeResponse) => void>;
}

const WORKER_URL = new URL('./signature-body.worker.ts', import.meta.url);

export function createBodyDecoder(options: BodyDecoderOptions = {}): BodyDecoder {
  const inlineMaxBytes = options.inlineMaxBytes ?? 64 * 1024;
  const threads = Math.max(1, options.threads ?? Math.min(2, availableParallelism()));
  const pool: PoolWorker[] = [];
  let nextId = 1;
  let isClosed = false;

  const failAll = (entry: PoolWorker, reason: string) => {
    const index = pool.indexOf(entry);
    if (index >= 0) pool.splice(index, 1);
    for (const [id, settle] of entry.pending) settle({ id, error: reason });
    entry.pending.clear();
  };

  const spawn = (): PoolWorker => {
    const worker = new Worker(WORKER_URL);
    // The HTTP server keeps the process alive; an idle pool must not.
    worker.unref();
    const entry: PoolWorker = { worker, pending: new Map() };
    worker.on('message', (response: DecodeResponse) => {
      const settle = entry.pending.get(response.id);
      entry.pending.delete(response.id);
      settle?.(response);
    });
    worker.on('error', (error: Error) => failAll(entry, error.message));
    worker.on('exit', (code) => failAll(entry, `signature body worker exited with code ${code}`));
    pool.push(entry);
    return entry;
  };

  const pick = (): PoolWorker => {
    if (pool.length < threads) {
      const idle = pool.find((entry) => entry.pending.size === 0);
      return idle ?? spawn();
    }
    return pool.reduce((best, entry) => (entry.pending.size < best.pending.size ? entry : best));
  };

  return {
    async decode(body) {
      if (body.byteLength <= inlineMaxBytes || isClosed) return readSignatureBody(body);
      const entry = pick();
      const id = nextId++;
      // Move the bytes when the body owns its buffer whole; otherwise copy once.
      const owned =
        body.byteOffset === 0 &&
        body.byteLength === body.buffer.byteLength &&
        body.buffer instanceof ArrayBuffer
          ? body
          : new Uint8Array(body);
      const response = await new Promise<DecodeResponse>((resolve) => {
        entry.pending.set(id, resolve);
        entry.worker.postMessage({ id, body: owned } satisfies DecodeRequest, [owned.buffer as ArrayBuffer]);
      });
      if ('error' in response) throw new Error(`signature body worker failed: ${response.error}`);
      return response.input;
    },
    async close() {
      isClosed = true;
      const workers = pool.splice(0).map((entry) => entry.worker);
      await Promise.all(workers.map((worker) => worker.terminate()));
    },
  };
}
