/**
 * The DICOM test corpus: the test files that Debian's `python3-pydicom` package ships (unpacked by
 * `.ci/run`, which sets `DICOM_CORPUS_DIR` to its `pydicom/data` folder). Tests that need it skip with
 * this message when the variable is unset.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';

export const CORPUS_SKIP_MESSAGE =
  'DICOM_CORPUS_DIR is not set: set it to the pydicom/data folder of python3-pydicom (see .ci/run)';

/** The corpus's `test_files` folder, or undefined when `DICOM_CORPUS_DIR` is unset. */
export function corpusTestFiles(): string | undefined {
  const dir = process.env.DICOM_CORPUS_DIR;
  if (dir === undefined || dir === '') return undefined;
  const files = path.join(dir, 'test_files');
  if (!existsSync(files)) throw new Error(`DICOM_CORPUS_DIR has no test_files folder: ${dir}`);
  return files;
}
