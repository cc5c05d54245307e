/**
 * Worker thread of `body-decoder.ts`: parses large sign/add bodies and decodes their images off the
 * event loop. Receives `{ id, body }`, answers `{ id, input }` with the decoded image bytes transferred.
 */
import { parentPort } from 'node:worker_threads';
import type { DecodeRequest, DecodeResponse } from './body-decoder.ts';
import { readSignatureBody } from './signature-body.ts';

const port = parentPort;
if (port === null) throw new Error('signature-body.worker.ts must run as a worker thread');

port.on('message', (message: DecodeRequest) => {
  let response: DecodeResponse;
  const transfer: ArrayBuffer[] = [];
  try {
    const input = readSignatureBody(message.body);
    for (const field of input === undefined ? [] : [input.image, input.origImage]) {
      if (field.state !== 'valid') continue;
      const { bytes } = field.image;
      // Only a buffer the image owns whole may move; a pooled one is copied by the structured clone.
      if (
        bytes.byteOffset === 0 &&
        bytes.byteLength === bytes.buffer.byteLength &&
        bytes.buffer instanceof ArrayBuffer
      )
        transfer.push(bytes.buffer);
    }
    response = { id: message.id, input };
  } catch (error) {
    response = { id: message.id, error: error instanceof Error ? error.message : String(error) };
  }
  port.postMessage(response, transfer);
});
