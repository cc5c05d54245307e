/**
 * A DICOM thread task (`DicomTask`) for tests that occupies its thread until the test lets it go: the
 * bytes name a gate file; the task writes `<gate>.started`, then waits (sleeping, not spinning) until
 * the gate file exists, or a minute has passed.
 */
import { existsSync, writeFileSync } from 'node:fs';

const WAIT_MS = 60_000;

/** Holds the thread until the file named by `bytes` exists; `released`, or `gave up` after a minute. */
export function holdUntilGateOpens(bytes: Uint8Array): string {
  const gate = Buffer.from(bytes).toString('utf8');
  writeFileSync(`${gate}.started`, '');
  const pause = new Int32Array(new SharedArrayBuffer(4));
  const deadline = Date.now() + WAIT_MS;
  while (!existsSync(gate)) {
    if (Date.now() > deadline) return 'gave up';
    Atomics.wait(pause, 0, 0, 10);
  }
  return 'released';
}
