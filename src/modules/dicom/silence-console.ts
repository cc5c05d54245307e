/**
 * Imported first by `dicom.worker.ts`, before any library: drops console output on the DICOM threads.
 * The libraries bind the console when they load, and their warnings can quote element values. What they
 * report through `console.info` (the WebAssembly decoders) and `console.warn` (PDF.js) is handed to one
 * listener (set by the worker), never printed.
 */
const silent = (): void => {};
let listener: (text: string) => void = silent;
const handOn = (...args: unknown[]) => listener(args.map(String).join(' '));
console.log = silent;
console.info = handOn;
console.warn = handOn;
console.error = silent;
console.debug = silent;
console.trace = silent;

/** Hands every later `console.info` and `console.warn` line of this thread to `next`. */
export function setLibraryMessageListener(next: (text: string) => void): void {
  listener = next;
}
