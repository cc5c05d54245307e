/**
 * Imported first by `dicom.worker.ts`, before any library: drops console output on the DICOM threads.
 * The libraries bind the console when they load, and their warnings can quote element values.
 */
const silent = (): void => {};
console.log = silent;
console.info = silent;
console.warn = silent;
console.error = silent;
console.debug = silent;
console.trace = silent;
