/**
 * A DICOM thread task (`DicomTask`) for tests: the decoding libraries the thread that runs it has loaded.
 * CommonJS packages are read from the thread's module cache; PDF.js (an ES module) from the global it sets.
 */
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** The npm packages of the thread's loaded CommonJS modules, and `pdfjs-dist` once PDF.js is loaded. */
export function loadedLibraries(): string[] {
  const loaded = new Set<string>();
  for (const key of Object.keys(require.cache)) {
    const match = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(key.slice(key.lastIndexOf('node_modules/')));
    if (match !== null) loaded.add(match[1]!);
  }
  if ('pdfjsLib' in globalThis) loaded.add('pdfjs-dist');
  return [...loaded].sort();
}
