/**
 * Imported first by `dicom.worker.ts`, before any library: drops console output on the DICOM threads.
 * The libraries bind the console when they load, and their warnings can quote element values. What the
 * WebAssembly decoders report goes to `console.info`: it is handed to one listener (set by the worker),
 * never printed.
 */
const silent = (): void => {};
let infoListener: (text: string) => void = silent;
console.log = silent;
console.info = (...args: unknown[]) => infoListener(args.map(String).join(' '));
console.warn = silent;
console.error = silent;
console.debug = silent;
console.trace = silent;

/** Hands every later `console.info` line of this thread to `listener`. */
export function setConsoleInfoListener(listener: (text: string) => void): void {
  infoListener = listener;
}
